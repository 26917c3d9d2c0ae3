"""What the service exposes at ``/metrics``: its requests, its handles, and its store.

The store's own write-path counters (:class:`~reference_store.metrics.StoreMetrics`) are
registered in the same registry, so one scrape tells both how the service was called
and why the store answered as it did. The ``route`` label is the route's path, or
``unmatched`` for a path the service does not serve, so a scanner probing random URLs
cannot grow the label set. The latency buckets start at 100 µs: a read of the
reference store on SQLite takes well under a millisecond, and whole-millisecond
buckets would put every request in the first one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..metrics import StoreMetrics

__all__ = ["LATENCY_BUCKETS_S", "SERVICE_METRICS", "Instrumented", "ServiceMetrics"]

LATENCY_BUCKETS_S: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                            0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

SERVICE_METRICS: Final = {
    "memcert_http_requests_total": ("route", "method", "status"),
    "memcert_http_request_duration_seconds": ("route",),
    "memcert_http_requests_in_flight": (),
    "memcert_http_store_handles": (),
}
"""Each metric's exposed name (histograms: the base name) and its labels."""

UNMATCHED: Final = "unmatched"


class ServiceMetrics:
    """The service's metrics in ``registry``, plus the store's write-path counters."""

    def __init__(self, registry: CollectorRegistry, handles: Callable[[], float]) -> None:
        self.registry = registry
        self.store = StoreMetrics(registry)
        self.requests = Counter(
            "memcert_http_requests", "HTTP requests answered, by route, method and status.",
            SERVICE_METRICS["memcert_http_requests_total"], registry=registry)
        self.duration = Histogram(
            "memcert_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by route.",
            SERVICE_METRICS["memcert_http_request_duration_seconds"],
            buckets=LATENCY_BUCKETS_S, registry=registry)
        self.in_flight = Gauge(
            "memcert_http_requests_in_flight", "Requests being answered right now.",
            registry=registry)
        self.handles = Gauge(
            "memcert_http_store_handles",
            "Store handles the service has opened, in use or idle.", registry=registry)
        self.handles.set_function(handles)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition of the registry, and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Instrumented:
    """ASGI middleware that counts and times every HTTP request, refused ones included."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, routes: Collection[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = frozenset(routes)
        # Each labelled series, looked up once: labels() validates and locks on every
        # call, which every request would pay twice.
        self._durations: dict[str, Histogram] = {}
        self._counts: dict[tuple[str, str, int], Counter] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self.routes else UNMATCHED
        status = 500

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        started = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, observed)
        finally:
            self.metrics.in_flight.dec()
            elapsed = time.perf_counter() - started
            duration = self._durations.get(route)
            if duration is None:
                duration = self._durations[route] = self.metrics.duration.labels(route)
            duration.observe(elapsed)
            key = (route, scope["method"], status)
            count = self._counts.get(key)
            if count is None:
                count = self._counts[key] = self.metrics.requests.labels(
                    route, key[1], str(status))
            count.inc()
