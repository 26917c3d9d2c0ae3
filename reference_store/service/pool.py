"""Store handles for concurrent requests: one handle per request in flight, never shared.

A :class:`~reference_store.ReferenceStore` handle may move between threads but must not
be used by two at once. Requests run in worker threads, so the pool lends each one a
handle of its own and takes it back afterwards. Handles are opened lazily, up to
``size``; a capacity limiter of the same size admits requests to the threads, so a
request never waits for a handle, only for its turn.

One exception, for a database in this process (a SQLite file): *quick* work, a read of
one entity, runs on the event loop itself, with one more handle that only the loop
uses. Such a read takes about 15 µs, and the hop to a worker thread and back costs
about 55 µs of CPU when idle and more under load, when the threads contend for the GIL:
under Locust, the service's CPU per read halved once reads stopped hopping
(docs/performance.md, "HTTP service"). A SQLite reader in WAL mode never waits for a
writer, so the loop is held for the read alone. A database across a network
(PostgreSQL) always goes to the threads: its reads wait on the network.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

from ..store import ReferenceStore

__all__ = ["HandlePool"]

T = TypeVar("T")


class HandlePool:
    """Up to ``size`` handles onto one database, lent to one worker thread at a time."""

    def __init__(self, open_handle: Callable[[], ReferenceStore], size: int, *,
                 in_process: bool = False) -> None:
        self._open = open_handle
        self.size = size
        self.in_process = in_process
        self._free: list[ReferenceStore] = []
        self._opened = 0
        self._lock = threading.Lock()
        self._limiter: anyio.CapacityLimiter | None = None
        self._loop_handle: ReferenceStore | None = None

    @property
    def opened(self) -> int:
        """Handles opened so far (in use or idle)."""
        return self._opened

    def warm(self) -> None:
        """Open one handle now, so an unreachable database fails the start, not a request;
        with an in-process database, it is the event loop's own."""
        handle = self._take()
        if self.in_process and self._loop_handle is None:
            self._loop_handle = handle
        else:
            self._give(handle)

    async def run(self, work: Callable[[ReferenceStore], T], *, quick: bool = False) -> T:
        """Run ``work`` with a handle of its own in a worker thread.

        ``quick`` work (it must not block: a read of one entity) runs on the event loop
        instead when the database is in this process; see the module's docstring.
        """
        if quick and self.in_process:
            if self._loop_handle is None:
                self._loop_handle = self._take()
            return work(self._loop_handle)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.size)
        return await anyio.to_thread.run_sync(self._lend, work, limiter=self._limiter)

    def close(self) -> None:
        """Close every idle handle; call it once the server has finished its requests."""
        with self._lock:
            free, self._free = self._free, []
            loop, self._loop_handle = self._loop_handle, None
        for handle in (*free, *([] if loop is None else [loop])):
            handle.close()

    def _lend(self, work: Callable[[ReferenceStore], T]) -> T:
        handle = self._take()
        try:
            return work(handle)
        finally:
            self._give(handle)

    def _take(self) -> ReferenceStore:
        with self._lock:
            if self._free:
                return self._free.pop()
            self._opened += 1
        try:
            return self._open()
        except BaseException:
            with self._lock:
                self._opened -= 1
            raise

    def _give(self, handle: ReferenceStore) -> None:
        with self._lock:
            self._free.append(handle)
