"""``memcert load`` end to end: Locust runs in subprocesses, never in this process.

Importing Locust here would patch the standard library with gevent and break
pytest-xdist, so every run goes through ``chaos.load.run_load`` or the CLI, both of which
start ``python -m locust`` themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from chaos.load import LoadOptions, run_load
from chaos.metrics import MetricsOptions
from invariants.checkers import check_history
from invariants.history import read_history

from .lossy_service import lossy_service

ROOT = Path(__file__).resolve().parents[2]
USER_RANGE = 1_000_000
CONTRACT = {"write", "delete", "restore", "read"}

pytestmark = pytest.mark.slow


def test_a_short_run_on_the_served_reference_store_is_certified(tmp_path: Path):
    registry = CollectorRegistry()
    out = tmp_path / "out"
    out.mkdir()
    (out / "history.jsonl.zst").write_bytes(b"an earlier run's")
    result = run_load(LoadOptions(users=4, duration_s=5, out=out, seed=7),
                      metrics=MetricsOptions(registry=registry))
    assert not (out / "history.jsonl.zst").exists(), "a stale history is not this run's"

    assert result.report.verdict == "certified", result.report.to_json()["invariants"]
    assert "locust" not in sys.modules and "gevent" not in sys.modules, \
        "memcert load must run Locust in subprocesses, never import it here"
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "certified"
    assert results["seed"] == 7
    assert results["reproduce"].startswith("memcert load --users 4 --duration 5 --seed 7 ")
    for name, verdict in results["invariants"].items():
        assert (verdict["verdict"], verdict["violations"]) == ("pass", 0), name
        assert verdict["checked"] > 0, name
    assert results["scenarios"][0]["name"] == "load"
    assert (out / "junit.xml").is_file() and (out / "locust_stats.csv").is_file()

    history = read_history(out / "history.jsonl")
    assert len(history) == results["history_entries"] > 100
    assert {entry.f for entry in history} == CONTRACT
    assert all(r.violation_count == 0 for r in check_history(history, level="lexical").values())

    summary = json.loads((out / "load.json").read_text())
    assert [w["index"] for w in summary["workers"]] == [0]
    assert summary["workers"][0]["entries"] == len(history)
    requests = {name for name, _, _ in summary["requests"]["counts"]}
    assert requests == CONTRACT | {"search", "recall", "touch", "forget", "export"}

    backend = "memcert serve (sqlite)"
    reads = registry.get_sample_value("memcert_reads_total",
                                      {"backend": backend, "scenario": "load"})
    assert reads == sum(1 for e in history if e.f == "read" and e.type == "ok") > 0
    assert registry.get_sample_value("memcert_lost_writes_total",
                                     {"backend": backend, "scenario": "load"}) == 0
    assert registry.get_sample_value("memcert_last_run_success",
                                     {"backend": backend, "suite": "load"}) == 1
    timed = registry.get_sample_value("memcert_load_request_duration_seconds_count",
                                      {"backend": backend, "request": "search"})
    ok = registry.get_sample_value("memcert_load_requests_total",
                                   {"backend": backend, "request": "search", "outcome": "ok"})
    assert timed == ok > 0


def test_a_distributed_run_merges_both_workers_and_serves_live_metrics(tmp_path: Path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "chaos.cli", "load", "--users", "4", "--duration", "6",
         "--processes", "2", "--seed", "5", "--out", str(out), "--metrics-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    announced = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if line.startswith("memcert: serving metrics at "):
                announced.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert announced.wait(60), "".join(lines)
        url = next(line for line in lines if "serving metrics" in line).split()[-1]
        first = _scrape(url)
        time.sleep(2)
        second = _scrape(url)
        stdout, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(5)
    assert process.returncode == 0, stdout + "".join(lines)
    assert "verdict: CERTIFIED" in stdout

    count = "memcert_load_request_duration_seconds_count"
    assert second[count, "write", ""] > first.get((count, "write", ""), 0)
    operations = "memcert_operations_total", "read", ""
    assert second[operations] > first.get(operations, 0)
    assert second["memcert_load_workers", "", ""] == 2
    assert second["memcert_conflicts_total", "", ""] == 0
    # sub-millisecond buckets: Locust's own statistics stop at whole milliseconds
    bucket = "memcert_load_request_duration_seconds_bucket", "read"
    assert (*bucket, "0.0005") in second and (*bucket, "0.00025") in second

    history = read_history(out / "history.jsonl")
    processes = {entry.worker // USER_RANGE for entry in history}
    assert processes == {0, 1}
    summary = json.loads((out / "load.json").read_text())
    assert sorted(w["index"] for w in summary["workers"]) == [0, 1]
    assert sum(w["entries"] for w in summary["workers"]) == len(history)
    assert all(r.violation_count == 0 for r in check_history(history, level="lexical").values())


def test_a_service_that_loses_writes_fails_the_load(tmp_path: Path):
    out = tmp_path / "out"
    with lossy_service() as url:
        done = subprocess.run(
            [sys.executable, "-m", "chaos.cli", "load", "--host", url, "--users", "3",
             "--duration", "3", "--mix", "write-heavy", "--seed", "2", "--out", str(out)],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: FAILED" in done.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["backend"] == url
    assert results["invariants"]["durability"]["verdict"] == "fail"
    assert results["invariants"]["durability"]["violations"] > 0


def _scrape(url: str) -> dict[tuple[str, str, str], float]:
    """Each sample by name, its request (or op) and its bucket bound, summed over the rest."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            key = (sample.name, labels.get("request") or labels.get("op") or "",
                   labels.get("le", ""))
            samples[key] = samples.get(key, 0.0) + sample.value
    return samples
