"""Assemble the ASGI application: routes, JSON errors for every refusal, auth, metrics.

Layers, outermost first: metrics (so refused and unauthorized requests are counted
too), then the bearer guard when a token is set, then the routes (:class:`Dispatch`,
with Starlette's router behind it for everything they do not take). Unknown routes and
methods get the protocol's JSON error instead of Starlette's plain text.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .guard import BearerGuard
from .metrics import Instrumented, ServiceMetrics
from .openapi import openapi_document
from .options import ServiceOptions
from .pool import StorePool
from .routes import Handler, Routes, guarded
from .wire import Answer

__all__ = ["PUBLIC_PATHS", "build_app"]

PUBLIC_PATHS = ("/healthz", "/openapi.json")
"""Routes that answer without the token."""

_CODES = {404: "not_found", 405: "method_not_allowed"}


def build_app(pool: StorePool, options: ServiceOptions, metrics: ServiceMetrics) -> ASGIApp:
    """The service as an ASGI app over ``pool``; it never opens or closes the pool itself."""
    routes = Routes(pool, options, metrics, openapi_document())
    table = routes.table()
    handlers = [(path, method, guarded(handler)) for path, method, handler in table]
    app: ASGIApp = Dispatch(handlers, Starlette(
        routes=[Route(path, handler, methods=[method]) for path, method, handler in handlers],
        exception_handlers={HTTPException: _http_error},
    ))
    if options.token is not None:
        app = BearerGuard(app, options.token, PUBLIC_PATHS)
    return Instrumented(app, metrics, [path for path, _, _ in table])


class Dispatch:
    """The service's own routes found by one dictionary lookup of method and path, and
    answered as Starlette's router would (a Request, the handler, its Response); every
    other request (an unknown path, a wrong method, HEAD) goes to ``router``, which
    answers it as before.

    Starlette's router tries each route's pattern in turn and wraps each call in two
    exception middlewares that the handlers, which answer every exception themselves
    (:func:`~reference_store.service.routes.guarded`), never need; that work is on the
    event loop, which every request shares.
    """

    def __init__(self, handlers: list[tuple[str, str, Handler]], router: ASGIApp) -> None:
        self._handlers = {(method, path): handler for path, method, handler in handlers}
        self._router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            handler = self._handlers.get((scope["method"], scope["path"]))
            if handler is not None:
                response = await handler(Request(scope, receive, send))
                await response(scope, receive, send)
                return
        await self._router(scope, receive, send)


async def _http_error(request: Request, error: Exception) -> Response:
    """Routing's own refusals (unknown path, wrong method) in the protocol's shape."""
    assert isinstance(error, HTTPException)
    code = _CODES.get(error.status_code, "invalid_request")
    message = {404: f"no route {request.url.path}; see /openapi.json for the routes",
               405: f"{request.method} is not allowed on {request.url.path}"}.get(
        error.status_code, str(error.detail))
    body: dict[str, Any] = {"error": code, "field": None, "message": message}
    return Answer(body, error.status_code, headers=dict(error.headers or {}))
