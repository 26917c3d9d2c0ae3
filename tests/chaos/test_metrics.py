"""chaos.metrics: the names, the counts an observed history gives, serving and pushing.

Every test builds its own CollectorRegistry and reads it with get_sample_value.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from importlib import metadata

import pytest
from prometheus_client import CollectorRegistry

from chaos.certify import CertifyOptions, certify
from chaos.cli import main
from chaos.cli_parser import build_parser
from chaos.metrics import (
    BUCKETS_S,
    METRICS,
    VIOLATION_METRICS,
    MetricsOptions,
    RunMetrics,
    metric_name,
    sample_names,
)
from chaos.report import INVARIANTS
from invariants.backend import Ack, Delete, Record, Write
from invariants.causes import CAUSES
from invariants.checkers import CHECKER_NAMES, CheckerSuite
from invariants.errors import InvalidArgument
from invariants.history import HistoryRecorder, Read, WriteMeta

BACKEND = "tests:backend"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_names_are_assembled_from_namespace_name_and_base_unit():
    assert metric_name("operation_duration", "seconds") == "memcert_operation_duration_seconds"
    assert metric_name("reads") == "memcert_reads"
    with pytest.raises(InvalidArgument) as unit:
        metric_name("latency", "milliseconds")
    assert str(unit.value) == ("unit='milliseconds' is not a base unit; use one of '', "
                               "'seconds', 'bytes', 'ratio', 'timestamp_seconds'")
    with pytest.raises(InvalidArgument) as total:
        metric_name("reads_total")
    assert str(total.value) == ("metric name 'memcert_reads_total' is not valid: use letters, "
                                "digits and underscores, and leave _total to the exposition")
    with pytest.raises(InvalidArgument):
        metric_name("reads-served")


def test_the_catalogue_names_what_the_dashboards_rely_on():
    assert sample_names() >= {
        "memcert_operations_total", "memcert_reads_total", "memcert_conflicts_total",
        "memcert_resurrections_total", "memcert_duplicates_total", "memcert_reorders_total",
        "memcert_lost_writes_total", "memcert_isolation_leaks_total",
        "memcert_operation_duration_seconds_bucket", "memcert_last_run_timestamp_seconds",
        "memcert_last_run_success", "memcert_last_run_result", "memcert_run_duration_seconds",
        "memcert_run_info",
        "memcert_checks_total", "memcert_failed_checks_total", "memcert_violations_total",
    }
    assert set(VIOLATION_METRICS) == set(CHECKER_NAMES)
    assert all(m.name.startswith("memcert_") for m in METRICS)
    assert all(m.samples[0].endswith("_total") for m in METRICS if m.kind == "counter")
    assert max(len(m.labels) for m in METRICS if m.name != "memcert_run") <= 4
    assert BUCKETS_S[0] < 0.0001 and list(BUCKETS_S) == sorted(BUCKETS_S)


def observed_run(registry: CollectorRegistry) -> RunMetrics:
    """Two scenarios by hand: a clean one, then one whose read revives a deleted entity."""
    suite = CheckerSuite(level="lexical")
    metrics = RunMetrics(backend=BACKEND, suite="unit", level="lexical", seed=7,
                         violations=suite.violation_counts, rate_terms=suite.rate_terms,
                         causes=suite.cause_counts)
    registry.register(metrics)
    times = iter(range(0, 10**10, 10**6))  # every entry 1 ms after the previous one
    clock_ns = [0]

    def clock() -> int:
        clock_ns[0] = next(times)
        return clock_ns[0]

    recorder = HistoryRecorder(clock=clock, observers=[suite.observe, metrics.observe])
    metrics.begin_scenario("alpha")
    write = Write("ns", "u1", "city", "lives in Oslo", 1, "op-1")
    w = recorder.invoke(0, write, meta=WriteMeta("f1", "city"))
    recorder.ok(w, Ack(True, 1))
    r = recorder.invoke(1, Read("ns", "u1"))
    recorder.ok(r, [Record("u1", "city", "lives in Oslo", 1, 1)])
    stale = recorder.invoke(0, Write("ns", "u1", "city", "lives in Rome", 0, "op-2"),
                            meta=WriteMeta("f2", "city"))
    recorder.fail(stale, Ack(False, reason="stale"))
    metrics.begin_scenario("beta")
    d = recorder.invoke(2, Delete("ns", "u1", 2, "op-3"))
    recorder.ok(d, Ack(True, 2))
    late = recorder.invoke(2, Delete("ns", "u2", 3, "op-4"))
    recorder.info(late, TimeoutError("no answer"))
    revived = recorder.invoke(1, Read("ns", "u1"))
    recorder.ok(revived, [Record("u1", "city", "lives in Oslo", 1, 1)])
    broken = recorder.invoke(1, Read("ns", "u1"))
    recorder.fail(broken, "OSError: connection reset")
    return metrics


def test_operations_are_counted_by_scenario_op_and_outcome():
    registry = CollectorRegistry()
    observed_run(registry)
    ops = "memcert_operations_total"
    assert value(registry, ops, backend=BACKEND, scenario="alpha", op="write",
                 outcome="ok") == 1
    assert value(registry, ops, backend=BACKEND, scenario="alpha", op="write",
                 outcome="rejected") == 1
    assert value(registry, ops, backend=BACKEND, scenario="alpha", op="read", outcome="ok") == 1
    assert value(registry, ops, backend=BACKEND, scenario="beta", op="delete",
                 outcome="unknown") == 1
    assert value(registry, ops, backend=BACKEND, scenario="beta", op="read",
                 outcome="error") == 1
    assert value(registry, "memcert_reads_total", backend=BACKEND, scenario="alpha") == 1
    assert value(registry, "memcert_reads_total", backend=BACKEND, scenario="beta") == 1


def test_latency_is_the_time_from_invocation_to_completion():
    registry = CollectorRegistry()
    observed_run(registry)
    labels = {"backend": BACKEND, "scenario": "alpha", "op": "write"}
    hist = "memcert_operation_duration_seconds"
    assert value(registry, f"{hist}_count", **labels) == 2
    assert value(registry, f"{hist}_sum", **labels) == pytest.approx(0.002)
    assert value(registry, f"{hist}_bucket", **labels, le="0.0005") == 0
    assert value(registry, f"{hist}_bucket", **labels, le="0.001") == 2
    assert value(registry, f"{hist}_bucket", **labels, le="+Inf") == 2


def test_violations_are_read_from_the_checkers_and_belong_to_the_running_scenario():
    registry = CollectorRegistry()
    observed_run(registry)
    resurrections = "memcert_resurrections_total"
    assert value(registry, resurrections, backend=BACKEND, scenario="alpha") == 0
    assert value(registry, resurrections, backend=BACKEND, scenario="beta") == 1
    assert value(registry, "memcert_conflicts_total", backend=BACKEND, scenario="beta") == 0
    assert value(registry, "memcert_run_info", backend=BACKEND, suite="unit",
                 version=metadata.version("memcert"),
                 seed="7", level="lexical") == 1


def test_each_invariants_checks_and_failed_checks_belong_to_the_running_scenario():
    """The two terms of each invariant's rate, summed over its checkers as results.json
    sums them: alpha's read checked one slot after an acknowledged write (durability)
    and one record (phantom), both under durability."""
    registry = CollectorRegistry()
    observed_run(registry)
    checks, failed = "memcert_checks_total", "memcert_failed_checks_total"

    def terms(scenario: str, invariant: str) -> tuple[float | None, float | None]:
        labels = {"backend": BACKEND, "scenario": scenario, "invariant": invariant}
        return value(registry, failed, **labels), value(registry, checks, **labels)

    assert terms("alpha", "durability") == (0, 2)
    assert terms("alpha", "causal_monotonicity") == (0, 1)
    assert terms("alpha", "deletion_monotonicity") == (0, 0)
    assert terms("beta", "deletion_monotonicity") == (1, 1)
    assert terms("beta", "durability") == (0, 1)


def by_cause(registry: CollectorRegistry) -> dict[tuple[str, str, str], float]:
    """memcert_violations_total's samples, by scenario, invariant and cause."""
    return {(s.labels["scenario"], s.labels["invariant"], s.labels["cause"]): s.value
            for family in registry.collect() for s in family.samples
            if s.name == "memcert_violations_total"}


