"""A TCP fault proxy with Toxiproxy's semantics, for network chaos in front of a service.

Clients connect to the proxy instead of the service; the proxy forwards each connection
to the ``upstream`` address and, on the way, applies toxics: latency, blackholes
(``timeout``), resets, bandwidth limits, slicing and truncation, each on one direction
and with a toxicity (the chance that a given connection suffers it). ``disable()`` takes
the whole proxy down, as a partition would: open connections are closed and new ones
are refused by the kernel; ``enable()`` brings it back on the same port.

The proxy runs its asyncio loop on a daemon thread of its own, so synchronous code (the
chaos runner, a test) drives it with plain calls, and every call has taken effect on
every open connection when it returns. Toxics can change while traffic flows.

What each toxic really did is counted (:meth:`FaultProxy.counters`), so a scenario can
show that its faults fired rather than assume it. One proxy per client group
(:class:`ProxyGroup`) makes "cut off group G" a ``disable()`` of G's proxy.

Errors: a bad toxic, name or address raises :class:`~invariants.errors.InvalidArgument`
naming the field; ``enable()`` raises :class:`OSError` if the port was taken meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

from invariants.errors import InvalidArgument
from scenarios.network_plan import KINDS, STREAMS, Stream, Toxic

from ._proxy_api import ControlServer
from ._proxy_conn import Connection
from ._toxics import ProxyCounters

__all__ = ["KINDS", "STREAMS", "ControlServer", "FaultProxy", "ProxyGroup", "Stream", "Toxic"]

_T = TypeVar("_T")
_CONTROL_TIMEOUT_S = 30.0
"""How long a control call waits for the proxy's loop; only a wedged loop takes this."""


