"""Toxics in action: what the fault proxy does to the bytes of one direction of a
connection, one behaviour per toxic type.

The toxics themselves are data, declared and checked in :mod:`scenarios.network_plan`
(:class:`~scenarios.network_plan.Toxic`, :data:`~scenarios.network_plan.KINDS`);
:data:`BEHAVIOURS` acts out each declared type, and nothing else.

Each connection rolls a toxic's ``toxicity`` once, when the two meet (the connection
opens, or the toxic is added or updated); a toxic that lost the roll passes everything
through on that connection. What a toxic really did is counted in
:class:`ProxyCounters`, because a toxic that never touched a byte has tested nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from invariants.errors import InvalidArgument
from scenarios.network_plan import COMMON_COUNTERS, KINDS, Toxic

__all__ = [
    "BEHAVIOURS",
    "Attached",
    "Chunk",
    "Host",
    "ProxyCounters",
]


# -- what the toxics really did ----------------------------------------------------------


class ProxyCounters:
    """Counters of what each toxic and the proxy really did, safe to read from any thread.

    Counts outlive the toxic: a scenario that added a toxic at t and removed it at t2
    still reads what it did once the run is over.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._toxics: dict[str, dict[str, Any]] = {}
        self._proxy: dict[str, float] = {}

    def register(self, toxic: Toxic) -> None:
        """Start (or resume) counting for ``toxic``; refuses a name already used by
        another type, whose counts would otherwise be mixed up with these."""
        with self._lock:
            entry = self._toxics.get(toxic.name)
            if entry is not None and entry["type"] != toxic.type:
                raise InvalidArgument(
                    f"toxic {toxic.name!r} was a {entry['type']} toxic earlier on this proxy and "
                    f"its counts are kept under that name. Give the {toxic.type} toxic another "
                    "name."
                )
            if entry is None:
                counters = (*COMMON_COUNTERS, *KINDS[toxic.type].counters)
                entry = {"type": toxic.type, **dict.fromkeys(counters, 0)}
                self._toxics[toxic.name] = entry
            entry.update(
                stream=toxic.stream,
                toxicity=toxic.toxicity,
                attributes=dict(toxic.attributes),
                active=True,
            )

    def retire(self, name: str) -> None:
        with self._lock:
            self._toxics[name]["active"] = False

    def add(self, name: str, counter: str, amount: int = 1) -> None:
        with self._lock:
            self._toxics[name][counter] += amount

    def add_proxy(self, counter: str, amount: float = 1) -> None:
        with self._lock:
            self._proxy[counter] = self._proxy.get(counter, 0) + amount

    def proxy(self) -> dict[str, float]:
        with self._lock:
            return dict(self._proxy)

    def toxics(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {
                name: {**entry, "attributes": dict(entry["attributes"])}
                for name, entry in self._toxics.items()
            }


# -- acting a toxic out on one connection -----------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    """Bytes read from one side, stamped with when they arrived; empty ``data`` is EOF."""

    arrived: float
    data: bytes


Emit = Callable[[Chunk], Awaitable[None]]


class Host(Protocol):
    """What a toxic may do to the connection it sits on. Called on the proxy's loop."""

    rng: random.Random
    tally: ProxyCounters

    def mark_fired(self, toxic: str) -> None:
        """Record that ``toxic`` acted on this connection (counted once per connection)."""
        ...

    def close(self, *, reset: bool) -> None:
        """Close both sockets, with RST if ``reset``; must not block or await."""
        ...


class Attached:
    """One toxic on one connection: the outcome of its toxicity roll and its state.

    Lives on the proxy's event loop only. ``detach`` cuts short whatever it is waiting
    for, so removing a toxic takes effect at once rather than after the current delay.
    """

    def __init__(self, toxic: Toxic, host: Host, on: bool) -> None:
        self.toxic = toxic
        self.host = host
        self.on = on
        self.removed = asyncio.Event()
        self.dropped = False
        self.passed = 0
        self.tripped = False
        self._timer: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the toxic's own clock, for a timeout that closes the connection."""
        if self.on and self.toxic.type == "timeout" and self.toxic.attributes["timeout"] > 0:
            self._timer = asyncio.get_running_loop().create_task(self._close_later())

    def stop(self) -> None:
        """Stop acting and waiting, with no further effect on the connection."""
        self.removed.set()
        if self._timer is not None:
            self._timer.cancel()

    def detach(self, successor: Attached | None = None) -> None:
        """Stop acting. A blackhole that swallowed bytes closes the connection: the stream
        lost data and cannot resume (an idle blackholed connection simply resumes)."""
        self.stop()
        still_dark = successor is not None and successor.on and successor.toxic.type == "timeout"
        if self.toxic.type == "timeout" and self.dropped and not still_dark:
            self.host.tally.add(self.toxic.name, "closed")
            self.host.close(reset=False)

    async def handle(self, chunk: Chunk, emit: Emit) -> None:
        """Pass ``chunk`` on through ``emit`` as this toxic would (or not at all)."""
        if not self.on or self.removed.is_set():
            await emit(chunk)
            return
        await BEHAVIOURS[self.toxic.type](self, chunk, emit)

    def acted(self, counter: str | None = None, amount: int = 0) -> None:
        self.host.mark_fired(self.toxic.name)
        if counter is not None:
            self.host.tally.add(self.toxic.name, counter, amount)

    async def pause(self, seconds: float) -> None:
        """Sleep, but wake up as soon as the toxic is removed."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.removed.wait(), seconds)

    async def _close_later(self) -> None:
        await asyncio.sleep(self.toxic.attributes["timeout"] / 1000)
        self.acted("closed", 1)
        self.host.close(reset=False)


async def _latency(att: Attached, chunk: Chunk, emit: Emit) -> None:
    if chunk.data:
        latency, jitter = att.toxic.attributes["latency"], att.toxic.attributes["jitter"]
        delay_ms = latency + (att.host.rng.uniform(-jitter, jitter) if jitter else 0)
        if delay_ms > 0:
            att.acted("bytes", len(chunk.data))
            att.host.tally.add(att.toxic.name, "chunks")
            await att.pause(chunk.arrived + delay_ms / 1000 - time.monotonic())
    await emit(chunk)


async def _timeout(att: Attached, chunk: Chunk, emit: Emit) -> None:
    att.dropped = True
    att.acted("bytes", len(chunk.data))


async def _reset_peer(att: Attached, chunk: Chunk, emit: Emit) -> None:
    if att.tripped:
        return
    att.tripped = True
    att.acted("bytes", len(chunk.data))
    # Not cut short by removal: the chunk is already gone, so the stream cannot go on.
    await asyncio.sleep(att.toxic.attributes["timeout"] / 1000)
    att.host.tally.add(att.toxic.name, "resets")
    att.host.close(reset=True)


async def _bandwidth(att: Attached, chunk: Chunk, emit: Emit) -> None:
    if not chunk.data:
        await emit(chunk)
        return
    rate = att.toxic.attributes["rate"] * 1000
    att.acted("bytes", len(chunk.data))
    step = max(1, rate // 10)
    for start in range(0, len(chunk.data), step):
        piece = chunk.data[start : start + step]
        await att.pause(len(piece) / rate)
        await emit(Chunk(chunk.arrived, piece))


async def _slicer(att: Attached, chunk: Chunk, emit: Emit) -> None:
    average = att.toxic.attributes["average_size"]
    variation = att.toxic.attributes["size_variation"]
    cuts = list(_cuts(att.host.rng, average, variation, 0, len(chunk.data)))
    if len(cuts) > 1:
        att.acted("bytes", len(chunk.data))
        att.host.tally.add(att.toxic.name, "slices", len(cuts))
    for number, (start, end) in enumerate(cuts):
        if number:
            await att.pause(att.toxic.attributes["delay"] / 1_000_000)
        await emit(Chunk(chunk.arrived, chunk.data[start:end]))


def _cuts(
    rng: random.Random, average: int, variation: int, start: int, end: int
) -> Iterable[tuple[int, int]]:
    """Halve ``[start, end)`` around its middle ± ``variation`` until every piece is at most
    ``average + variation`` long; halving keeps the sizes even, with no runt at the end.
    Every piece is non-empty because ``variation < average``."""
    if end - start - average <= variation:
        yield start, end
        return
    middle = start + (end - start) // 2 + (rng.randint(-variation, variation) if variation else 0)
    yield from _cuts(rng, average, variation, start, middle)
    yield from _cuts(rng, average, variation, middle, end)


async def _limit_data(att: Attached, chunk: Chunk, emit: Emit) -> None:
    room = att.toxic.attributes["bytes"] - att.passed
    if len(chunk.data) < room or not chunk.data:
        att.passed += len(chunk.data)
        await emit(chunk)
        return
    if room > 0:
        att.passed += room
        await emit(Chunk(chunk.arrived, chunk.data[:room]))
    att.acted("bytes", len(chunk.data) - max(room, 0))
    att.host.tally.add(att.toxic.name, "closed")
    att.host.close(reset=False)


BEHAVIOURS: Mapping[str, Callable[[Attached, Chunk, Emit], Awaitable[None]]] = MappingProxyType(
    {
        "latency": _latency,
        "timeout": _timeout,
        "reset_peer": _reset_peer,
        "bandwidth": _bandwidth,
        "slicer": _slicer,
        "limit_data": _limit_data,
    }
)
"""How each toxic type of :data:`scenarios.network_plan.KINDS` acts, by type: one
behaviour for each declared type, and none for a type that is not declared."""

