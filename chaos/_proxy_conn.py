"""One proxied connection: the client's socket, its upstream twin, and a link each way.

A link reads one side as fast as it can (stamping each chunk with its arrival, which
latency counts from), queues the chunks, and a second task carries each through the
toxics of its direction, in the order they were added, to the other side. Reading apart
from writing keeps a delayed chunk from delaying the reading of the next, as on a real
network path; the bounded queue passes a slow writer's back-pressure on to the sender.

Everything here runs on the proxy's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

from scenarios.network_plan import Stream, Toxic

from ._toxics import Attached, Chunk, ProxyCounters

__all__ = ["Connection", "Owner"]

_READ_SIZE = 65536
_QUEUED_CHUNKS = 16
_LINGER_NONE = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: close() discards unsent data and sends RST instead of FIN."""

Pair = tuple[asyncio.StreamReader, asyncio.StreamWriter]


_RUNNING: set[asyncio.Task[None]] = set()
"""Every link task until it has finished. The event loop keeps only weak references to
tasks, and a connection closed while its tasks are still unwinding a cancellation is
forgotten by its proxy; without this, such a task is collected mid-cancel and asyncio
prints "Task was destroyed but it is pending!"."""


class Owner(Protocol):
    """The proxy, as a connection sees it."""

    rng: random.Random
    tally: ProxyCounters

    def forget(self, connection: Connection) -> None:
        """Drop a closed connection from the live set; must not close anything."""
        ...


class Connection:
    """A client connection and its upstream connection, with the toxics they meet."""

    def __init__(self, owner: Owner, client: Pair, upstream: Pair) -> None:
        self.owner = owner
        self.rng = owner.rng
        self.tally = owner.tally
        self.links: dict[Stream, _Link] = {
            "upstream": _Link(self, "upstream", client[0], upstream[1]),
            "downstream": _Link(self, "downstream", upstream[0], client[1]),
        }
        self.closed = asyncio.Event()
        self._writers = (client[1], upstream[1])
        self._met: set[str] = set()
        self._fired: set[str] = set()

    def start(self, toxics: Iterable[Toxic]) -> None:
        for toxic in toxics:
            self.attach(toxic)
        for link in self.links.values():
            link.start()

    def attach(self, toxic: Toxic) -> None:
        """Roll ``toxic``'s toxicity for this connection and put it last in its chain."""
        attached = self._meet(toxic)
        self.links[toxic.stream].chain.append(attached)
        attached.start()

    def replace(self, toxic: Toxic) -> None:
        """Swap in a new version of a toxic at its place in the chain, rolling again."""
        chain = self.links[toxic.stream].chain
        for index, old in enumerate(chain):
            if old.toxic.name == toxic.name:
                new = self._meet(toxic)
                chain[index] = new
                new.start()
                old.detach(successor=new)
                return

    def detach(self, name: str) -> None:
        for link in self.links.values():
            for attached in [a for a in link.chain if a.toxic.name == name]:
                link.chain.remove(attached)
                attached.detach()

    def mark_fired(self, toxic: str) -> None:
        if toxic not in self._fired:
            self._fired.add(toxic)
            self.tally.add(toxic, "fired")

    def close(self, *, reset: bool, abort: bool = False) -> None:
        """Close both sockets once: with RST if ``reset``; at once, dropping what is still
        buffered, if ``abort``; else after flushing what was already forwarded."""
        if self.closed.is_set():
            return
        self.closed.set()
        current = asyncio.current_task()
        for link in self.links.values():
            for attached in link.chain:
                attached.stop()
            for task in link.tasks:
                if task is not current:
                    task.cancel()
        for writer in self._writers:
            transport = writer.transport
            if reset:
                sock = transport.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NONE)
            if reset or abort:
                transport.abort()
            else:
                transport.close()
        self.owner.forget(self)

    def link_finished(self) -> None:
        """Both sides said EOF and it was passed on: the exchange is over."""
        if all(link.eof_delivered for link in self.links.values()):
            self.close(reset=False)

    def _meet(self, toxic: Toxic) -> Attached:
        if toxic.name not in self._met:
            self._met.add(toxic.name)
            self.tally.add(toxic.name, "connections")
        return Attached(toxic, self, self.rng.random() < toxic.toxicity)


class _Link:
    """One direction of a connection: ``reader``'s bytes through ``chain`` to ``writer``."""

    def __init__(
        self,
        connection: Connection,
        stream: Stream,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.connection = connection
        self.stream = stream
        self.reader = reader
        self.writer = writer
        self.chain: list[Attached] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.eof_delivered = False
        self._queue: asyncio.Queue[Chunk] = asyncio.Queue(_QUEUED_CHUNKS)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.tasks = [
            loop.create_task(self._guarded(self._read())),
            loop.create_task(self._guarded(self._write())),
        ]
        for task in self.tasks:
            _RUNNING.add(task)
            task.add_done_callback(_RUNNING.discard)

    async def _read(self) -> None:
        while True:
            data = await self.reader.read(_READ_SIZE)
            await self._queue.put(Chunk(time.monotonic(), data))
            if not data:
                return

    async def _write(self) -> None:
        while True:
            chunk = await self._queue.get()
            await self._through(tuple(self.chain), 0, chunk)
            if not chunk.data:
                return

    async def _through(self, chain: tuple[Attached, ...], index: int, chunk: Chunk) -> None:
        """Hand ``chunk`` to toxic ``index`` of ``chain``, which passes on what survives."""
        if index == len(chain):
            await self._deliver(chunk)
            return

        async def onward(piece: Chunk) -> None:
            await self._through(chain, index + 1, piece)

        await chain[index].handle(chunk, onward)

    async def _deliver(self, chunk: Chunk) -> None:
        if chunk.data:
            # Counted before the peer can see the bytes, so a reader of the counters after
            # a reply never finds them behind.
            self.connection.tally.add_proxy(f"bytes_{self.stream}", len(chunk.data))
            self.writer.write(chunk.data)
            await self.writer.drain()
            return
        if self.writer.can_write_eof():
            self.writer.write_eof()
        self.eof_delivered = True
        self.connection.link_finished()

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        """Run one side's loop; a socket error ends the whole connection, and a reset
        from one peer is passed on to the other as a reset."""
        try:
            await work
        except ConnectionResetError:
            self.connection.close(reset=True)
        except OSError:
            self.connection.close(reset=False)
        except Exception:
            self.connection.close(reset=False)
            raise
