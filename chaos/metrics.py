"""memcert's Prometheus metrics: the one module that names what a run exports.

Every name is assembled from the ``memcert`` namespace, a name and a base unit, and
validated, in :data:`METRICS`; the dashboards, the rules and their tests read the same
table. A run exports counters, never rates: PromQL computes rates.

:class:`RunMetrics` is a custom collector. During a run it is one of the history
recorder's observers: for each entry it bumps a few integers in dicts (the recorder
calls it under its own lock, so it must stay that cheap), and it times each operation
from its invocation's ``time_ns`` to its completion's. Everything else is computed when
Prometheus scrapes: the violation counters are read then from the online checkers'
``violation_counts()``, each invariant's checks and failed checks (the two terms of
its rate, as results.json gives them) from their ``rate_terms()``, and the violations per
root cause from their ``cause_counts()``, so the counters move while the run goes on.

A run's violation counts carry the scenario that was running when the checkers found
them. Scenarios run one after another, so :meth:`RunMetrics.begin_scenario` only needs
to note the counts when a scenario begins.

``--metrics-port`` serves ``/metrics`` on 127.0.0.1 for the length of a run
(:func:`serve`); ``--pushgateway`` pushes once at the end (:func:`push`), with the
grouping key job, backend and suite, and no instance label. The push adds to the
group (HTTP POST) rather than replacing it, so ``memcert_last_success_timestamp_seconds``
from the last good night survives a failed one; every metric pushed replaces its
predecessor of the same name whole.

``memcert load`` adds :class:`LoadMetrics`: its requests, timed by the Locust users to
the microsecond (Locust's own statistics round to milliseconds). Each Locust worker
counts into a :class:`RequestTally` and sends the master its deltas, so one endpoint, the
master's, holds every worker's requests (docs/metrics.md, "Load runs").

Importing this module imports ``prometheus_client``; nothing below ``chaos`` does.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal

from prometheus_client import CollectorRegistry, pushadd_to_gateway, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from invariants.backend import Ack
from invariants.causes import CAUSES
from invariants.errors import InvalidArgument
from invariants.history import Entry
from invariants.metric_defs import (
    CHECKS,
    CONFLICTS,
    DUPLICATES,
    FAILED_CHECKS,
    ISOLATION_LEAKS,
    LOST_WRITES,
    NAMESPACE,
    PHANTOMS,
    REORDERS,
    RESURRECTIONS,
    VIOLATION_METRICS,
    VIOLATIONS_BY_CAUSE,
    Kind,
    MetricDef,
    metric_name,
)

from .report import INVARIANTS, Overall

__all__ = [
    "BUCKETS_S",
    "CHECKS",
    "CONFLICTS",
    "DUPLICATES",
    "FAILED_CHECKS",
    "ISOLATION_LEAKS",
    "LABEL_PREFIX",
    "LOST_WRITES",
    "METRICS",
    "NAMESPACE",
    "PHANTOMS",
    "REORDERS",
    "RESURRECTIONS",
    "VERDICT_VALUES",
    "VIOLATIONS_BY_CAUSE",
    "VIOLATION_METRICS",
    "Exporter",
    "Kind",
    "LoadMetrics",
    "MetricDef",
    "MetricsOptions",
    "RequestTally",
    "RunMetrics",
    "metric_name",
    "push",
    "sample_names",
    "serve",
]

JOB = "memcert"
HOST = "127.0.0.1"
PUSH_TIMEOUT_S = 10.0

Outcome = Literal["ok", "rejected", "error", "unknown"]

log = logging.getLogger("memcert.metrics")


OPERATIONS = MetricDef(
    metric_name("operations"), "counter", ("backend", "scenario", "op", "outcome"),
    "Operations completed, by kind and outcome: ok (applied, or a read served), rejected "
    "(the backend answered Ack(applied=False)), error (it raised, and nothing was "
    "applied), unknown (it raised or timed out; it may have been applied).")
READS = MetricDef(
    metric_name("reads"), "counter", ("backend", "scenario"),
    "Reads served (ok), each checked against every invariant. Not a rate's denominator: "
    "each invariant counts its own checks (memcert_checks_total).")
DURATION = MetricDef(
    metric_name("operation_duration", "seconds"), "histogram", ("backend", "scenario", "op"),
    "Time from an operation's invocation to its completion, as the history records it.")
RUN_INFO = MetricDef(
    metric_name("run"), "info", ("backend", "suite", "version", "seed", "level"),
    "The run: memcert's version, the plan's seed and the normalization level claimed.")
LAST_RUN = MetricDef(
    metric_name("last_run", "timestamp_seconds"), "gauge", ("backend", "suite"),
    "When the last run ended, in Unix seconds.")
LAST_SUCCESS = MetricDef(
    metric_name("last_success", "timestamp_seconds"), "gauge", ("backend", "suite"),
    "When the last certified run ended; absent until one is.")
LAST_RESULT = MetricDef(
    metric_name("last_run_success"), "gauge", ("backend", "suite"),
    "1 if the last run was certified, 0 if it failed or could not decide.")
LAST_VERDICT = MetricDef(
    metric_name("last_run_result"), "gauge", ("backend", "suite"),
    "The last run's verdict in three states: 1 certified, 0 failed (a violation), -1 "
    "unknown (an invariant could not be decided).")
RUN_DURATION = MetricDef(
    metric_name("run_duration", "seconds"), "gauge", ("backend", "suite"),
    "How long the last run took, checking included.")

LOAD_REQUESTS = MetricDef(
    metric_name("load_requests"), "counter", ("backend", "request", "outcome"),
    "Requests memcert load sent, by operation and outcome: ok (answered as the protocol "
    "says), failure (an error status, a timeout or a dropped connection).")
LOAD_DURATION = MetricDef(
    metric_name("load_request_duration", "seconds"), "histogram", ("backend", "request"),
    "Time from sending a load request to the end of its answer, timed by the Locust user "
    "(Locust's own statistics round to whole milliseconds).")
LOAD_USERS = MetricDef(
    metric_name("load_users"), "gauge", ("backend",),
    "Locust users running, over every worker process.")
LOAD_WORKERS = MetricDef(
    metric_name("load_workers"), "gauge", ("backend",),
    "Locust worker processes whose histories are being merged.")

INVARIANT_OF: Mapping[str, str] = {
    checker: invariant for invariant, checkers in INVARIANTS.items() for checker in checkers}
"""The results.json invariant each checker's checks count under (phantom: durability)."""