class FaultProxy:
    """A TCP proxy from ``host:port`` (port 0: any free port) to ``upstream``.

    ``rng`` draws the toxicity rolls, jitter and slice sizes; the proxy's thread alone
    uses it, so give it a ``random.Random`` of its own (seeded, to replay the same
    rolls in the same order of connections).
    """

    def __init__(
        self,
        upstream: tuple[str, int] | str,
        *,
        name: str = "proxy",
        host: str = "127.0.0.1",
        port: int = 0,
        rng: random.Random | None = None,
    ) -> None:
        self.name = _checked_name("name", name)
        self.upstream = _address("upstream", upstream)
        self.host = host
        self._port = _port("port", port, allow_zero=True)
        self.rng = rng if rng is not None else random.Random()
        self.tally = ProxyCounters()
        self._lock = threading.Lock()
        self._toxics: dict[str, Toxic] = {}
        self._enabled = True
        self._down_since: float | None = None
        self._connections: set[Connection] = set()
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        host, port = self.upstream
        return f"FaultProxy(({host!r}, {port}), name={self.name!r}, port={self._port})"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Listen (unless disabled) and forward until :meth:`stop`. After a stop, starting
        again listens on the same port."""
        if self._thread is not None:
            raise RuntimeError(f"proxy {self.name!r} is already running; call stop() first")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=_run_loop, args=(loop,), name=f"memcert-proxy-{self.name}", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._call(self._open)
        except BaseException:
            self._halt()
            raise
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and end the loop's thread.

        Counters and toxics stay, for reading (and for a later :meth:`start`)."""
        if self._loop is None:
            return
        try:
            self._call(self._shutdown)
        finally:
            self._halt()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def listen_address(self) -> tuple[str, int]:
        """Where clients connect; known once started, and kept while disabled."""
        if self._port == 0:
            raise RuntimeError(f"proxy {self.name!r} has no port yet; call start() first")
        return (self.host, self._port)

    @property
    def enabled(self) -> bool:
        return self._enabled

    # -- toxics --------------------------------------------------------------------------

    def add_toxic(
        self,
        name: str,
        type: str,
        stream: Stream = "downstream",
        toxicity: float = 1.0,
        **attributes: int,
    ) -> Toxic:
        """Add a toxic, on open connections too (each rolls its toxicity now).

        Types and attributes (times in ms unless noted): ``latency`` (latency, jitter),
        ``timeout`` (timeout), ``reset_peer`` (timeout), ``bandwidth`` (rate, KB/s),
        ``slicer`` (average_size, size_variation, delay in µs), ``limit_data`` (bytes).
        """
        return self.add(Toxic(name, type, stream, toxicity, attributes))

    def add(self, toxic: Toxic) -> Toxic:
        """Add a toxic built beforehand, e.g. from a scenario file."""
        if not isinstance(toxic, Toxic):
            raise InvalidArgument(
                f"toxic={toxic!r} (type {type(toxic).__name__}) is not a Toxic. Build one "
                "with Toxic(name, type, stream, toxicity, attributes)."
            )

        def install() -> Toxic:
            with self._lock:
                if toxic.name in self._toxics:
                    raise InvalidArgument(
                        f"proxy {self.name!r} already has a toxic named {toxic.name!r}. "
                        "Remove it first, or change it with update_toxic()."
                    )
                self.tally.register(toxic)
                self._toxics[toxic.name] = toxic
            for connection in list(self._connections):
                connection.attach(toxic)
            return toxic

        return self._on_loop(install)

    def update_toxic(self, name: str, *, toxicity: float | None = None, **attributes: int) -> Toxic:
        """Change some attributes (or the toxicity) of a toxic; open connections roll again,
        and the toxic keeps its place in the order of its direction."""

        def change() -> Toxic:
            with self._lock:
                toxic = self._existing(name).updated(toxicity, **attributes)
                self.tally.register(toxic)
                self._toxics[name] = toxic
            for connection in list(self._connections):
                connection.replace(toxic)
            return toxic

        return self._on_loop(change)

    def remove_toxic(self, name: str) -> None:
        """Remove a toxic at once, cutting short any delay it is imposing. A blackhole
        closes the connections whose bytes it swallowed, since they cannot resume."""

        def remove() -> None:
            with self._lock:
                self._existing(name)
                del self._toxics[name]
                self.tally.retire(name)
            for connection in list(self._connections):
                connection.detach(name)

        self._on_loop(remove)

    def toxics(self) -> tuple[Toxic, ...]:
        """The toxics in force, in the order they were added."""
        with self._lock:
            return tuple(self._toxics.values())

    # -- down and up ---------------------------------------------------------------------

    def disable(self) -> None:
        """Take the proxy down: close every open connection and stop listening, so new
        connections are refused. Doing it twice is harmless."""
        if self._loop is None:
            self._go_down()
            return
        self._call(self._close_listener)

    def enable(self) -> None:
        """Bring the proxy back up, listening on the same port. Doing it twice is harmless."""
        if self._loop is None:
            self._come_up()
            return
        self._call(self._reopen)

    def heal(self) -> None:
        """End every fault: remove all toxics and bring the proxy up."""
        for toxic in self.toxics():
            self.remove_toxic(toxic.name)
        self.enable()

    # -- what happened -------------------------------------------------------------------

    def counters(self) -> dict[str, Any]:
        """A snapshot of what the proxy and each toxic did, removed toxics included.

        Keys: ``connections`` (accepted, open, upstream_failed), ``bytes`` (delivered
        upstream and downstream), ``down`` (disables, cut: connections closed by a
        disable, seconds spent down) and ``toxics``: per toxic its definition, ``active``,
        ``connections`` (that met it), ``fired`` (that it acted on), ``bytes`` (it
        delayed, throttled, sliced or dropped) and its type's own counters: latency
        ``chunks``; slicer ``slices``; timeout and limit_data ``closed``; reset_peer
        ``resets``. Connections refused while down are not here: the kernel refuses
        them before the proxy sees anything, so only the clients can count them.
        """
        proxy = self.tally.proxy()
        down_s = proxy.get("down_seconds", 0.0)
        if self._down_since is not None:
            down_s += time.monotonic() - self._down_since
        return {
            "name": self.name,
            "listen": f"{self.host}:{self._port}",
            "upstream": "{}:{}".format(*self.upstream),
            "enabled": self._enabled,
            "connections": {
                "accepted": int(proxy.get("accepted", 0)),
                "open": len(self._connections),
                "upstream_failed": int(proxy.get("upstream_failed", 0)),
            },
            "bytes": {stream: int(proxy.get(f"bytes_{stream}", 0)) for stream in STREAMS},
            "down": {
                "disables": int(proxy.get("disables", 0)),
                "cut": int(proxy.get("cut", 0)),
                "seconds": down_s,
            },
            "toxics": self.tally.toxics(),
        }

    def fired(self) -> dict[str, int]:
        """Per toxic name, the connections it acted on; ``down``: connections a disable
        cut. The coverage figure: a fault whose count is 0 never happened."""
        counts = {name: int(entry["fired"]) for name, entry in self.tally.toxics().items()}
        counts["down"] = int(self.tally.proxy().get("cut", 0))
        return counts

    # -- the loop's side -----------------------------------------------------------------

    def forget(self, connection: Connection) -> None:
        self._connections.discard(connection)

    # Server.close() stops listening at once; waiting for wait_closed() is not needed,
    # and from Python 3.12 on it would wait for the connections to end as well.

    async def _open(self) -> None:
        server = await self._listen()
        if self._enabled:
            self._server = server
        else:
            server.close()

    async def _listen(self) -> asyncio.Server:
        try:
            server = await asyncio.start_server(
                self._serve, self.host, self._port, reuse_address=True
            )
        except OSError as error:
            error.add_note(f"proxy {self.name!r} could not listen on {self.host}:{self._port}")
            raise
        self._port = server.sockets[0].getsockname()[1]
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Handle one client. Swallows its own cancellation at shutdown: asyncio's server
        reports a cancelled handler as an error, and there is nothing left to do."""
        with contextlib.suppress(asyncio.CancelledError):
            await self._relay(reader, writer)
        if not writer.transport.is_closing():
            writer.transport.abort()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._enabled:
            writer.transport.abort()
            return
        self.tally.add_proxy("accepted")
        try:
            upstream = await asyncio.open_connection(*self.upstream)
        except OSError:
            self.tally.add_proxy("upstream_failed")
            writer.transport.close()
            return
        connection = Connection(self, (reader, writer), upstream)
        if not self._enabled:
            self.tally.add_proxy("cut")
            connection.close(reset=False)
            return
        self._connections.add(connection)
        connection.start(self.toxics())
        await connection.closed.wait()

    async def _close_listener(self) -> None:
        if not self._enabled:
            return
        self._go_down()
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            self.tally.add_proxy("cut")
            connection.close(reset=False)

    async def _reopen(self) -> None:
        if self._enabled:
            return
        self._server = await self._listen()
        self._come_up()

    async def _shutdown(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            connection.close(reset=False, abort=True)
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await asyncio.sleep(0)  # let the aborted transports close their sockets

    def _go_down(self) -> None:
        if self._enabled:
            self._enabled = False
            self._down_since = time.monotonic()
            self.tally.add_proxy("disables")

    def _come_up(self) -> None:
        if not self._enabled and self._down_since is not None:
            self.tally.add_proxy("down_seconds", time.monotonic() - self._down_since)
        self._enabled = True
        self._down_since = None

    # -- crossing threads ----------------------------------------------------------------

    def _existing(self, name: str) -> Toxic:
        toxic = self._toxics.get(name)
        if toxic is None:
            known = ", ".join(self._toxics) or "none"
            raise InvalidArgument(
                f"proxy {self.name!r} has no toxic named {name!r}. Its toxics: {known}."
            )
        return toxic

    def _on_loop(self, change: Callable[[], _T]) -> _T:
        """Run ``change`` where connections live: on the loop, or here if none runs."""
        if self._loop is None or threading.current_thread() is self._thread:
            return change()

        async def call() -> _T:
            return change()

        return self._call(call)

    def _call(self, coroutine: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coroutine(), self._loop)
        return future.result(_CONTROL_TIMEOUT_S)

    def _halt(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        self._server = None
        self._connections.clear()
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()


class ProxyGroup(Mapping[str, FaultProxy]):
    """One :class:`FaultProxy` per client group, all in front of the same upstream.

    Clients of a group connect to their group's proxy, so a partition of the group is a
    ``disable()`` of that proxy alone, and a toxic can hit one group and spare another.
    Each proxy draws from its own ``random.Random``, seeded from ``rng``.
    """

    def __init__(
        self,
        upstream: tuple[str, int] | str,
        groups: Iterable[str],
        *,
        host: str = "127.0.0.1",
        rng: random.Random | None = None,
    ) -> None:
        seeds = rng if rng is not None else random.Random()
        self._proxies: dict[str, FaultProxy] = {}
        for group in groups:
            if group in self._proxies:
                raise InvalidArgument(f"groups: {group!r} is given twice. Name each group once.")
            self._proxies[group] = FaultProxy(
                upstream, name=group, host=host, rng=random.Random(seeds.getrandbits(64))
            )
        if not self._proxies:
            raise InvalidArgument("groups is empty. Give at least one client group name.")

    def __getitem__(self, group: str) -> FaultProxy:
        proxy = self._proxies.get(group)
        if proxy is None:
            raise KeyError(f"no client group {group!r}; the groups are {', '.join(self)}")
        return proxy

    def __iter__(self) -> Iterator[str]:
        return iter(self._proxies)

    def __len__(self) -> int:
        return len(self._proxies)

    def start(self) -> ProxyGroup:
        started: list[FaultProxy] = []
        try:
            for proxy in self._proxies.values():
                started.append(proxy.start())
        except BaseException:
            for proxy in started:
                proxy.stop()
            raise
        return self

    def stop(self) -> None:
        for proxy in self._proxies.values():
            proxy.stop()

    def __enter__(self) -> ProxyGroup:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def partition(self, *groups: str) -> None:
        """Cut the given groups off from the upstream (the others keep talking to it)."""
        for group in groups:
            self[group].disable()

    def heal(self) -> None:
        """End every fault on every group's proxy."""
        for proxy in self._proxies.values():
            proxy.heal()

    def counters(self) -> dict[str, dict[str, Any]]:
        return {group: proxy.counters() for group, proxy in self._proxies.items()}

    def fired(self) -> dict[str, int]:
        """``group/toxic`` (and ``group/down``) -> connections that fault acted on."""
        return {
            f"{group}/{fault}": count
            for group, proxy in self._proxies.items()
            for fault, count in proxy.fired().items()
        }


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        with contextlib.suppress(RuntimeError):
            loop.close()


def _checked_name(field: str, name: object) -> str:
    if not isinstance(name, str) or not name or "/" in name:
        raise InvalidArgument(
            f"{field}={name!r} (type {type(name).__name__}) is not a usable proxy name. "
            "Give a non-empty string without '/'."
        )
    return name


def _address(field: str, value: object) -> tuple[str, int]:
    if isinstance(value, str):
        host, colon, port_text = value.rpartition(":")
        if colon and host and port_text.isdigit():
            return (host.strip("[]"), _port(field, int(port_text), allow_zero=False))
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and value[0]:
        return (value[0], _port(field, value[1], allow_zero=False))
    raise InvalidArgument(
        f"{field}={value!r} (type {type(value).__name__}) is not an address. "
        "Give 'host:port' or a (host, port) tuple."
    )


def _port(field: str, value: object, *, allow_zero: bool) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 65535:
        raise InvalidArgument(
            f"{field}: port={value!r} (type {type(value).__name__}) is not a port. "
            f"Give a whole number in [{low}, 65535]."
        )
    return value
