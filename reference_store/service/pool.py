"""Store handles for concurrent requests, and where each request's database work runs.

A :class:`~reference_store.ReferenceStore` handle may move between threads but must not
be used by two at once. Work that may wait (every write, which can wait for a lock, and
anything that is not one statement) runs in worker threads, so the event loop never
waits on the database; the pool lends each piece of work a handle of its own and takes
it back afterwards. Handles are opened lazily, up to ``size``.

**Calls of one statement** (:meth:`HandlePool.answer`: the contract read, search,
recall and touch) skip the threads wherever the database allows, because on a 2-core
machine the hop to a thread and back, and the threads' contention for the GIL, cost
more CPU than the statement itself (docs/performance.md, "HTTP service"):

- a database in this process (a SQLite file): a read runs on the event loop with a
  handle only the loop uses. A SQLite reader in WAL mode never waits for a writer, so
  the loop is held for the read's own CPU, which it would need the GIL for anyway. A
  writing statement (touch) may wait for the write lock, so it goes to a thread;
- PostgreSQL: the loop's handle checks the input and plans the call, and the loop
  sends its one statement, reading or writing, on an asynchronous connection of its
  own (``loop_connections.LoopConnections``, asyncpg's: about half psycopg's CPU per
  statement), so it waits on the network or on a row lock
  without holding a thread. Contract reads that wait at the same time go together, as
  one statement (:class:`_ReadBatches`). A writing statement is not retried there:
  touch, the only one, updates one row in a statement of its own under READ COMMITTED,
  which can neither deadlock nor fail to serialize, so none of the store's transient
  errors can reach it;
- anything else (a private in-memory SQLite database, which lives in its one
  connection): a worker thread.

**Writes on PostgreSQL** (:meth:`HandlePool.remember`) go from the loop too, below the
semantic level: the store's guarded write is two single statements, a read and a
guarded change (``ReferenceStore._planned_write``), which the loop sends on the same
connections, deciding in between on the loop's handle. A write whose guard keeps
missing, or whose statement meets a transient failure (which wrote nothing: it is one
statement), goes to a worker thread and takes the entity lock there. At the semantic
level deciding asks the embedder, which the loop must not wait for: such writes go to a
thread.

**Deletes and restores on PostgreSQL** (:meth:`HandlePool.change`) take the entity lock
from the start, in a transaction the loop sends on one of the same connections (the
store's statements and rules, as plans: ``ReferenceStore._planned_change``); the row
lock makes other writers of the entity wait in the database, never the loop. One that
meets a transient failure or loses its connection goes to a worker thread, whose
attempt with the same op_id gets the first outcome if the loop's had committed.

The threads are a :class:`~concurrent.futures.ThreadPoolExecutor` of ``size`` workers,
reached with ``loop.run_in_executor``, which costs about half the CPU per hop that
``anyio.to_thread.run_sync`` did. Work waits in the executor's queue for a free worker,
so at most ``size`` handles are ever lent at once.

**A cancelled request** (its task cancelled, by a server stopping after its grace
period or by anything else) waits for nothing: its task ends at once. Work it had
queued and that no worker has started is dropped and never runs, so a write whose
caller is gone before it began is not applied. Work a worker has started runs to its
end in that worker, and so every transaction in it commits or rolls back whole; its
answer is discarded. A statement the loop sent on PostgreSQL is abandoned with its
connection, which is closed; the server runs it whole or not at all, as a transaction
of its own (a cancelled touch may or may not have counted; a cancelled write sent from
the loop may or may not have been applied, and a retry with its op_id gets the outcome
either way). :meth:`HandlePool.close`
waits for the workers' work before it closes the handles, so stopping the server never
cuts a write in half.

The pool serves one event loop at a time: asynchronous connections made for a loop
that has gone are closed when a new loop first reads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument

from ..statements import Plan
from ..store import ReferenceStore, WriteOptions, _Replayed, _Steps, _transient, guard_refused

if TYPE_CHECKING:
    from .loop_connections import LoopConnections

__all__ = ["HandlePool"]

T = TypeVar("T")

BATCHES_SENDING = 2
"""Batches of reads on their way to PostgreSQL at once. One would leave the server idle
while the loop splits a batch's rows; with two, the reads that arrive meanwhile wait at
most for one round trip."""
MOST_PER_BATCH = 128
"""Reads in one statement, at most: a bound on the arrays sent and on the rows a single
answer holds up."""


class HandlePool:
    """Up to ``size`` handles onto one database, lent to one worker thread at a time.

    ``in_process`` says the database is a file this process opens (SQLite), whose reads
    may run on the event loop itself.
    """

    def __init__(self, open_handle: Callable[[], ReferenceStore], size: int, *,
                 in_process: bool = False) -> None:
        self._open = open_handle
        self.size = size
        self.in_process = in_process
        self._free: list[ReferenceStore] = []
        self._opened = 0
        self._lock = threading.Lock()
        self._workers = ThreadPoolExecutor(size, thread_name_prefix="memcert-store")
        self._loop_handle: ReferenceStore | None = None
        self._remote: LoopConnections | None = None
        self._reads: _ReadBatches | None = None
        self._threads_only = False

    @property
    def opened(self) -> int:
        """Handles opened so far (in use or idle); the loop's connections to PostgreSQL
        are not handles and are not counted."""
        return self._opened

    def warm(self) -> None:
        """Open one handle now, so an unreachable database fails the start, not a request;
        where reads run on the loop, it is the loop's own, and on PostgreSQL one of the
        loop's connections is opened and closed too. Call it with no loop running."""
        self._loop_side()
        if self._remote is not None:
            self._remote.probe()

    async def run(self, work: Callable[[ReferenceStore], T]) -> T:
        """Run ``work`` with a handle of its own in a worker thread.

        If the caller is cancelled, it does not wait for ``work`` (see the module's
        docstring for what becomes of the work).
        """
        return await asyncio.get_running_loop().run_in_executor(self._workers, self._lend, work)

    async def remember(self, op: Write, options: WriteOptions) -> Ack:
        """A write. On PostgreSQL below the semantic level its guarded attempts go from
        the event loop (see the module's docstring); elsewhere, and under the entity
        lock when those keep missing or meet a transient failure, a worker thread."""
        handle = self._loop_side()
        remote = self._remote
        steps = None if handle is None or remote is None else handle._planned_write(op, options)
        if handle is None or remote is None or steps is None:
            return await self.run(lambda store: store.remember(op, options))
        try:
            ack = await _sent(remote, steps)
        except _Replayed as replayed:
            return await self._first_outcome(op, replayed)
        except DBAPIError as error:
            if not _transient(error):
                raise
            ack = None  # its statement failed whole: nothing was written
        if ack is None:
            return await self.run(lambda store: store._remember_locked(op, options))
        handle._acknowledged("write", ack)
        return ack

    async def change(self, op: Delete | Restore) -> Ack:
        """A delete or a restore. On PostgreSQL its transaction goes from the event loop
        (see the module's docstring); on SQLite, and when that transaction meets a
        transient failure or loses its connection, a worker thread."""
        handle = self._loop_side()
        remote = self._remote
        steps = None if handle is None or remote is None else handle._planned_change(op)
        if handle is None or remote is None or steps is None:
            return await self.run(lambda store: _sent_change(store, op))
        try:
            ack = await remote.transaction(steps)
        except _Replayed as replayed:
            return await self._first_outcome(op, replayed)
        except DBAPIError as error:
            if not (_transient(error) or error.connection_invalidated):
                raise
            # Rolled back, or, had the connection died at COMMIT, applied: a thread's
            # attempt with the same op_id then gets that first outcome.
            return await self.run(lambda store: _sent_change(store, op))
        handle._acknowledged("delete" if isinstance(op, Delete) else "restore", ack)
        return ack

    async def _first_outcome(self, op: Write | Delete | Restore, replayed: _Replayed) -> Ack:
        """A replay's answer: the outcome it found logged, else the one logged for its
        op_id, read by a statement of its own."""
        if replayed.outcome is not None:
            return replayed.outcome
        return await self.answer(
            lambda store: store._plan_first_outcome(op.namespace, op.op_id))

    async def read(self, namespace: str, entity_id: str) -> list[Record]:
        """The contract read, answered like :meth:`answer`; on PostgreSQL, together with
        the other reads waiting at the same time."""
        if self._loop_side() is not None and self._reads is not None:
            return await self._reads.read(namespace, entity_id)
        return await self.answer(lambda store: store._plan_read(namespace, entity_id))

    async def answer(self, plan: Callable[[ReferenceStore], Plan[T]]) -> T:
        """Answer the call of one statement ``plan`` makes with a handle, where it costs
        least (see the module's docstring).

        ``plan`` only checks input and builds the statement, so it may raise for bad
        input before anything is sent.
        """
        handle = self._loop_side()
        if handle is None:
            return await self.run(lambda store: store._answer(plan(store)))
        planned = plan(handle)
        if self._remote is not None:
            rows = await self._remote.all(planned.statement, planned.params)
            return planned.finish(rows)
        if planned.writes:
            return await self.run(lambda store: store._answer(plan(store)))
        return handle._answer(planned)

    def close(self) -> None:
        """Wait for the work the workers have started, drop the rest, close every handle.

        Call it once the server has stopped taking requests; the pool runs nothing after.
        """
        self._workers.shutdown(wait=True, cancel_futures=True)
        if self._remote is not None:
            self._remote.close()
        with self._lock:
            free, self._free = self._free, []
            loop, self._loop_handle = self._loop_handle, None
            self._threads_only = True  # so a late call meets the closed executor
        for handle in (*free, *([] if loop is None else [loop])):
            handle.close()

    def _loop_side(self) -> ReferenceStore | None:
        """The event loop's own handle, opened on first use; None where reads go to the
        threads (a handle opened to find that out is kept for them)."""
        if self._loop_handle is None and not self._threads_only:
            handle = self._take()
            if self.in_process:
                self._loop_handle = handle
            elif handle.engine.dialect.name == "postgresql":
                try:
                    self._remote = _loop_connections(handle.engine, self.size)
                except BaseException:
                    self._give(handle)
                    raise
                self._reads = _ReadBatches(self._remote, handle._plan_reads)
                self._loop_handle = handle
            else:
                self._threads_only = True
                self._give(handle)
        return self._loop_handle

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