def test_violations_by_cause_belong_to_the_running_scenario_every_cause_from_0():
    """beta's read served a record acknowledged before the delete was invoked: the
    delete was ignored. Every other (invariant, cause) series is there, at 0."""
    registry = CollectorRegistry()
    observed_run(registry)
    found = by_cause(registry)
    assert set(found) == {(scenario, invariant, cause) for scenario in ("alpha", "beta")
                          for invariant, checkers in INVARIANTS.items()
                          for checker in checkers for cause in CAUSES[checker]}
    assert {key: n for key, n in found.items() if n} == {
        ("beta", "deletion_monotonicity", "delete_ignored"): 1}
    for scenario in ("alpha", "beta"):
        for invariant, checkers in INVARIANTS.items():
            kinds = sum(value(registry, f"{VIOLATION_METRICS[c].name}_total",
                              backend=BACKEND, scenario=scenario) for c in checkers)
            assert sum(n for (s, i, _), n in found.items()
                       if (s, i) == (scenario, invariant)) == kinds, (scenario, invariant)


def test_the_suites_cause_counts_list_every_cause_of_each_checker_in_order():
    suite = CheckerSuite(level="lexical")
    assert {name: list(counts) for name, counts in suite.cause_counts().items()} == {
        name: list(CAUSES[name]) for name in CHECKER_NAMES}
    assert all(n == 0 for counts in suite.cause_counts().values() for n in counts.values())


