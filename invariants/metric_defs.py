"""The names, kinds and meanings of memcert's violation metrics, defined once.

A chaos run (``chaos.metrics``) and the production guard (``invariants.guarding``) export
the same violation counters, so a dashboard panel reads both and tells them apart by the
``source`` label alone. The definitions live here, in the bottom layer, because the
guard sits below ``chaos``; ``chaos.metrics`` imports them and adds the run's own.

Nothing here imports ``prometheus_client``: a :class:`MetricDef` is plain data, and
each exporter builds its metric families from it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from invariants.errors import InvalidArgument

__all__ = [
    "CHECKS",
    "CONFLICTS",
    "DUPLICATES",
    "FAILED_CHECKS",
    "GUARD_CHECKS",
    "GUARD_DROPS",
    "GUARD_QUEUE_DEPTH",
    "GUARD_SAMPLED",
    "ISOLATION_LEAKS",
    "LOST_WRITES",
    "NAMESPACE",
    "PHANTOMS",
    "REORDERS",
    "RESURRECTIONS",
    "SOURCE_LABEL",
    "VIOLATIONS_BY_CAUSE",
    "VIOLATION_METRICS",
    "Kind",
    "MetricDef",
    "metric_name",
]

NAMESPACE = "memcert"
SOURCE_LABEL = "source"
"""The label the guard adds to the violation counters (``source="guard"``); a chaos run
exports them without it."""

Kind = Literal["counter", "gauge", "histogram", "info"]

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_UNITS = ("", "seconds", "bytes", "ratio", "timestamp_seconds")


def metric_name(name: str, unit: str = "", *, namespace: str = NAMESPACE) -> str:
    """``namespace_name_unit``, checked the way Prometheus checks names.

    The unit must be a base unit (seconds, not milliseconds), and a counter's
    ``_total`` is not part of the name: the exposition adds it.
    """
    if unit not in _UNITS:
        raise InvalidArgument(f"unit={unit!r} is not a base unit; use one of "
                              f"{', '.join(repr(u) for u in _UNITS)}")
    full = "_".join(part for part in (namespace, name, unit) if part)
    if not _NAME.match(full) or full.endswith("_total"):
        raise InvalidArgument(f"metric name {full!r} is not valid: use letters, digits and "
                              "underscores, and leave _total to the exposition")
    return full


@dataclass(frozen=True)
class MetricDef:
    """One metric: its name as assembled, its type, its labels and its meaning."""

    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str

    @property
    def samples(self) -> tuple[str, ...]:
        """The sample names Prometheus stores for it, which PromQL can select."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}_{suffix}" for suffix in ("bucket", "sum", "count"))
        if self.kind == "info":
            return (f"{self.name}_info",)
        return (self.name,)


CONFLICTS = MetricDef(
    metric_name("conflicts"), "counter", ("backend", "scenario"),
    "Reads of a slot that served two or more facts for it (the uniqueness invariant).")
REORDERS = MetricDef(
    metric_name("reorders"), "counter", ("backend", "scenario"),
    "Reads that served records out of causal order, or a stale fact (causal monotonicity).")
RESURRECTIONS = MetricDef(
    metric_name("resurrections"), "counter", ("backend", "scenario"),
    "Reads that served records of a deleted entity (deletion monotonicity).")
DUPLICATES = MetricDef(
    metric_name("duplicates"), "counter", ("backend", "scenario"),
    "Facts a read served twice for one slot, one per read, slot and fact, so it can "
    "exceed the reads (semantic normalization).")
LOST_WRITES = MetricDef(
    metric_name("lost_writes"), "counter", ("backend", "scenario"),
    "Acknowledged writes that a later read no longer served (durability).")
ISOLATION_LEAKS = MetricDef(
    metric_name("isolation_leaks"), "counter", ("backend", "scenario"),
    "Records served whose value was written only in another namespace (isolation).")
PHANTOMS = MetricDef(
    metric_name("phantoms"), "counter", ("backend", "scenario"),
    "Records served whose value no write produced (reported under durability).")
CHECKS = MetricDef(
    metric_name("checks"), "counter", ("backend", "scenario", "invariant"),
    "Opportunities for a violation each invariant examined, in its own unit "
    "(docs/invariants.md): the denominator of its rate, results.json's checked.")
FAILED_CHECKS = MetricDef(
    metric_name("failed_checks"), "counter", ("backend", "scenario", "invariant"),
    "Checks that found a violation: the numerator of each invariant's rate, results.json's "
    "rate_numerator; never above memcert_checks_total.")
VIOLATIONS_BY_CAUSE = MetricDef(
    metric_name("violations"), "counter", ("backend", "scenario", "invariant", "cause"),
    "Violations by invariant and root cause (invariants.causes), every cause from 0; summed "
    "over cause, an invariant's equals its violation counters (durability: lost writes + "
    "phantoms).")

VIOLATION_METRICS: Mapping[str, MetricDef] = {
    "uniqueness": CONFLICTS,
    "causal_monotonicity": REORDERS,
    "deletion_monotonicity": RESURRECTIONS,
    "semantic_normalization": DUPLICATES,
    "durability": LOST_WRITES,
    "isolation": ISOLATION_LEAKS,
    "phantom": PHANTOMS,
}
"""Each checker's violation counter."""

GUARD_SAMPLED = MetricDef(
    metric_name("guard_sampled_operations"), "counter", ("backend", "scenario", "op"),
    "Operations the production guard sampled (their entity's hash fell under the sample "
    "rate) and queued for checking, by kind.")
GUARD_CHECKS = MetricDef(
    metric_name("guard_verifications"), "counter", ("backend", "scenario", "trigger"),
    "Verification reads the guard made through the backend's read: after an acknowledged "
    "change (trigger=ack), or of a recently deleted entity on schedule (trigger=deleted).")
GUARD_DROPS = MetricDef(
    metric_name("guard_dropped_operations"), "counter", ("backend", "scenario", "reason"),
    "Sampled operations the guard did not check, by reason: queue_full (the queue was at "
    "its bound, so the caller was not made to wait), entity_limit (too many entities "
    "tracked), incomplete (an earlier operation of its entity was dropped).")
GUARD_QUEUE_DEPTH = MetricDef(
    metric_name("guard_queue_depth"), "gauge", ("backend", "scenario"),
    "Entries waiting in the guard's queue when scraped.")