def _loop_connections(engine: Engine, size: int) -> LoopConnections:
    """The loop's connections to PostgreSQL, whose module needs asyncpg."""
    try:
        from .loop_connections import LoopConnections
    except ImportError as missing:
        raise InvalidArgument(
            "memcert serve on PostgreSQL needs asyncpg, which the postgres extra "
            "installs: pip install 'memcert[postgres]'") from missing
    return LoopConnections(engine, size)


async def _sent(remote: LoopConnections, steps: _Steps) -> Ack | None:
    """Run a write's guarded attempts (``ReferenceStore._planned_write``) on the loop."""
    answer: Any = None
    while True:
        try:
            plan = steps.send(answer)
        except StopIteration as done:
            result: Ack | None = done.value
            return result
        try:
            answer = plan.finish(await remote.all(plan.statement, plan.params))
        except IntegrityError as error:
            if not plan.writes:
                raise
            answer = guard_refused(error)


def _sent_change(store: ReferenceStore, op: Delete | Restore) -> Ack:
    return store.delete(op) if isinstance(op, Delete) else store.restore(op)


class _ReadBatches:
    """Contract reads sent to PostgreSQL together: while :data:`BATCHES_SENDING` batches
    are on their way, reads wait, and the next batch takes every read waiting (up to
    :data:`MOST_PER_BATCH`) as one statement.

    A read alone goes at once; under load, one round trip and one statement's work in
    the server and in psycopg serve many reads (docs/performance.md, "HTTP service").
    Every read of a batch is answered from the statement's one snapshot, taken after
    the read was asked and before it is answered, so it sees every write acknowledged
    before it was asked, as a statement of its own would.

    A batch is sent by a task of its own, not by any one request: a request cancelled
    while it waits leaves the batch to the others (its answer is dropped). A failed
    batch fails each of its reads with the batch's error.
    """

    def __init__(self, remote: LoopConnections,
                 plan: Callable[[Sequence[tuple[str, str]]], Plan[list[list[Record]]]]) -> None:
        self._remote = remote
        self._plan = plan
        self._waiting: list[tuple[str, str, asyncio.Future[list[Record]]]] = []
        self._sending = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def read(self, namespace: str, entity_id: str) -> list[Record]:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # batches of a loop that has gone will not finish
            self._loop, self._waiting, self._sending = loop, [], 0
        answer: asyncio.Future[list[Record]] = loop.create_future()
        self._waiting.append((namespace, entity_id, answer))
        if self._sending < BATCHES_SENDING:
            self._send_next(loop)
        return await answer

    def _send_next(self, loop: asyncio.AbstractEventLoop) -> None:
        waiting = [read for read in self._waiting if not read[2].done()]
        batch, self._waiting = waiting[:MOST_PER_BATCH], waiting[MOST_PER_BATCH:]
        if not batch:
            return
        self._sending += 1
        task = loop.create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[tuple[str, str, asyncio.Future[list[Record]]]]) -> None:
        try:
            planned = self._plan([(namespace, entity_id) for namespace, entity_id, _ in batch])
            answers = planned.finish(await self._remote.all(planned.statement, planned.params))
        except asyncio.CancelledError:
            for _, _, answer in batch:
                answer.cancel()
            raise
        except Exception as error:
            for _, _, answer in batch:
                if not answer.done():
                    answer.set_exception(error)
        else:
            for (_, _, answer), records in zip(batch, answers, strict=True):
                if not answer.done():
                    answer.set_result(records)
        finally:
            if asyncio.get_running_loop() is self._loop:
                self._sending -= 1
                if self._waiting:
                    self._send_next(self._loop)
