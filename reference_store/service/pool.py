"""Store handles for concurrent requests, lent to the worker threads that run the requests' work.

A :class:`~reference_store.ReferenceStore` handle may move between threads but must not
be used by two at once, and its calls block on the database. So every request's store
work is one call of the store's public API, run in a worker thread of a
:class:`~concurrent.futures.ThreadPoolExecutor` of ``size`` workers (reached with
``loop.run_in_executor``), with a handle the pool lends it and takes back afterwards.
The event loop never waits on the database. Handles are opened lazily, up to ``size``;
work waits in the executor's queue for a free worker, so at most ``size`` handles are
ever lent at once.

**A cancelled request** (its task cancelled, by a server stopping after its grace
period or by anything else) waits for nothing: its task ends at once. Work it had
queued and that no worker has started is dropped and never runs, so a write whose
caller is gone before it began is not applied. Work a worker has started runs to its
end in that worker, so every transaction in it commits or rolls back whole; its answer
is discarded. :meth:`StorePool.close` waits for the work the workers have started before
it closes the handles, so stopping the server never cuts a write in half.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .. import ReferenceStore

__all__ = ["StorePool"]

T = TypeVar("T")


class StorePool:
    """Up to ``size`` handles onto one database, each lent to one worker thread at a time."""

    def __init__(self, open_handle: Callable[[], ReferenceStore], size: int) -> None:
        self._open = open_handle
        self.size = size
        self._free: list[ReferenceStore] = []
        self._opened = 0
        self._lock = threading.Lock()
        self._workers = ThreadPoolExecutor(size, thread_name_prefix="memcert-store")

    @property
    def opened(self) -> int:
        """Handles opened so far, in use or idle."""
        return self._opened

    def warm(self) -> None:
        """Open one handle now, so that an unreachable database fails the start and not
        the first request."""
        self._give(self._take())

    async def run(self, work: Callable[[ReferenceStore], T]) -> T:
        """Run ``work`` with a handle of its own in a worker thread.

        If the caller is cancelled, it does not wait for ``work`` (see the module's
        docstring for what becomes of the work).
        """
        return await asyncio.get_running_loop().run_in_executor(self._workers, self._lend, work)

    def close(self) -> None:
        """Wait for the work the workers have started, drop the rest, close every handle.

        Call it once the server has stopped taking requests; the pool runs nothing after.
        """
        self._workers.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            free, self._free = self._free, []
        for handle in free:
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
