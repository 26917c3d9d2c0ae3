"""Recording a history while a run goes: :class:`HistoryRecorder`, and the thread that
writes its lines in groups."""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import IO, cast

from invariants.backend import Ack, Record
from invariants.errors import InvalidArgument
from invariants.history._codec import (
    COMPRESSED_SUFFIX,
    compressor,
    encode_entry,
    encode_lines,
    is_compressed_name,
)
from invariants.history._model import (
    F_OF_TYPE,
    Entry,
    EntryType,
    HistoryError,
    Payload,
    Result,
    WriteMeta,
    describe_error,
)
from invariants.history._validation import History, Validator

__all__ = ["HistoryRecorder"]

_MAX_FLUSH_INTERVAL_S = 60.0
_WRITER_BATCH = 4096
"""Entries after which a :class:`_Writer` writes without waiting for its interval."""


class HistoryRecorder:
    """Builds a history while a run goes, thread-safely, streaming it to ``history.jsonl``.

    Workers call :meth:`invoke` before an operation and one of :meth:`ok`,
    :meth:`fail` or :meth:`info` after it. Under one lock the recorder assigns the
    index and the time, validates the entry against the history so far, writes or
    queues its line, keeps it in memory if ``keep`` is set, and passes it to each of
    ``observers`` in index order. Observers run under the lock: they must be quick and
    must not call back into the recorder. Beyond the entries it keeps, it holds only the
    operations in flight, however long the run.

    ``flush_interval_s`` bounds how long an entry may wait before its line reaches the
    file. At 0 (the default) every line is written and flushed before the call returns,
    so that a crash loses at most the line being written. Above 0, a thread of the
    recorder takes the queued entries, encodes their lines, writes and flushes them at
    least that often (sooner after 4,096 entries): a reader tailing the file sees each
    line within about ``flush_interval_s``, and a crash of the whole process can lose
    the lines of that last interval, but never a line before one that reached the file.
    Encoding and writing a line per entry was most of what recording cost a worker.

    ``compress`` (which needs ``flush_interval_s``, and a path ending in ``.zst``) writes
    ``history.jsonl.zst``: each group of lines becomes one zstd frame, written and
    flushed as a plain group is, so the same bound holds. A frame per line would not
    compress.

    ``deferred_observers`` (which need ``flush_interval_s``) see every entry in index
    order too, but on that thread, once its line is written: at most about
    ``flush_interval_s`` behind the run, and a batch at a time, which costs much less
    than an entry at a time between a backend's calls. Online checkers fit; anything
    that must see an entry before the next call returns does not.

    :meth:`close` (and the ``with`` block's exit, on an exception too) writes and shows
    the deferred observers every entry still queued, and then raises whatever a
    deferred observer raised; a broken observer never stops the lines being written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        keep: bool = True,
        clock: Callable[[], int] = time.monotonic_ns,
        observers: Sequence[Callable[[Entry], None]] = (),
        flush_interval_s: float = 0.0,
        deferred_observers: Sequence[Callable[[Entry], None]] = (),
        compress: bool = False,
    ) -> None:
        if (
            not isinstance(flush_interval_s, int | float)
            or isinstance(flush_interval_s, bool)
            or not 0 <= flush_interval_s <= _MAX_FLUSH_INTERVAL_S
        ):
            raise InvalidArgument(
                f"flush_interval_s={flush_interval_s!r} (type {type(flush_interval_s).__name__})"
                f" is not a number of seconds from 0 to {_MAX_FLUSH_INTERVAL_S:g}; pass 0 to "
                "flush every line"
            )
        deferred = tuple(deferred_observers)
        if deferred and not flush_interval_s:
            raise InvalidArgument(
                "deferred_observers need flush_interval_s > 0, which bounds how far behind the "
                "run they are; pass both, or pass them as observers"
            )
        _check_compress(compress, path, flush_interval_s)
        self._lock = threading.Lock()
        self._clock = clock
        self._keep = keep
        self._entries: list[Entry] = []
        self._validator = Validator(pairs=False)
        self._observers = tuple(observers)
        self._out: IO[bytes] | None = None
        self._writer: _Writer | None = None
        self._queue: list[Entry] | None = None
        self.path = None if path is None else Path(path)
        out = None
        if self.path is not None:
            out = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        if flush_interval_s and (out is not None or deferred):
            self._writer = _Writer(out, deferred, self._lock, flush_interval_s, compress)
            self._queue = self._writer.queue
            self._finalizer = weakref.finalize(self, self._writer.close)
        else:
            self._out = out

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write out every line still queued and close the file; entries kept in memory
        stay available."""
        with self._lock:
            out, self._out = self._out, None
            writer, self._writer, self._queue = self._writer, None, None
        if out is not None:
            out.close()
        if writer is not None:
            self._finalizer.detach()
            writer.close()

    @property
    def outstanding(self) -> int:
        """How many operations are invoked and not yet completed."""
        return len(self._validator.outstanding)

    def outstanding_since(self, index: int) -> int:
        """How many operations invoked at entry ``index`` or later are not yet completed:
        after a service was frozen when the history was ``index`` entries long, those
        are the operations it cannot have answered."""
        with self._lock:
            return sum(1 for entry in self._validator.outstanding.values()
                       if entry.index >= index)

    def settle(self, timeout_s: float = 30.0) -> None:
        """Return once every entry recorded so far is written and has been shown to the
        deferred observers, or ``timeout_s`` has passed: what a caller does before it
        reads counts those observers keep, at a boundary such as the end of a scenario.
        Without a writer thread there is nothing to wait for."""
        with self._lock:
            writer, queued = self._writer, self._validator.count
        if writer is not None:
            writer.settle(queued, timeout_s)

    def outstanding_of(self, workers: Collection[int]) -> list[Entry]:
        """The invocations of ``workers`` not yet completed, oldest first: what a worker
        process killed with SIGKILL had in flight, whose outcomes are now unknown."""
        with self._lock:
            return sorted((entry for entry in self._validator.outstanding.values()
                           if entry.worker in workers), key=lambda entry: entry.index)

    def __len__(self) -> int:
        return self._validator.count

    def invoke(self, worker: int, op: Payload, *, meta: WriteMeta | None = None) -> Entry:
        """Record that ``worker`` starts ``op``; returns the invocation to complete later."""
        f = F_OF_TYPE.get(type(op))
        if f is None:
            raise HistoryError(
                f"op is a {type(op).__name__}",
                "Pass a Write, Delete, Restore or Read.",
            )
        with self._lock:
            validator = self._validator
            entry = Entry(validator.count, worker, self._clock(), "invoke", f, op, None, meta)
            validator.add_invocation(entry)
            self._publish(entry)
            return entry

    def ok(self, invocation: Entry, result: Ack | Sequence[Record]) -> Entry:
        """Record that the operation took effect: its Ack, or a read's records."""
        if not isinstance(result, Ack):
            result = tuple(result)
        return self._complete(invocation, "ok", result)

    def fail(self, invocation: Entry, result: Ack | str) -> Entry:
        """Record that the operation definitely did not take effect."""
        return self._complete(invocation, "fail", result)

    def info(self, invocation: Entry, error: BaseException | str) -> Entry:
        """Record that the outcome is unknown: the operation raised or timed out."""
        return self._complete(invocation, "info",
                              error if isinstance(error, str) else describe_error(error))

    def history(self) -> History:
        """The entries so far as a :class:`History` (operations in flight included)."""
        if not self._keep:
            raise HistoryError(
                "this recorder was made with keep=False and holds no entries",
                "Read the file back with read_history(), or record with keep=True.",
            )
        with self._lock:
            entries = list(self._entries)
        return History(entries, allow_incomplete=True)

    def _complete(self, invocation: Entry, etype: EntryType, result: Result) -> Entry:
        if invocation.type != "invoke":
            raise HistoryError(
                f"entry {invocation.index} is a completion, not an invocation",
                "Complete the entry that invoke() returned.",
            )
        with self._lock:
            validator = self._validator
            entry = Entry(
                validator.count,
                invocation.worker,
                self._clock(),
                etype,
                invocation.f,
                invocation.op,
                result,
                invocation.meta,
            )
            validator.add_completion(entry, invocation)
            self._publish(entry)
            return entry

    def _publish(self, entry: Entry) -> None:
        """Queue or write the entry's line, keep it, and show it to the observers; the
        lock is held."""
        queue = self._queue
        if queue is not None:
            queue.append(entry)
            if len(queue) == _WRITER_BATCH:
                cast(_Writer, self._writer).wake()
        elif self._out is not None:
            self._out.write(encode_entry(entry))
            self._out.flush()
        if self._keep:
            self._entries.append(entry)
        for observe in self._observers:
            observe(entry)