def test_without_cause_counts_no_cause_series_is_exported():
    """A zero would claim the causes were counted."""
    registry = CollectorRegistry()
    registry.register(RunMetrics(backend=BACKEND, suite="unit", level="lexical", seed=7,
                                 violations=dict))
    registry.collect()
    assert by_cause(registry) == {}
    assert "memcert_violations_total" in sample_names()


def test_batch_gauges_appear_when_the_run_ends_and_success_sets_the_last_success():
    registry = CollectorRegistry()
    metrics = observed_run(registry)
    labels = {"backend": BACKEND, "suite": "unit"}
    assert value(registry, "memcert_last_run_timestamp_seconds", **labels) is None
    metrics.finish(success=False, duration_s=12.5, ended_at=1_800_000_000.0)
    assert value(registry, "memcert_last_run_timestamp_seconds", **labels) == 1_800_000_000.0
    assert value(registry, "memcert_last_run_success", **labels) == 0
    assert value(registry, "memcert_run_duration_seconds", **labels) == 12.5
    assert value(registry, "memcert_last_success_timestamp_seconds", **labels) is None
    assert value(registry, "memcert_resurrections_total", backend=BACKEND, scenario="beta") == 1
    metrics.finish(success=True, duration_s=3.0, ended_at=1_800_000_100.0)
    assert value(registry, "memcert_last_success_timestamp_seconds", **labels) == 1_800_000_100.0


@pytest.mark.parametrize(("verdict", "success", "result"), [
    ("certified", True, 1), ("failed", False, 0), ("unknown", False, -1), (None, False, 0)])
def test_the_last_result_tells_certified_failed_and_unknown_apart(verdict, success, result):
    """memcert_last_run_success keeps meaning 1 or 0; memcert_last_run_result has three
    states, and a run that did not succeed with no verdict given counts as failed."""
    registry = CollectorRegistry()
    metrics = observed_run(registry)
    metrics.finish(success=success, duration_s=1.0, ended_at=1_800_000_000.0, verdict=verdict)
    labels = {"backend": BACKEND, "suite": "unit"}
    assert value(registry, "memcert_last_run_result", **labels) == result
    assert value(registry, "memcert_last_run_success", **labels) == (1 if success else 0)


def test_a_verdict_that_contradicts_success_is_refused():
    metrics = observed_run(CollectorRegistry())
    with pytest.raises(InvalidArgument, match="verdict='unknown' contradicts success=True"):
        metrics.finish(success=True, duration_s=1.0, verdict="unknown")


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            totals[name] = totals.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