CAUSES_OF: Mapping[str, tuple[str, ...]] = {
    invariant: tuple(cause for checker in checkers for cause in CAUSES[checker])
    for invariant, checkers in INVARIANTS.items()}
"""Each invariant's causes, its checkers' in turn: the ``cause`` label's fixed values."""

METRICS: tuple[MetricDef, ...] = (
    OPERATIONS, READS, DURATION, *VIOLATION_METRICS.values(), CHECKS, FAILED_CHECKS,
    VIOLATIONS_BY_CAUSE, RUN_INFO,
    LAST_RUN, LAST_SUCCESS, LAST_RESULT, LAST_VERDICT, RUN_DURATION,
    LOAD_REQUESTS, LOAD_DURATION, LOAD_USERS, LOAD_WORKERS,
)

BUCKETS_S: tuple[float, ...] = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0,
)
"""Latency bucket bounds: in-process backends answer in tens of microseconds."""
VERDICT_VALUES: Mapping[str, float] = {"certified": 1.0, "failed": 0.0, "unknown": -1.0}
"""``memcert_last_run_result``'s value for each verdict: three states a stat panel can
colour apart, where ``memcert_last_run_success`` shows 0 for both failed and unknown."""
_BOUNDS_NS: tuple[int, ...] = tuple(round(b * 1e9) for b in BUCKETS_S)


def sample_names() -> frozenset[str]:
    """Every sample name a run can export."""
    return frozenset(name for m in METRICS for name in m.samples)


def version() -> str:
    try:
        return metadata.version("memcert")
    except metadata.PackageNotFoundError:
        return "unknown"


def outcome(entry: Entry) -> Outcome:
    """A completion's outcome label, from the history's ok, fail and info."""
    if entry.type == "ok":
        return "ok"
    if entry.type == "info":
        return "unknown"
    return "rejected" if isinstance(entry.result, Ack) else "error"


