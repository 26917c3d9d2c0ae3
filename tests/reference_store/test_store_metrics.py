"""StoreMetrics: what the reference store's write path counts, on a fresh registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from invariants.backend import Ack
from reference_store.metrics import REJECTION_REASONS, STORE_METRICS, StoreMetrics


def make() -> tuple[CollectorRegistry, StoreMetrics]:
    registry = CollectorRegistry()
    return registry, StoreMetrics(registry)


def test_every_label_value_reads_zero_before_anything_happens():
    registry, _ = make()
    for op in ("write", "delete", "restore"):
        for reason in REJECTION_REASONS:
            assert registry.get_sample_value(
                "memcert_store_rejections_total", {"op": op, "reason": reason}) == 0
    assert registry.get_sample_value("memcert_store_merges_total") == 0
    assert registry.get_sample_value("memcert_store_retries_total") == 0
    assert {f.name for f in registry.collect()} == set(STORE_METRICS)


def test_rejections_are_counted_by_op_and_reason():
    registry, metrics = make()
    metrics.acknowledged("write", Ack(False, reason="tombstoned"))
    metrics.acknowledged("write", Ack(False, 3, reason="stale"))
    metrics.acknowledged("restore", Ack(False, reason="not_deleted"))
    metrics.acknowledged("delete", Ack(False, reason="a reason from the future"))
    metrics.invalid("write")

    def rejected(op: str, reason: str) -> float | None:
        return registry.get_sample_value("memcert_store_rejections_total",
                                         {"op": op, "reason": reason})

    assert rejected("write", "tombstoned") == 1
    assert rejected("write", "stale") == 1
    assert rejected("restore", "not_deleted") == 1
    assert rejected("delete", "other") == 1
    assert rejected("write", "invalid_input") == 1


def test_merges_retries_and_tombstone_checks():
    registry, metrics = make()
    metrics.acknowledged("write", Ack(True, 2, reason="merged"))
    metrics.acknowledged("write", Ack(True, 3))
    metrics.acknowledged("write", Ack(False, reason="predates_delete"))
    metrics.acknowledged("write", Ack(False, reason="stale"))
    metrics.acknowledged("delete", Ack(True, 4))
    metrics.retried()
    metrics.retried()

    def checks(op: str, result: str) -> float | None:
        return registry.get_sample_value("memcert_store_tombstone_checks_total",
                                         {"op": op, "result": result})

    assert registry.get_sample_value("memcert_store_merges_total") == 1
    assert registry.get_sample_value("memcert_store_retries_total") == 2
    assert checks("write", "blocked") == 1
    assert checks("write", "clear") == 3
    assert checks("restore", "clear") == 0


def test_a_store_given_metrics_counts_its_decisions(db_url):
    from prometheus_client import CollectorRegistry

    from invariants.backend import Delete, Restore, Write
    from invariants.errors import InvalidInput
    from reference_store import ReferenceStore
    from reference_store.metrics import StoreMetrics

    registry = CollectorRegistry()
    with ReferenceStore(db_url, metrics=StoreMetrics(registry)) as store:
        store.write(Write("m", "e", "drink", "likes americano", 1, "w1"))
        store.write(Write("m", "e", "drink", "Likes Americano.", 2, "w2"))
        store.write(Write("m", "e", "drink", "likes americano", 2, "w2"))
        store.delete(Delete("m", "e", 5, "d1"))
        store.write(Write("m", "e", "drink", "likes tea", 6, "w3"))
        store.restore(Restore("m", "e", 7, "r1"))
        store.write(Write("m", "e", "drink", "likes latte", 4, "w4"))
        with pytest.raises(InvalidInput):
            store.write(Write("m", "", "drink", "x", 8, "w5"))

    def value(name, **labels):
        return registry.get_sample_value(name, labels or None)

    assert value("memcert_store_merges_total") == 1
    assert value("memcert_store_rejections_total", op="write", reason="tombstoned") == 1
    assert value("memcert_store_rejections_total", op="write", reason="predates_delete") == 1
    assert value("memcert_store_rejections_total", op="write", reason="invalid_input") == 1
    assert value("memcert_store_tombstone_checks_total", op="write", result="blocked") == 2
    assert value("memcert_store_tombstone_checks_total", op="write", result="clear") == 2
    assert value("memcert_store_tombstone_checks_total", op="restore", result="clear") == 1
