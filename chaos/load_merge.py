"""One history out of many: merging the histories that Locust's workers record apart.

Each worker process of ``memcert load`` records its own ``worker-<index>.jsonl`` with
its own :class:`~invariants.history.HistoryRecorder`, so its indices are dense from 0
in that file alone. Merging orders every entry of every file by ``time_ns`` and numbers
them again from 0; a worker's entries keep their order (each file is already in time
order, and ties between files are broken by file, then by position), so every
completion still follows its own worker's invocation, and an operation is still named
by its invocation's new index. Worker ids need no renumbering: each worker draws its
users' ids from a range of its own.

Ordering by time is sound only on one timeline. ``time_ns`` is ``CLOCK_MONOTONIC``,
which every process of one booted machine shares exactly; a worker on another machine
(another ``boot_id``) is moved onto the master's timeline through both machines' wall
clocks (:func:`to_local`), which is only as good as their synchronisation: two
operations closer together than the clocks' skew may be merged in the wrong order. The
same merge runs live on the master (:class:`Merger`, feeding the online checkers and the
metrics) and after the run (:func:`merge_into`, which writes the history the verdict is
judged from, streaming: it holds a chunk of each file and the operations in flight, not
the histories; :func:`merge_files` is the same merge held in memory).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import os
import socket
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from invariants.backend import Ack
from invariants.history import (
    Entry,
    History,
    HistoryError,
    HistoryRecorder,
    HistoryStream,
    read_history,
)

__all__ = ["Clocks", "MergeResult", "Merger", "merge_files", "merge_into", "to_local",
           "write_entries"]

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Clocks:
    """Which timeline a process stamps its history on, and how it maps to wall time.

    ``boot_id`` names the booted kernel whose ``CLOCK_MONOTONIC`` the stamps come from;
    ``offset_ns`` is wall time minus monotonic time there, read once.
    """

    host: str
    boot_id: str
    offset_ns: int

    @classmethod
    def here(cls) -> Clocks:
        try:
            boot_id = _BOOT_ID.read_text(encoding="ascii").strip()
        except OSError:
            # No boot id: treat this process as a machine of its own, merged by wall clock.
            boot_id = f"{socket.gethostname()}/{os.getpid()}"
        return cls(socket.gethostname(), boot_id, time.time_ns() - time.monotonic_ns())

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "boot_id": self.boot_id, "offset_ns": self.offset_ns}


def to_local(time_ns: int, remote: Clocks, local: Clocks) -> int:
    """A stamp of ``remote``'s monotonic clock on ``local``'s, exact on one machine."""
    if remote.boot_id == local.boot_id:
        return time_ns
    return time_ns + remote.offset_ns - local.offset_ns


class Merger:
    """Merges entry streams, each in time order, into one history as they arrive.

    Each source reports, with every batch, a *mark*: a time before which it will send
    nothing more. :meth:`ready` hands out, in time order and numbered from where the
    last call stopped, the entries older than every open source's mark, so the merged
    order never has to be revised. :meth:`open` announces a source before its first
    batch, holding every other source back until it has spoken; a source that closes
    (``done``) stops holding anyone back.
    """

    def __init__(self) -> None:
        self._queues: dict[int, deque[Entry]] = {}
        self._marks: dict[int, int] = {}
        self._done: set[int] = set()
        self._next = 0
        self._order = 0

    def open(self, source: int) -> None:
        self._queues.setdefault(source, deque())
        self._marks.setdefault(source, -1)

    def add(self, source: int, entries: Iterable[Entry], mark_ns: int, *,
            done: bool = False) -> None:
        self.open(source)
        self._queues[source].extend(entries)
        self._marks[source] = max(self._marks[source], mark_ns)
        if done:
            self._done.add(source)

    @property
    def expected(self) -> frozenset[int]:
        """Every source announced or heard from."""
        return frozenset(self._queues)

    @property
    def merged(self) -> int:
        """Entries handed out so far."""
        return self._next

    def ready(self) -> list[Entry]:
        """Entries no source can precede any more, in time order, re-indexed."""
        open_marks = [mark for source, mark in self._marks.items() if source not in self._done]
        return self._take(min(open_marks) if open_marks else None)

    def drain(self) -> list[Entry]:
        """Everything left, as if every source had closed."""
        return self._take(None)

    def _take(self, mark: int | None) -> list[Entry]:
        batch: list[tuple[int, int, int, Entry]] = []
        for source, queue in self._queues.items():
            while queue and (mark is None or queue[0].time_ns < mark):
                entry = queue.popleft()
                batch.append((entry.time_ns, source, self._order, entry))
                self._order += 1
        batch.sort(key=lambda item: item[:3])
        out = []
        for _, _, _, entry in batch:
            out.append(dataclasses.replace(entry, index=self._next))
            self._next += 1
        return out


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge_into` wrote: how many entries, and the damage it found in the
    workers' files, each defect prefixed by its file (as ``History.defects``)."""

    entries: int
    defects: tuple[str, ...]