class _Histogram:
    __slots__ = ("counts", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * (len(_BOUNDS_NS) + 1)
        self.sum_ns = 0


LABEL_PREFIX = "label_"
"""A night's label ``KEY`` is ``label_KEY`` on ``memcert_run_info``: apart from the
labels memcert itself sets, whatever the key."""


class RunMetrics(Collector):
    """The live metrics of one run; register it in a registry, and observe the recorder.

    ``violations`` returns the online checkers' counts by checker name (pass
    ``CheckerSuite.violation_counts``), ``rate_terms`` their (failed checks, checks) by
    checker name (``CheckerSuite.rate_terms``), and ``causes`` their violations by
    checker name and cause (``CheckerSuite.cause_counts``); all are called at scrape time
    only. Without ``rate_terms`` no checks are exported, and without ``causes`` no
    violations by cause: a zero there would claim a check that was never made.
    ``labels`` join ``memcert_run_info``, each as ``label_KEY``.
    """

    def __init__(self, *, backend: str, suite: str, level: str, seed: int,
                 violations: Callable[[], Mapping[str, int]],
                 rate_terms: Callable[[], Mapping[str, tuple[int, int]]] | None = None,
                 causes: Callable[[], Mapping[str, Mapping[str, int]]] | None = None,
                 labels: Mapping[str, str] | None = None,
                 ) -> None:
        self._backend = backend
        self._suite = suite
        self._info = {"backend": backend, "suite": suite, "version": version(),
                      "seed": str(seed), "level": level,
                      **{f"{LABEL_PREFIX}{key}": value for key, value in (labels or {}).items()}}
        self._violations = violations
        self._rate_terms = rate_terms
        self._causes = causes
        self._lock = threading.Lock()
        self._scenario = ""
        self._started: dict[int, int] = {}
        self._ops: dict[tuple[str, str, str], int] = {}
        self._reads: dict[str, int] = {}
        self._durations: dict[tuple[str, str], _Histogram] = {}
        self._base: dict[str, int] = {}
        self._closed: dict[str, dict[str, int]] = {}
        self._finished: tuple[float, bool, float, Overall] | None = None

    def begin_scenario(self, name: str) -> None:
        """Violations found from now on belong to ``name``, until the next one begins."""
        counts = self._counts()
        with self._lock:
            self._close_scenario(counts)
            self._scenario = name
            self._reads.setdefault(name, 0)
            self._base = counts

    def observe(self, entry: Entry) -> None:
        """The recorder's observer: count the completion and time the operation."""
        if entry.type == "invoke":
            self._started[entry.worker] = entry.time_ns
            return
        started = self._started.pop(entry.worker, entry.time_ns)
        elapsed = entry.time_ns - started
        scenario = self._scenario
        key = (scenario, entry.f, outcome(entry))
        with self._lock:
            self._ops[key] = self._ops.get(key, 0) + 1
            if entry.f == "read" and entry.type == "ok":
                self._reads[scenario] = self._reads.get(scenario, 0) + 1
            histogram = self._durations.get((scenario, entry.f))
            if histogram is None:
                histogram = self._durations[(scenario, entry.f)] = _Histogram()
            histogram.counts[bisect_left(_BOUNDS_NS, elapsed)] += 1
            histogram.sum_ns += elapsed

    def finish(self, *, success: bool, duration_s: float, ended_at: float | None = None,
               verdict: Overall | None = None) -> None:
        """The run is over: set the batch gauges, and freeze the violation counts.

        ``verdict`` tells failed from unknown when ``success`` is False; without it a run
        that did not succeed counts as failed, the worse of the two.
        """
        if verdict is None:
            verdict = "certified" if success else "failed"
        elif (verdict == "certified") != success:
            raise InvalidArgument(f"verdict={verdict!r} contradicts success={success!r}")
        counts = self._counts()
        with self._lock:
            self._close_scenario(counts)
            self._base = counts
            self._scenario = ""
            self._finished = (time.time() if ended_at is None else ended_at, success,
                              duration_s, verdict)

    def _counts(self) -> dict[str, int]:
        """The online checkers' counts now: violations by checker name, each
        invariant's checks and failed checks as ``invariant/checks`` and
        ``invariant/failed_checks``, summed over its checkers as results.json sums them,
        and its violations per cause as ``invariant/cause/CAUSE``."""
        counts = dict(self._violations())
        if self._rate_terms is not None:
            for checker, (failed, checks) in self._rate_terms().items():
                invariant = INVARIANT_OF[checker]
                for term, n in (("failed_checks", failed), ("checks", checks)):
                    key = f"{invariant}/{term}"
                    counts[key] = counts.get(key, 0) + n
        if self._causes is not None:
            for checker, by_cause in self._causes().items():
                invariant = INVARIANT_OF[checker]
                for cause, n in by_cause.items():
                    key = f"{invariant}/cause/{cause}"
                    counts[key] = counts.get(key, 0) + n
        return counts

    def _close_scenario(self, counts: Mapping[str, int]) -> None:
        if not self._scenario:
            return
        closed = self._closed.setdefault(self._scenario, {})
        for checker, count in counts.items():
            closed[checker] = closed.get(checker, 0) + count - self._base.get(checker, 0)

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        with self._lock:
            ops = dict(self._ops)
            reads = dict(self._reads)
            durations = {key: (list(h.counts), h.sum_ns) for key, h in self._durations.items()}
            per_scenario = {name: dict(c) for name, c in self._closed.items()}
            if self._scenario:
                live = per_scenario.setdefault(self._scenario, {})
                for checker, count in counts.items():
                    live[checker] = (live.get(checker, 0) + count
                                     - self._base.get(checker, 0))
            finished = self._finished
        backend = self._backend

        family = _counter(OPERATIONS)
        for (scenario, op, result), value in sorted(ops.items()):
            family.add_metric([backend, scenario, op, result], value)
        yield family
        family = _counter(READS)
        for scenario, value in sorted(reads.items()):
            family.add_metric([backend, scenario], value)
        yield family
        for checker, definition in VIOLATION_METRICS.items():
            family = _counter(definition)
            for scenario in sorted(reads):
                family.add_metric([backend, scenario],
                                  per_scenario.get(scenario, {}).get(checker, 0))
            yield family
        for definition, term in ((CHECKS, "checks"), (FAILED_CHECKS, "failed_checks")):
            family = _counter(definition)
            if self._rate_terms is not None:
                for scenario in sorted(reads):
                    for invariant in INVARIANTS:
                        family.add_metric([backend, scenario, invariant], per_scenario.get(
                            scenario, {}).get(f"{invariant}/{term}", 0))
            yield family
        family = _counter(VIOLATIONS_BY_CAUSE)
        if self._causes is not None:
            for scenario in sorted(reads):
                found = per_scenario.get(scenario, {})
                for invariant, causes in CAUSES_OF.items():
                    for cause in causes:
                        family.add_metric([backend, scenario, invariant, cause],
                                          found.get(f"{invariant}/cause/{cause}", 0))
        yield family
        histogram = HistogramMetricFamily(DURATION.name, DURATION.help,
                                          labels=DURATION.labels)
        for (scenario, op), (buckets, sum_ns) in sorted(durations.items()):
            cumulative, running = [], 0
            for bound, count in zip((*map(str, BUCKETS_S), "+Inf"), buckets, strict=True):
                running += count
                cumulative.append((bound, running))
            histogram.add_metric([backend, scenario, op], cumulative, sum_ns / 1e9)
        yield histogram
        info = InfoMetricFamily(RUN_INFO.name, RUN_INFO.help)
        info.add_metric([], self._info)
        yield info
        if finished is not None:
            ended_at, success, duration_s, verdict = finished
            labels = [backend, self._suite]
            yield _gauge(LAST_RUN, labels, ended_at)
            yield _gauge(LAST_RESULT, labels, 1.0 if success else 0.0)
            yield _gauge(LAST_VERDICT, labels, VERDICT_VALUES[verdict])
            yield _gauge(RUN_DURATION, labels, duration_s)
            if success:
                yield _gauge(LAST_SUCCESS, labels, ended_at)


class RequestTally:
    """Load requests counted and timed where they are sent, to be added up elsewhere.

    A Locust worker adds each request as it completes and hands :meth:`take`'s delta to
    the master with its history, so the master's :class:`LoadMetrics` holds every
    worker's requests in one place. Deltas are plain lists and numbers, which cross
    Locust's messages and JSON alike.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}
        self._durations: dict[str, _Histogram] = {}

    def add(self, request: str, ok: bool, seconds: float) -> None:
        key = (request, "ok" if ok else "failure")
        self._counts[key] = self._counts.get(key, 0) + 1
        histogram = self._durations.get(request)
        if histogram is None:
            histogram = self._durations[request] = _Histogram()
        elapsed = round(seconds * 1e9)
        histogram.counts[bisect_left(_BOUNDS_NS, elapsed)] += 1
        histogram.sum_ns += elapsed

    def snapshot(self) -> dict[str, list[list[Any]]]:
        return {
            "counts": [[request, result, n] for (request, result), n in
                       sorted(self._counts.items())],
            "durations": [[request, list(h.counts), h.sum_ns] for request, h in
                          sorted(self._durations.items())],
        }

    def take(self) -> dict[str, list[list[Any]]]:
        """Everything added since the last call, then forget it."""
        delta = self.snapshot()
        self._counts.clear()
        self._durations.clear()
        return delta

    def merge(self, delta: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        for request, result, n in delta["counts"]:
            key = (str(request), str(result))
            self._counts[key] = self._counts.get(key, 0) + int(n)
        for request, counts, sum_ns in delta["durations"]:
            histogram = self._durations.get(request)
            if histogram is None:
                histogram = self._durations[str(request)] = _Histogram()
            histogram.counts = [a + int(b) for a, b in zip(histogram.counts, counts,
                                                           strict=True)]
            histogram.sum_ns += int(sum_ns)


class LoadMetrics(Collector):
    """What ``memcert load`` exports besides a run's own metrics: its requests, every
    one timed to the microsecond, and Locust's users and workers.

    ``users`` and ``workers`` are read at scrape time; leave them out once the run is
    over (a push of the final figures).
    """

    def __init__(self, *, backend: str, users: Callable[[], int] | None = None,
                 workers: Callable[[], int] | None = None) -> None:
        self._backend = backend
        self._users = users
        self._workers = workers
        self._lock = threading.Lock()
        self._tally = RequestTally()

    def merge(self, delta: Mapping[str, Sequence[Sequence[Any]]]) -> None:
        with self._lock:
            self._tally.merge(delta)

    def snapshot(self) -> dict[str, list[list[Any]]]:
        with self._lock:
            return self._tally.snapshot()

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot()
        backend = self._backend
        family = _counter(LOAD_REQUESTS)
        for request, result, n in snapshot["counts"]:
            family.add_metric([backend, request, result], n)
        yield family
        histogram = HistogramMetricFamily(LOAD_DURATION.name, LOAD_DURATION.help,
                                          labels=LOAD_DURATION.labels)
        for request, counts, sum_ns in snapshot["durations"]:
            cumulative, running = [], 0
            for bound, count in zip((*map(str, BUCKETS_S), "+Inf"), counts, strict=True):
                running += count
                cumulative.append((bound, running))
            histogram.add_metric([backend, request], cumulative, sum_ns / 1e9)
        yield histogram
        for definition, read in ((LOAD_USERS, self._users), (LOAD_WORKERS, self._workers)):
            if read is not None:
                yield _gauge(definition, [backend], float(read()))


def _counter(definition: MetricDef) -> CounterMetricFamily:
    return CounterMetricFamily(definition.name, definition.help, labels=definition.labels)


def _gauge(definition: MetricDef, labels: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(definition.name, definition.help, labels=definition.labels)
    family.add_metric(labels, value)
    return family


@dataclass(frozen=True)
class MetricsOptions:
    """Where a run's metrics go: a port to serve on, a Pushgateway to push to, or both.

    ``port`` 0 picks a free port; ``on_serving`` is told the port once it serves.
    ``registry`` is the registry the run's collector joins; a fresh one is made when it
    is None. ``labels`` (a night's, :mod:`chaos.nightly_labels`) join
    ``memcert_run_info`` as ``label_KEY``: an info metric, so that a version that changes
    every night makes no new series of the counters.
    """

    port: int | None = None
    pushgateway: str | None = None
    job: str = JOB
    registry: CollectorRegistry | None = None
    on_serving: Callable[[int], None] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.port is not None and not 0 <= self.port <= 65535:
            raise InvalidArgument(f"metrics port={self.port!r} is not a TCP port; give 0 to "
                                  "65535 (0 picks a free one)")
        if self.pushgateway is not None and not re.match(r"^https?://", self.pushgateway):
            raise InvalidArgument(f"pushgateway={self.pushgateway!r} is not an http(s) URL; "
                                  "give e.g. http://127.0.0.1:9091")


class Exporter:
    """A run's metrics from start to end: collect, serve while it runs, push at the end.

    Build it with :meth:`start`; leaving it as a context manager (or :meth:`close`)
    stops serving, whatever happened. Nothing here can change a verdict: a push that
    fails is logged, and the run's result stands.
    """

    def __init__(self, options: MetricsOptions, metrics: RunMetrics,
                 registry: CollectorRegistry, grouping: Mapping[str, str]) -> None:
        self.options = options
        self.metrics = metrics
        self.registry = registry
        self.grouping = dict(grouping)
        self.port: int | None = None
        self._server: Callable[[], None] | None = None

    @classmethod
    def start(cls, options: MetricsOptions, *, backend: str, suite: str, level: str,
              seed: int, violations: Callable[[], Mapping[str, int]],
              rate_terms: Callable[[], Mapping[str, tuple[int, int]]] | None = None,
              causes: Callable[[], Mapping[str, Mapping[str, int]]] | None = None,
              ) -> Exporter:
        registry = options.registry if options.registry is not None else CollectorRegistry()
        metrics = RunMetrics(backend=backend, suite=suite, level=level, seed=seed,
                             violations=violations, rate_terms=rate_terms, causes=causes,
                             labels=options.labels)
        registry.register(metrics)
        exporter = cls(options, metrics, registry, {"backend": backend, "suite": suite})
        if options.port is not None:
            try:
                exporter.port, exporter._server = serve(registry, options.port)
            except BaseException:
                registry.unregister(metrics)
                raise
            if options.on_serving is not None:
                options.on_serving(exporter.port)
        return exporter

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def observe(self, entry: Entry) -> None:
        self.metrics.observe(entry)

    def begin_scenario(self, name: str) -> None:
        self.metrics.begin_scenario(name)

    def finish(self, *, success: bool, duration_s: float,
               verdict: Overall | None = None) -> bool:
        """Set the batch gauges and push if asked; False if the push failed."""
        self.metrics.finish(success=success, duration_s=duration_s, verdict=verdict)
        if self.options.pushgateway is None:
            return True
        try:
            push(self.registry, self.options.pushgateway, job=self.options.job,
                 grouping=self.grouping)
        except OSError as error:
            log.warning("could not push to the Pushgateway at %s (%s); the verdict stands",
                        self.options.pushgateway, error)
            return False
        return True

    def close(self) -> None:
        """Stop serving; the registry keeps the run's final values for a push or a test."""
        if self._server is not None:
            self._server()
            self._server = None


def serve(registry: CollectorRegistry, port: int) -> tuple[int, Callable[[], None]]:
    """Serve ``registry`` at http://127.0.0.1:PORT/metrics in a thread.

    Returns the port bound (``port`` 0 picks one) and a function that stops the server.
    """
    try:
        server, thread = start_http_server(port, addr=HOST, registry=registry)
    except OSError as error:
        raise InvalidArgument(f"metrics port {port} cannot be served on {HOST} ({error}); "
                              "pick a free port, or 0 for any") from error

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    bound: int = server.server_address[1]
    return bound, stop


def push(registry: CollectorRegistry, gateway: str, *, job: str,
         grouping: Mapping[str, str]) -> None:
    """Add the registry's metrics to the group ``job`` + ``grouping`` on a Pushgateway.

    There is no instance label: a batch run has no instance worth keeping apart, and one
    would leave a new group behind on every machine that ever ran the job.
    """
    pushadd_to_gateway(gateway, job=job, registry=registry, grouping_key=dict(grouping),
                       timeout=PUSH_TIMEOUT_S)
