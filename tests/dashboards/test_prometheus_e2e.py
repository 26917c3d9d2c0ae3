"""End to end: memcert runs, a real Prometheus scrapes them, and every dashboard panel
and recording rule answers with the rates the backends deserve.

Four `memcert chaos` processes run at once, each serving /metrics on a free port and
pushing to the Pushgateway when done: a backend that revives deleted entities, one that
stores paraphrases as new facts, the reference store, and the correct in-memory example.
A `memcert nightly` of the reviving backend pushes its night beside them, and the test
itself serves what the production guard exports (the same counters with
source="guard", scenario "production"), so the guard row and its alert answer too.
Their factories get names of this test's own (a module written to tmp_path), so the
backend labels are unique and nothing another run left in Prometheus can answer for
them. Prometheus learns the ports before the runs start, so it scrapes them throughout.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server

from chaos.metrics import VIOLATION_METRICS
from chaos.report import INVARIANTS
from invariants.causes import CAUSES

from .live import by_label, get_json, query
from .promql import GUARD, annotations, panel_targets, recording_rules, substitute

DURATION_S = 13
SETTLE_S = 30
BACKENDS = {
    "revives": ("chaos.examples", "restore_revives", 1),
    "duplicates": ("chaos.examples", "surface_only", 1),
    "reference": ("reference_store", "factory", None),
    "clean": ("chaos.examples", "in_memory", 0),
}
"""Each test backend: the module and factory it stands for, and the run's exit code
(the reference store's may be 3, unknown, when contention leaves a condition untested)."""
MUST_FIND = {"revives": {"resurrections"}, "duplicates": {"duplicates", "conflicts"}}
MUST_FAIL = {"revives": {"deletion_monotonicity"},
             "duplicates": {"semantic_normalization", "uniqueness"}}
"""The invariants whose rate, failed checks per check, must be above 0 (and at most 1)."""
MUST_CAUSE = {"revives": {("deletion_monotonicity", "restore_revived")},
              "duplicates": {("semantic_normalization", "duplicate")}}
"""The root causes each planted bug must show as violations a second above 0."""
CAUSE_RULE = "backend_invariant_cause:memcert_violations:rate5m"
RATIO = "backend_invariant:memcert_failed_checks_per_checks:ratio_rate5m"
CORRECT = ("reference", "clean")
NIGHTLY = ("chaos.examples", "restore_revives")
"""The night pushed: a known-bad backend, so its Last result is failed (0)."""
GUARD_CAUSE = ("uniqueness", "alias")
"""The violation the guard's samples report, a few a second."""
KINDS = ("conflicts", "reorders", "resurrections", "duplicates", "lost_writes",
         "isolation_leaks", "phantoms")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(tmp_path: Path, module: str, name: str, port: int,
          gateway: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "chaos.cli", "chaos", f"{module}:{name}",
         "--metrics-port", str(port), "--pushgateway", gateway, "--duration", str(DURATION_S),
         "--seed", "20261129", "--quiet", "--out", str(tmp_path / name)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MEMCERT_DB_URL": f"sqlite:///{tmp_path / 'reference.db'}"})


def wait_for_targets(prometheus: str, instances: set[str]) -> None:
    """Prometheus knows the targets before they serve, so it scrapes from the start."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        active = get_json(f"{prometheus}/api/v1/targets?state=active")["data"]["activeTargets"]
        if instances <= {t["labels"]["instance"] for t in active}:
            return
        time.sleep(0.2)
    pytest.fail(f"Prometheus never picked up {sorted(instances)}")


def problems(prometheus: str, module: str) -> list[str]:
    """Everything that is not yet as it should be; empty once Prometheus has it all."""
    found: list[str] = []
    ours = f"{module}:.*"
    backend = {name: f"{module}:{name}" for name in (*BACKENDS, "nightly")}
    guarded = f"{module}:guarded"
    last_shown: dict[str, float] = {}
    for panel, target in panel_targets():
        expr = substitute(target["expr"], backend=ours)
        values = by_label(query(prometheus, expr))
        if not values:
            found.append(f"panel {panel['title']!r} returned no data for {expr}")
        shown = set(values) - {""}
        if GUARD[1:-1] in expr and not shown <= {guarded}:
            found.append(f"guard panel {panel['title']!r} shows chaos runs {sorted(shown)}")
        if GUARD[1:-1] not in expr and guarded in shown:
            found.append(f"panel {panel['title']!r} shows the guard's series")
        if panel["title"] == "Last result":
            result = query(prometheus, expr)
            if len(result) != len(values):
                found.append(f"Last result shows a backend twice: {result}")
            last_shown = values
    for annotation in annotations():
        pushed = {(s["metric"]["backend"], s["metric"]["suite"]) for s in query(
            prometheus, substitute(annotation["expr"], backend=ours))}
        if (backend["nightly"], "nightly") not in pushed:
            found.append(f"annotation {annotation['name']!r} has no night: {sorted(pushed)}")
    last = by_label(query(prometheus, f'memcert_last_run_success{{backend=~"{ours}"}}'))
    if last != {backend["revives"]: 0, backend["duplicates"]: 0, backend["clean"]: 1,
                backend["nightly"]: 0, backend["reference"]: last.get(backend["reference"])}:
        found.append(f"pushed last results are {last}")
    verdicts = by_label(query(prometheus, f'memcert_last_run_result{{backend=~"{ours}"}}'))
    unknown_or_certified = 1 if last.get(backend["reference"]) == 1 else -1
    if {name: verdicts.get(full) for name, full in backend.items()} != {
            "revives": 0, "duplicates": 0, "clean": 1, "nightly": 0,
            "reference": unknown_or_certified}:
        found.append(f"pushed three-state results are {verdicts}")
    if last_shown != verdicts:
        found.append(f"the Last result panel shows {last_shown}, not {verdicts}")
    for rule, expr in recording_rules().items():
        values = by_label(query(prometheus, f'{rule}{{backend=~"{ours}"}}'))
        expected = {guarded} if GUARD in expr or ":memcert_guard_" in rule else set(
            backend.values())
        if set(values) != expected:
            found.append(f"recording rule {rule} has {sorted(values)}, not {sorted(expected)}")
    invariant, cause = GUARD_CAUSE
    guard_alert = query(prometheus, f'ALERTS{{alertname="MemcertGuardViolation", '
                                    f'backend="{guarded}", alertstate="firing"}}')
    if [(a["metric"]["scenario"], a["metric"]["invariant"], a["metric"]["cause"])
            for a in guard_alert] != [("production", invariant, cause)]:
        found.append(f"MemcertGuardViolation for the guard is {guard_alert}")
    for kind in KINDS:
        rate = by_label(query(prometheus, f'backend:memcert_{kind}:rate5m{{backend=~"{ours}"}}'))
        for name, must in MUST_FIND.items():
            seen = rate.get(backend[name], math.nan)
            if kind in must and not seen > 0:
                found.append(f"{name}: {kind} a second is {seen}, not > 0")
        for name in CORRECT:
            seen = rate.get(backend[name], math.nan)
            if seen != 0:
                found.append(f"{name}: {kind} a second is {seen}, not 0")
    for invariant in INVARIANTS:
        selector = f'{{backend=~"{ours}", invariant="{invariant}"}}'
        ratio = by_label(query(prometheus, f"{RATIO}{selector}"))
        for name, must in MUST_FAIL.items():
            seen = ratio.get(backend[name], math.nan)
            if invariant in must and not 0 < seen <= 1:
                found.append(f"{name}: the {invariant} rate is {seen}, not in (0, 1]")
        for name in CORRECT:
            seen = ratio.get(backend[name], math.nan)
            if not (seen == 0 or math.isnan(seen)):  # NaN: no check of it in the window
                found.append(f"{name}: the {invariant} rate is {seen}, not 0")
    causes: dict[str, dict[tuple[str, str], float]] = {name: {} for name in backend}
    names = {full: name for name, full in backend.items()}
    for series in query(prometheus, f'{CAUSE_RULE}{{backend=~"{ours}"}}'):
        labels = series["metric"]
        causes[names[labels["backend"]]][(labels["invariant"], labels["cause"])] = float(
            series["value"][1])
    every = {(i, c) for i, checkers in INVARIANTS.items() for k in checkers for c in CAUSES[k]}
    for name, seen in causes.items():
        if set(seen) != every:
            found.append(f"{name}: the cause series are {sorted(seen)}, not every cause")
        for key in MUST_CAUSE.get(name, ()):
            if not seen.get(key, math.nan) > 0:
                found.append(f"{name}: {key} a second is {seen.get(key)}, not > 0")
        if name in CORRECT and any(seen.values()):
            found.append(f"{name}: causes found {[k for k, v in seen.items() if v]}")
    for alert, name in (("MemcertResurrectionsDetected", "revives"),
                        ("MemcertDuplicatesDetected", "duplicates"),
                        ("MemcertNightlyFailed", "revives")):
        active = by_label(query(prometheus, f'ALERTS{{alertname="{alert}"}}'))
        if backend[name] not in active:
            found.append(f"{alert} is not active for {name}")
    return found


def serve_guard(backend: str) -> tuple[int, threading.Event, Callable[[], None]]:
    """Serve what the production guard exports, as it would from an application: the
    same violation and check counters with source="guard", scenario "production", and
    a few alias conflicts a second until the returned event is set."""
    registry = CollectorRegistry()
    labels = {"backend": backend, "scenario": "production", "source": "guard"}
    kinds = {name: Counter(m.name, m.help, [*labels], registry=registry)
             for name, m in VIOLATION_METRICS.items()}
    checks = Counter("memcert_checks", "checks", [*labels, "invariant"], registry=registry)
    failed = Counter("memcert_failed_checks", "failed checks", [*labels, "invariant"],
                     registry=registry)
    violations = Counter("memcert_violations", "violations", [*labels, "invariant", "cause"],
                         registry=registry)
    for counter in kinds.values():
        counter.labels(**labels)
    for invariant, checkers in INVARIANTS.items():
        checks.labels(**labels, invariant=invariant)
        failed.labels(**labels, invariant=invariant)
        for cause in (c for k in checkers for c in CAUSES[k]):
            violations.labels(**labels, invariant=invariant, cause=cause)
    invariant, cause = GUARD_CAUSE
    stop = threading.Event()

    def traffic() -> None:
        while not stop.wait(0.25):
            for name in INVARIANTS:
                checks.labels(**labels, invariant=name).inc(10)
            failed.labels(**labels, invariant=invariant).inc()
            violations.labels(**labels, invariant=invariant, cause=cause).inc()
            kinds[invariant].labels(**labels).inc()

    threading.Thread(target=traffic, daemon=True).start()
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)

    def stop_serving() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    return int(server.server_address[1]), stop, stop_serving


@pytest.mark.slow
def test_every_panel_and_rule_answers_from_a_real_prometheus(
        tmp_path, prometheus_url, pushgateway_url, prometheus_targets):
    started = time.monotonic()
    module = f"e2e_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text("".join(
        f"from {source} import {factory} as {name}\n"
        for name, (source, factory, _) in {**BACKENDS, "nightly": (*NIGHTLY, 1)}.items()))
    ports = {name: free_port() for name in BACKENDS}
    guard_port, stop_guard, stop_serving = serve_guard(f"{module}:guarded")
    ports["guarded"] = guard_port
    targets = Path(prometheus_targets) / f"{module}.json"
    targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports.values()]}]))
    runs: dict[str, subprocess.Popen[str]] = {}
    try:
        wait_for_targets(prometheus_url, {f"127.0.0.1:{p}" for p in ports.values()})
        runs = {name: start(tmp_path, module, name, ports[name], pushgateway_url)
                for name in BACKENDS}
        runs["nightly"] = subprocess.Popen(
            [sys.executable, "-m", "chaos.cli", "nightly", f"{module}:nightly", "--out",
             str(tmp_path / "nights"), "--budget", "3", "--seed", "20261202", "--quiet",
             "--pushgateway", pushgateway_url],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, process in runs.items():
            out, err = process.communicate(timeout=DURATION_S * 9)
            expected = BACKENDS[name][2] if name in BACKENDS else 1
            assert process.returncode in ((0, 3) if expected is None else (expected,)), (
                f"{name}: {out}\n{err}")
        deadline = time.monotonic() + SETTLE_S
        while (found := problems(prometheus_url, module)) and time.monotonic() < deadline:
            time.sleep(1)
        assert found == []
    finally:
        stop_guard.set()
        stop_serving()
        targets.unlink(missing_ok=True)
        for process in runs.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    print(f"end to end against Prometheus took {time.monotonic() - started:.1f}s")
