"""What the reference store's write path does, as Prometheus counters.

The harness's metrics (``chaos.metrics``) say what a backend served; these say why the
reference store answered as it did: which writes it refused and for what reason, how
often a write merged into an equal record instead of adding one, how often SQLite or
PostgreSQL contention made it retry, and how often a tombstone decided a write. They
are named here, not in ``chaos.metrics``, because the store may import nothing above
the contract.

A store gets a :class:`StoreMetrics` only if its caller passes one, built on the
caller's registry; a store without one counts nothing and pays nothing.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter

from invariants.backend import Ack

__all__ = ["REJECTION_REASONS", "STORE_METRICS", "StoreMetrics"]

REJECTION_REASONS: Final = ("tombstoned", "predates_delete", "stale", "not_deleted",
                            "invalid_input", "other")
"""The ``reason`` label's values: the store's Ack reasons, invalid input, and the rest."""

STORE_METRICS: Final = {
    "memcert_store_rejections": ("op", "reason"),
    "memcert_store_merges": (),
    "memcert_store_retries": (),
    "memcert_store_tombstone_checks": ("op", "result"),
}
"""Each counter's name (the exposition adds ``_total``) and its labels."""

_OPS: Final = ("write", "delete", "restore")
_TOMBSTONE_RESULTS: Final = ("blocked", "clear")
_BLOCKED_BY_TOMBSTONE: Final = frozenset({"tombstoned", "predates_delete", "not_deleted"})


class StoreMetrics:
    """Counters for one store's write path, registered in ``registry``. Every label value
    is pre-created, so a counter reads 0 rather than missing before it first moves."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.rejections = Counter(
            "memcert_store_rejections", "Operations the store refused, by reason.",
            STORE_METRICS["memcert_store_rejections"], registry=registry)
        self.merges = Counter(
            "memcert_store_merges",
            "Writes folded into an active record of the same fact instead of adding one.",
            registry=registry)
        self.retries = Counter(
            "memcert_store_retries",
            "Transactions retried after lock contention or a serialization failure.",
            registry=registry)
        self.tombstone_checks = Counter(
            "memcert_store_tombstone_checks",
            "Writes and restores checked against the entity's tombstone: blocked when the "
            "tombstone refused them, clear otherwise.",
            STORE_METRICS["memcert_store_tombstone_checks"], registry=registry)
        for op in _OPS:
            for reason in REJECTION_REASONS:
                self.rejections.labels(op, reason)
        for op in ("write", "restore"):
            for result in _TOMBSTONE_RESULTS:
                self.tombstone_checks.labels(op, result)

    def acknowledged(self, op: str, ack: Ack) -> None:
        """Count the store's answer to one write, delete or restore (``op``)."""
        if op in ("write", "restore"):
            blocked = not ack.applied and ack.reason in _BLOCKED_BY_TOMBSTONE
            self.tombstone_checks.labels(op, "blocked" if blocked else "clear").inc()
        if not ack.applied:
            reason = ack.reason if ack.reason in REJECTION_REASONS else "other"
            self.rejections.labels(op, reason).inc()
        elif ack.reason == "merged":
            self.merges.inc()

    def invalid(self, op: str) -> None:
        """Count an operation refused as invalid input before it reached the database."""
        self.rejections.labels(op, "invalid_input").inc()

    def retried(self) -> None:
        """Count one retry of a transaction."""
        self.retries.inc()