def merge_files(paths: Sequence[Path]) -> History:
    """The histories in ``paths`` as one, ordered by ``time_ns`` and re-indexed.

    A worker that was killed mid-operation leaves an invocation without completion, or a
    last line cut short: such a file is read with ``allow_incomplete``, the damage goes
    into the merged history's ``defects``, and its open operations count as possibly
    applied at any time, as the checkers treat every unknown outcome. The merged
    history is held in memory; :func:`merge_into` writes it to a file instead.
    """
    histories = [read_history(path, allow_incomplete=True) for path in paths]
    entries = [dataclasses.replace(entry, index=index)
               for index, entry in enumerate(_in_time_order(histories))]
    defects = [f"{path}: {defect}" for path, history in zip(paths, histories, strict=True)
               for defect in history.defects]
    return History(entries, allow_incomplete=True, defects=defects)


def merge_into(paths: Sequence[Path], out: Path) -> MergeResult:
    """Write the histories in ``paths`` to ``out`` as one, as :func:`merge_files` merges
    them, streaming: the lines are those ``merge_files(paths).write_jsonl(out)`` writes
    (``out`` ending in ``.zst`` is compressed), and what is held is a chunk of each file
    and the operations in flight, however long the run.

    The merge goes through a :class:`HistoryRecorder`, so the merged history is
    validated as it is written (one worker id in two files raises
    :class:`HistoryError`). It is written next to ``out`` and renamed only once whole,
    so a merge that raises leaves no ``out`` to be taken for the run's history.
    """
    streams = [HistoryStream(path, allow_incomplete=True) for path in paths]
    partial = out.with_name(f".merging-{out.name}")  # the same suffix: the same format
    now = 0
    try:
        with HistoryRecorder(partial, keep=False, clock=lambda: now,
                             flush_interval_s=_MERGE_FLUSH_S,
                             compress=out.name.endswith(".zst")) as recorder:
            flying: dict[int, Entry] = {}
            for entry in _in_time_order(streams):
                now = entry.time_ns
                if entry.type == "invoke":
                    flying[entry.worker] = recorder.invoke(entry.worker, entry.op,
                                                           meta=entry.meta)
                else:
                    _complete(recorder, flying.pop(entry.worker), entry)
            entries = len(recorder)
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    defects = tuple(f"{path}: {defect}" for path, stream in zip(paths, streams, strict=True)
                    for defect in stream.defects)
    return MergeResult(entries, defects)


_MERGE_FLUSH_S = 1.0
"""How often :func:`merge_into`'s recorder writes what it queued (or every 4,096
entries): nobody tails the merged file, so only the batching matters."""


def _in_time_order(sources: Sequence[Iterable[Entry]]) -> Iterator[Entry]:
    """Every entry of every source, by ``time_ns``; ties by source, then by position."""
    keyed = [_keyed(number, source) for number, source in enumerate(sources)]
    for _, _, _, entry in heapq.merge(*keyed):
        yield entry


def _keyed(number: int, source: Iterable[Entry]) -> Iterator[tuple[int, int, int, Entry]]:
    # A function, not a generator expression in the comprehension above: there every
    # source's expression would read ``number`` late, once it is the last one.
    for entry in source:
        yield entry.time_ns, number, entry.index, entry


def _complete(recorder: HistoryRecorder, invocation: Entry, entry: Entry) -> None:
    """Record ``entry``, a completion read from a worker's file, against its invocation
    as recorded in the merge."""
    result = entry.result
    if entry.type == "ok" and isinstance(result, Ack | tuple):
        recorder.ok(invocation, result)
    elif entry.type == "fail" and isinstance(result, Ack | str):
        recorder.fail(invocation, result)
    elif entry.type == "info" and isinstance(result, str):
        recorder.info(invocation, result)
    else:  # a worker's file is validated as it is read, so this is a bug of the merge
        raise HistoryError(f"entry {entry.index} of a worker's file has result {result!r}",
                           "Report this as a bug of memcert load's merge.")


def write_entries(path: Path, entries: Iterable[Entry]) -> None:
    """Append entries to a ``history.jsonl``-format file, as ``Entry.to_dict()`` lines."""
    with open(path, "a", encoding="utf-8") as out:
        for entry in entries:
            out.write(json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":"))
                      + "\n")
