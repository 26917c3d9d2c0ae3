"""The handlers: read a body, let the store decide, answer in JSON.

Each route's store work is one call of the store's public API, run in a worker thread
with a handle lent by the pool (``pool.py``), so the event loop never waits on the
database.

Each handler refuses bad input before the store opens a transaction (the store's own
checks run first thing inside the call, and raise before any write), so a 4xx always
means nothing was written. Anything else that goes wrong is the service's fault, not
the caller's: 503 when the database could not be reached or stayed locked, 500 for a
bug, and in both cases the outcome of a write is unknown to the caller.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final, TextIO, cast

from sqlalchemy.exc import DBAPIError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from invariants.errors import InvalidArgument, InvalidInput

from ..validation import check_namespace
from . import wire
from .errors import Refusal, field_error, invalid_input, refusal_body, shown_name
from .metrics import ServiceMetrics
from .options import ServiceOptions
from .pool import StorePool

__all__ = ["HEALTH_PROBE", "Handler", "Routes", "error_response", "guarded"]

log = logging.getLogger("memcert.service")

Handler = Callable[[Request], Awaitable[Response]]

HEALTH_PROBE: Final = ("memcert-health", "probe")
"""The entity ``/healthz`` reads, to prove the database answers."""

_CHUNK = 64 * 1024


class Routes:
    """Every route's handler, sharing one pool of store handles."""

    def __init__(self, pool: StorePool, options: ServiceOptions, metrics: ServiceMetrics,
                 openapi: dict[str, Any]) -> None:
        self.pool = pool
        self.options = options
        self.metrics = metrics
        self.openapi = openapi

    def table(self) -> list[tuple[str, str, Handler]]:
        """(path, method, handler) for every route the service serves."""
        return [
            *((f"/v1/{route}", "POST", self._call(route, work))
              for route, work in wire.CALLS.items()),
            ("/v1/export", "GET", self.export),
            ("/v1/import", "POST", self.import_),
            ("/healthz", "GET", self.healthz),
            ("/metrics", "GET", self.metrics_text),
            ("/openapi.json", "GET", self.openapi_json),
        ]

    def _call(self, route: str, work: Callable[[Mapping[str, Any]], wire.Work]) -> Handler:
        """A route whose JSON body is one call of the store's API."""
        async def handle(request: Request) -> Response:
            body = wire.decode(await _read_limited(request, self.options.max_body_bytes),
                               route)
            return wire.Answer(await self.pool.run(work(body)))

        return handle

    async def export(self, request: Request) -> Response:
        """The whole store (or one namespace) as JSON Lines, spooled to disk when large."""
        for name in request.query_params:
            if name != "namespace":
                raise field_error(name, "is not a parameter of export",
                                  "Use only ?namespace=NAME, or nothing for every namespace.")
        namespace = request.query_params.get("namespace")
        if namespace is not None:
            check_namespace(namespace)
        spool = cast(TextIO, tempfile.SpooledTemporaryFile(  # noqa: SIM115 - closed by _chunks
            max_size=8 * 1024 * 1024, mode="w+", encoding="utf-8"))
        try:
            await self.pool.run(lambda store: store.export_jsonl(spool, namespace=namespace))
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return StreamingResponse(_chunks(spool), media_type="application/x-ndjson")

    async def import_(self, request: Request) -> Response:
        """Import an export; 422 only when no line could be imported (so nothing was)."""
        raw = await _read_limited(request, self.options.max_import_bytes)
        lines = raw.split(b"\n")
        report = await self.pool.run(lambda store: store.import_jsonl(lines))
        body = wire.import_body(report)
        if report.rejected and report.imported == 0:
            first = report.rejected[0]
            problem = f"line {first.line}: {first.message}"
            field = "body" if first.field is None else shown_name(first.field)
            raise Refusal(422, "invalid_input", problem, field=field,
                          problem=problem, fix="Correct or leave out the lines listed in "
                          "rejected, then import again; no line was imported.", extra=body)
        return wire.Answer(body)

    # -- operations -----------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        """200 when the database answers a read, 503 when it does not."""
        try:
            await self.pool.run(lambda store: store.read(*HEALTH_PROBE))
        except Exception as error:
            return wire.Answer({"status": "unavailable",
                                "message": f"{type(error).__name__}: {error}"}, 503)
        return wire.Answer({"status": "ok"})

    async def metrics_text(self, request: Request) -> Response:
        text, content_type = self.metrics.exposition()
        return Response(text, headers={"content-type": content_type})

    async def openapi_json(self, request: Request) -> Response:
        return wire.Answer(self.openapi)


def guarded(handler: Handler) -> Handler:
    """Turn every exception a handler raises into the protocol's JSON error."""
    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as error:
            return error_response(error, request)

    return answer


def error_response(error: Exception, request: Request | None = None) -> Response:
    """The status and JSON body for an exception: 4xx for input, 5xx for the service."""
    if isinstance(error, InvalidInput):
        error = invalid_input(error)
    elif isinstance(error, InvalidArgument):
        error = Refusal(422, "invalid_input", str(error))
    if isinstance(error, Refusal):
        return wire.Answer(refusal_body(error), error.status)
    where = "" if request is None else f" {request.method} {request.url.path}"
    if isinstance(error, DBAPIError):
        log.warning("the database failed%s: %s", where, error)
        return wire.Answer({
            "error": "unavailable", "field": None,
            "message": f"the database could not complete the request ({type(error).__name__})"
                       "; a write may or may not have been applied: retry with the same "
                       "op_id and causal_seq"}, 503, headers={"retry-after": "1"})
    log.exception("internal error%s", where, exc_info=error)
    return wire.Answer({
        "error": "internal", "field": None,
        "message": f"the service failed ({type(error).__name__}); a write may or may not "
                   "have been applied: retry with the same op_id and causal_seq"}, 500)


async def _read_limited(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> Refusal:
    return Refusal(413, "body_too_large", f"the body is over the limit of {limit} bytes",
                   field="body")


def _chunks(spool: TextIO) -> Iterator[str]:
    try:
        while chunk := spool.read(_CHUNK):
            yield chunk
    finally:
        spool.close()
