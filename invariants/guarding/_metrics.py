"""The guard's Prometheus metrics, computed when Prometheus scrapes.

The violation counters are the ones a chaos run exports (:mod:`invariants.metric_defs`),
with ``source="guard"`` added and ``scenario`` the name the application gives, so a
dashboard row for production filters on one label. The guard's own counters (sampled
operations, verification reads, drops by reason) and its queue depth say how much was
checked: a quiet counter means nothing without them. This module is imported only when
a registry is given, so a guard without metrics never loads ``prometheus_client``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from invariants.metric_defs import (
    CHECKS,
    FAILED_CHECKS,
    GUARD_CHECKS,
    GUARD_DROPS,
    GUARD_QUEUE_DEPTH,
    GUARD_SAMPLED,
    SOURCE_LABEL,
    VIOLATION_METRICS,
    VIOLATIONS_BY_CAUSE,
    MetricDef,
)

__all__ = ["SOURCE", "GuardMetrics", "Snapshot"]

SOURCE = "guard"

Snapshot = tuple[
    Mapping[str, int],                    # violations per checker
    Mapping[str, tuple[int, int]],        # (failed checks, checks) per checker
    Mapping[str, Mapping[str, int]],      # violations per checker and cause
    Mapping[str, int],                    # sampled operations per kind
    Mapping[str, int],                    # verification reads per trigger
    Mapping[str, int],                    # drops per reason
    int,                                  # queue depth
]


class GuardMetrics(Collector):
    """A custom collector over one guard; ``snapshot`` is called at scrape time only.

    The guard runs each checker under its own name, so an invariant label equals the
    checker's name here (the phantom checker, which results.json folds into durability,
    is not run by the guard).
    """

    def __init__(self, *, backend: str, scenario: str,
                 snapshot: Callable[[], Snapshot]) -> None:
        self._labels = [backend, scenario]
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        violations, terms, causes, sampled, verified, drops, depth = self._snapshot()
        labels = self._labels
        for checker, definition in VIOLATION_METRICS.items():
            if checker in violations:
                family = _sourced(definition)
                family.add_metric([*labels, SOURCE], violations[checker])
                yield family
        for definition, term in ((CHECKS, 1), (FAILED_CHECKS, 0)):
            family = _sourced(definition)
            for checker, pair in terms.items():
                family.add_metric([*labels, checker, SOURCE], pair[term])
            yield family
        family = _sourced(VIOLATIONS_BY_CAUSE)
        for checker, by_cause in causes.items():
            for cause, n in by_cause.items():
                family.add_metric([*labels, checker, cause, SOURCE], n)
        yield family
        for definition, values in ((GUARD_SAMPLED, sampled), (GUARD_CHECKS, verified),
                                   (GUARD_DROPS, drops)):
            family = _counter(definition)
            for label, n in sorted(values.items()):
                family.add_metric([*labels, label], n)
            yield family
        gauge = GaugeMetricFamily(GUARD_QUEUE_DEPTH.name, GUARD_QUEUE_DEPTH.help,
                                  labels=GUARD_QUEUE_DEPTH.labels)
        gauge.add_metric(labels, depth)
        yield gauge


def _sourced(definition: MetricDef) -> CounterMetricFamily:
    return CounterMetricFamily(definition.name, definition.help,
                               labels=(*definition.labels, SOURCE_LABEL))


def _counter(definition: MetricDef) -> CounterMetricFamily:
    return CounterMetricFamily(definition.name, definition.help, labels=definition.labels)
