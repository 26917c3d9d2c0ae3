"""Pushing a run's metrics to a real Pushgateway, and reading them back, there and
through Prometheus."""

from __future__ import annotations

import time
import uuid

from prometheus_client import CollectorRegistry

from chaos.metrics import RunMetrics, push

from .live import get_json, query


def finished_run(backend: str, *, seed: int, success: bool, ended_at: float) -> CollectorRegistry:
    registry = CollectorRegistry()
    metrics = RunMetrics(backend=backend, suite="nightly", level="lexical", seed=seed,
                         violations=lambda: {"deletion_monotonicity": 0 if success else 4})
    registry.register(metrics)
    metrics.begin_scenario("mixed")
    metrics.finish(success=success, duration_s=61.5, ended_at=ended_at)
    return registry


def group(gateway: str, backend: str) -> dict:
    groups = [g for g in get_json(f"{gateway}/api/v1/metrics")["data"]
              if g["labels"].get("backend") == backend]
    assert len(groups) == 1, groups
    return groups[0]


def gauge(found: dict, name: str) -> float | None:
    family = found.get(name)
    if family is None:
        return None
    [metric] = family["metrics"]
    return float(metric["value"])


def test_a_push_is_grouped_by_job_backend_and_suite_with_no_instance(pushgateway_url,
                                                                      prometheus_url):
    backend = f"pushtest-{uuid.uuid4().hex[:10]}:factory"
    grouping = {"backend": backend, "suite": "nightly"}
    push(finished_run(backend, seed=1, success=True, ended_at=1_800_000_000.0),
         pushgateway_url, job="memcert", grouping=grouping)
    pushed = group(pushgateway_url, backend)
    assert pushed["labels"] == {"job": "memcert", **grouping}
    assert gauge(pushed, "memcert_last_run_success") == 1
    assert gauge(pushed, "memcert_last_success_timestamp_seconds") == 1_800_000_000.0
    assert gauge(pushed, "memcert_run_duration_seconds") == 61.5

    push(finished_run(backend, seed=2, success=False, ended_at=1_800_086_400.0),
         pushgateway_url, job="memcert", grouping=grouping)
    pushed = group(pushgateway_url, backend)
    assert gauge(pushed, "memcert_last_run_success") == 0
    assert gauge(pushed, "memcert_last_run_timestamp_seconds") == 1_800_086_400.0
    assert gauge(pushed, "memcert_last_success_timestamp_seconds") == 1_800_000_000.0, (
        "a failed night must not erase the last success")
    [info] = pushed["memcert_run_info"]["metrics"]
    assert info["labels"]["seed"] == "2"

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen = query(prometheus_url, f'memcert_last_run_success{{backend="{backend}"}}')
        if seen and seen[0]["value"][1] == "0":
            break
        time.sleep(0.5)
    assert [s["metric"] for s in seen] == [{
        "__name__": "memcert_last_run_success", "job": "memcert", **grouping}]
