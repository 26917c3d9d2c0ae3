"""Run the service: open the store, bind, announce, serve until SIGTERM, close.

Everything that can fail for a reason the operator can fix (an unreachable database, a
port in use, a public address without a token) fails before the announcement, so a
script that waits for the "serving" line either gets a working URL or an exit code.
The socket is bound here rather than by uvicorn so that ``--port 0`` can announce the
port the kernel picked. SIGTERM and SIGINT stop the server gracefully: it stops
accepting, finishes the requests in flight (up to ``GRACE_S``), then closes every
store handle.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn
from prometheus_client import CollectorRegistry

from invariants.errors import InvalidArgument

from .. import ReferenceStore
from ..engine import default_db_url, normalize_url
from .app import build_app
from .metrics import ServiceMetrics
from .options import ServiceOptions
from .pool import StorePool

__all__ = ["EVENT_LOOP", "GRACE_S", "KEEP_ALIVE_S", "serve", "url_of"]

GRACE_S = 10.0
"""How long a stopping server waits for requests in flight."""

KEEP_ALIVE_S = 30
"""How long an idle client connection stays open; the protocol asks for at least 5 s."""

EVENT_LOOP = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
"""uvloop wherever it installs. Every request is parsed, handed to a worker thread and
answered on the loop, and uvloop does the loop's part with less CPU than asyncio's own."""


def serve(options: ServiceOptions, *, announce: Callable[[str, str], None]) -> None:
    """Serve until a signal stops the server; ``announce(url, db)`` once it accepts."""
    db = options.db_url or default_db_url()
    url = normalize_url(db)
    registry = CollectorRegistry()
    pool = StorePool(lambda: ReferenceStore(url, metrics=metrics.store),
                     options.handles_for(url))
    metrics = ServiceMetrics(registry, handles=lambda: pool.opened)
    try:
        pool.warm()
    except Exception as error:
        raise InvalidArgument(
            f"cannot open the database {url.render_as_string(hide_password=True)}: "
            f"{type(error).__name__}: {error}") from error
    try:
        listener = _bind(options.host, options.port)
        try:
            server = uvicorn.Server(uvicorn.Config(
                build_app(pool, options, metrics), log_level="warning", access_log=False,
                lifespan="off", loop=EVENT_LOOP, timeout_keep_alive=KEEP_ALIVE_S,
                timeout_graceful_shutdown=int(GRACE_S), server_header=False))
            _stop_on_signals(server)
            announce(url_of(options.host, listener.getsockname()[1]),
                     url.render_as_string(hide_password=True))
            server.run(sockets=[listener])
        finally:
            listener.close()
    finally:
        pool.close()


def url_of(host: str, port: int) -> str:
    """The base URL clients use; IPv6 literals go in brackets."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def _bind(host: str, port: int) -> socket.socket:
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listener = socket.socket(family, kind, proto)
    except OSError as error:
        raise InvalidArgument(f"cannot bind --host {host}: {error}") from error
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(1024)
    except OSError as error:
        listener.close()
        raise InvalidArgument(f"cannot listen on {url_of(host, port)}: {error.strerror}; "
                              "pick another --port (0 picks a free one)") from error
    listener.set_inheritable(True)
    return listener


def _stop_on_signals(server: uvicorn.Server) -> None:
    """Make SIGTERM and SIGINT stop the server gracefully from the announcement on.

    uvicorn installs its own handlers only once it runs, and a signal that arrives
    before (a script stopping the service as soon as it is announced) would otherwise
    meet whatever handler was there: the default one kills the process without closing
    the store, and one that ignores it leaves the service running. This one asks uvicorn
    to stop, which it does as soon as it has started. Once uvicorn has stopped it
    re-raises each signal it caught against this handler, which then changes nothing,
    and the process ends with exit code 0.
    """
    def stop(_signal: int, _frame: FrameType | None) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