@pytest.mark.slow
def test_counters_move_while_certify_runs_and_match_the_verdict(tmp_path):
    registry = CollectorRegistry()
    ports: list[int] = []
    outcome: dict[str, object] = {}

    def run() -> None:
        outcome["report"] = certify(
            "chaos.examples:restore_revives",
            CertifyOptions(budget_s=6, seed=11, out=tmp_path / "out"),
            metrics=MetricsOptions(port=0, registry=registry, on_serving=ports.append))

    thread = threading.Thread(target=run)
    thread.start()
    seen: list[dict[str, float]] = []
    while thread.is_alive():
        if ports:  # the run may end between the check and the scrape
            with contextlib.suppress(urllib.error.URLError, ConnectionError):
                seen.append(scrape(ports[0]))
        time.sleep(0.1)
    thread.join()
    operations = [s.get("memcert_operations_total", 0) for s in seen]
    revived = [s.get("memcert_resurrections_total", 0) for s in seen]
    assert len(set(operations)) >= 3, operations
    assert operations == sorted(operations)
    assert max(revived) > 0, "resurrections never showed while the run went on"
    with pytest.raises(urllib.error.URLError):
        scrape(ports[0])
    report = outcome["report"]
    total = sum(sample.value for family in registry.collect() for sample in family.samples
                if sample.name == "memcert_resurrections_total")
    assert total == report.checks["deletion_monotonicity"].violation_count > 0
    causes: dict[str, float] = {}
    for (_, invariant, cause), n in by_cause(registry).items():
        if invariant == "deletion_monotonicity":
            causes[cause] = causes.get(cause, 0) + n
    assert causes == report.checks["deletion_monotonicity"].causes
    assert causes["restore_revived"] > 0
    assert report.verdict == "failed"


def test_a_port_in_use_is_a_usage_error(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["certify", "chaos.examples:in_memory", "--budget", "1", "--quiet",
                     "--out", str(tmp_path / "out"), "--metrics-port", str(port)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"memcert: metrics port {port} cannot be served on 127.0.0.1 ([Errno 98] Address "
        "already in use); pick a free port, or 0 for any\n")


def test_a_failed_push_is_logged_and_leaves_the_verdict_alone(tmp_path, caplog):
    gateway = f"http://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING, logger="memcert.metrics"):
        report = certify("chaos.examples:restore_revives",
                         CertifyOptions(budget_s=3, seed=5, out=tmp_path / "out"),
                         metrics=MetricsOptions(pushgateway=gateway,
                                                registry=CollectorRegistry()))
    assert report.verdict == "failed"
    [record] = caplog.records
    assert record.getMessage().startswith(
        f"could not push to the Pushgateway at {gateway} (")
    assert record.getMessage().endswith("); the verdict stands")


def test_metrics_options_are_checked():
    with pytest.raises(InvalidArgument) as port:
        MetricsOptions(port=70000)
    assert str(port.value) == ("metrics port=70000 is not a TCP port; give 0 to 65535 "
                               "(0 picks a free one)")
    with pytest.raises(InvalidArgument) as url:
        MetricsOptions(pushgateway="pushgateway:9091")
    assert str(url.value) == ("pushgateway='pushgateway:9091' is not an http(s) URL; give "
                              "e.g. http://127.0.0.1:9091")


def test_metrics_options_come_from_flags_or_environment(monkeypatch):
    args = build_parser().parse_args(["certify", "--metrics-port", "9464",
                                      "--pushgateway", "http://127.0.0.1:9091"])
    assert (args.metrics_port, args.pushgateway) == (9464, "http://127.0.0.1:9091")
    monkeypatch.setenv("MEMCERT_METRICS_PORT", "0")
    monkeypatch.setenv("MEMCERT_PUSHGATEWAY", "http://gw:9091")
    args = build_parser().parse_args(["certify"])
    assert (args.metrics_port, args.pushgateway) == (0, "http://gw:9091")
    args = build_parser().parse_args(["nightly"])
    assert (args.suite, args.budget, args.pushgateway, args.keep, args.metrics_port) == (
        "nightly", None, "http://gw:9091", 30, 0)