def _check_compress(compress: bool, path: str | os.PathLike[str] | None,
                    flush_interval_s: float) -> None:
    """Refuse a file whose name would say the wrong thing about its contents, and a
    compressed file flushed line by line, which would not compress."""
    name = None if path is None else os.fspath(path)
    if not compress:
        if name is not None and is_compressed_name(name):
            raise InvalidArgument(
                f"path={name!r} ends in {COMPRESSED_SUFFIX} but compress=False; pass "
                "compress=True to write it compressed, or a path without the suffix"
            )
        return
    if name is None or not is_compressed_name(name):
        raise InvalidArgument(
            f"compress=True needs a path ending in {COMPRESSED_SUFFIX} (got {name!r}), "
            "such as history.jsonl.zst"
        )
    if not flush_interval_s:
        raise InvalidArgument(
            "compress=True needs flush_interval_s > 0: each flush ends a zstd frame, and a "
            "frame per line would not compress; pass flush_interval_s=0.1, say"
        )


class _Writer:
    """The thread of a :class:`HistoryRecorder` with ``flush_interval_s``, which encodes
    the entries' lines, writes them out together, and then shows them to the deferred
    observers.

    The recorder appends to :attr:`queue` under its lock, so entries queue in index
    order; the thread takes everything queued under that lock, and encodes and writes
    it outside. It is the only writer until :meth:`close` has stopped it, so lines reach
    the file whole and in order; with ``compress``, each group as one zstd frame. It
    holds no reference to the recorder, so a recorder never closed can still be
    collected; a finalizer then closes this.
    """

    def __init__(
        self,
        out: IO[bytes] | None,
        observers: tuple[Callable[[Entry], None], ...],
        lock: threading.Lock,
        interval_s: float,
        compress: bool,
    ) -> None:
        self._out = out
        self._observers = observers
        self._lock = lock
        self._interval_s = interval_s
        self._compress = compressor().compress if compress else None
        self.queue: list[Entry] = []
        """Entries waiting, in index order; appended to under the recorder's lock."""
        self._wake = threading.Event()
        self._shown = 0
        """Entries written and shown to the observers so far."""
        self._settled = threading.Condition()
        self._stopping = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="memcert-history-writer", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Write what is queued now rather than at the end of the interval."""
        self._wake.set()

    def settle(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` entries have been written and observed (or the thread has
        stopped, or ``timeout_s`` is over)."""
        self._wake.set()
        with self._settled:
            self._settled.wait_for(
                lambda: self._shown >= count or not self._thread.is_alive(), timeout_s)

    def close(self) -> None:
        """Stop the thread, write and observe whatever is still queued, close the file,
        then raise what the thread could not do (writing, or an observer), if anything."""
        self._stopping = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self._drain()
        finally:
            if self._out is not None:
                self._out.close()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._wake.wait(self._interval_s)
                self._wake.clear()
                self._drain()
        except BaseException as error:  # writing failed (a full disk, say): close() raises
            self._error = error

    def _drain(self) -> None:
        with self._lock:
            entries = self.queue[:]
            self.queue.clear()
        if not entries:
            return
        out = self._out
        if out is not None:
            data = encode_lines(entries)
            out.write(data if self._compress is None else self._compress(data))
            out.flush()
        try:
            # Each observer takes the whole batch in turn: its code stays hot throughout.
            for observe in self._observers:
                for entry in entries:
                    observe(entry)
        except BaseException as error:  # the lines go on being written; close() raises it
            self._observers = ()
            if self._error is None:
                self._error = error
        finally:
            with self._settled:
                self._shown += len(entries)
                self._settled.notify_all()
