"""promtool's linter on what memcert exports: names, units, help and types."""

from __future__ import annotations

import subprocess

from prometheus_client import CollectorRegistry, generate_latest

from chaos.metrics import RunMetrics
from invariants.backend import Ack
from reference_store.metrics import StoreMetrics


def test_promtool_finds_nothing_to_fix_in_the_exposition(promtool):
    registry = CollectorRegistry()
    found = {"uniqueness": 0}
    run = RunMetrics(backend="b:f", suite="nightly", level="lexical", seed=3,
                     violations=lambda: found)
    registry.register(run)
    run.begin_scenario("mixed")
    found["uniqueness"] = 2
    run.finish(success=True, duration_s=1.0)
    store = StoreMetrics(registry)
    store.acknowledged("write", Ack(True, 1, reason="merged"))
    store.retried()
    text = generate_latest(registry)
    assert b"memcert_store_merges_total 1.0" in text
    assert b'memcert_conflicts_total{backend="b:f",scenario="mixed"} 2.0' in text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == b""
