"""Whether a sequence of entries is a well-formed history, and the validated
:class:`History` that results.

One :class:`Validator` checks entries one at a time, for :class:`History` (whole
sequences, possibly read from a file, so that errors name lines), for a stream read
from a file, and for :class:`HistoryRecorder` (entries as they are made).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

from invariants.backend import Ack, Record
from invariants.history._codec import compressor, encode_lines, is_compressed_name
from invariants.history._model import F_OF_TYPE, Entry, HistoryError

__all__ = ["History", "Validator", "check_result"]


class Validator:
    """Checks, one entry at a time, that a sequence of entries is a well-formed history.

    With ``pairs``, it keeps each entry's partner (the completion of an invocation, the
    invocation of a completion), which :class:`History` needs; without, only the
    operations still in flight, so that a stream or a long run checks in bounded memory.
    """

    __slots__ = ("allow_incomplete", "count", "last_time", "outstanding", "partner", "path")

    def __init__(
        self, *, path: str | None = None, allow_incomplete: bool = False, pairs: bool = True
    ) -> None:
        self.path = path
        self.allow_incomplete = allow_incomplete
        self.outstanding: dict[int, Entry] = {}
        self.partner: list[int] | None = [] if pairs else None
        self.count = 0
        """How many entries were added: the index the next one must have."""
        self.last_time = -(2**63)

    def _error(self, entry: Entry, problem: str, fix: str, *, added: bool = False) -> HistoryError:
        """The error about ``entry``: the next to add, or one ``added`` already (whose
        index was then its position). A file holds one entry per line, so the position
        decides the line, whatever index the line claims."""
        if self.path is not None:
            position = entry.index if added else self.count
            return HistoryError(problem, fix, path=self.path, line=position + 1)
        return HistoryError(f"entry {entry.index}: {problem}", fix)

    def add(self, entry: Entry) -> None:
        expected = self.count
        if entry.index != expected:
            raise self._error(
                entry,
                f"index is {entry.index}, expected {expected}",
                "Indices are dense from 0 in history order; do not drop or reorder lines.",
            )
        if entry.time_ns < self.last_time:
            raise self._error(
                entry,
                f"time_ns {entry.time_ns} is earlier than the previous entry's {self.last_time}",
                "Take time_ns from one monotonic clock while assigning the index.",
            )
        op_f = F_OF_TYPE.get(type(entry.op))
        if op_f != entry.f:
            raise self._error(
                entry,
                f"f is {entry.f!r} but op is a {type(entry.op).__name__}",
                "Make f name the payload's kind (write, delete, restore or read).",
            )
        if entry.f == "write" and entry.meta is None:
            raise self._error(
                entry,
                "a write has no meta",
                "Record the generator's fact, slot and paraphrase level with every write.",
            )
        if entry.f != "write" and entry.meta is not None:
            raise self._error(
                entry, f"a {entry.f} carries meta", "Only writes carry meta; drop it."
            )
        if entry.type == "invoke":
            self._add_invocation(entry)
        else:
            self._add_completion(entry)
        self.last_time = entry.time_ns

    def add_invocation(self, entry: Entry) -> None:
        """:meth:`add` for an invocation :class:`HistoryRecorder` built itself: its index
        is the next one, its ``f`` names its op and it has no result, by construction."""
        if entry.time_ns < self.last_time or (entry.f == "write") == (entry.meta is None):
            self.add(entry)  # the general path names the problem
            return
        self._add_invocation(entry)
        self.last_time = entry.time_ns

    def add_completion(self, entry: Entry, invocation: Entry) -> None:
        """:meth:`add` for a completion :class:`HistoryRecorder` built from
        ``invocation``, repeating its f, op and meta; anything but the completion of
        the worker's outstanding invocation takes the general path."""
        if entry.time_ns < self.last_time or self.outstanding.get(entry.worker) is not invocation:
            self.add(entry)
            return
        self._pair(invocation, entry)
        self.last_time = entry.time_ns

    def _pair(self, invocation: Entry, entry: Entry) -> None:
        """Close the worker's operation with ``entry``, if its result fits: a refused
        entry changes nothing."""
        check_result(entry, self._error)
        del self.outstanding[entry.worker]
        partner = self.partner
        if partner is not None:
            partner[invocation.index] = entry.index
            partner.append(invocation.index)
        self.count += 1

    def _add_invocation(self, entry: Entry) -> None:
        if entry.result is not None:
            raise self._error(
                entry, "an invocation has a result", "Only completions carry results."
            )
        busy = self.outstanding.get(entry.worker)
        if busy is not None:
            raise self._error(
                entry,
                f"worker {entry.worker} invokes while its op {busy.index} is outstanding",
                "A worker runs one operation at a time; complete it (info if unsure) first.",
            )
        self.outstanding[entry.worker] = entry
        if self.partner is not None:
            self.partner.append(-1)
        self.count += 1

    def _add_completion(self, entry: Entry) -> None:
        inv = self.outstanding.get(entry.worker)
        if inv is None:
            raise self._error(
                entry,
                f"worker {entry.worker} completes an operation it never invoked",
                "Each completion must follow its own worker's invocation.",
            )
        # The recorder passes the invocation's own objects, so identity settles it there.
        if (
            inv.f != entry.f
            or (inv.op is not entry.op and inv.op != entry.op)
            or (inv.meta is not entry.meta and inv.meta != entry.meta)
        ):
            raise self._error(
                entry,
                f"the completion does not repeat op {inv.index}'s f, op and meta",
                "Copy the invocation's f, op and meta into its completion.",
            )
        self._pair(inv, entry)

    def finish(self) -> None:
        if not self.outstanding or self.allow_incomplete:
            return
        first = min(self.outstanding.values(), key=lambda e: e.index)
        others = len(self.outstanding) - 1
        raise self._error(
            first,
            f"op {first.index} (worker {first.worker}) was invoked but never completed"
            + (f", nor were {others} other operation(s)" if others else ""),
            "A run must complete every operation, as info when the outcome is unknown; "
            "pass allow_incomplete=True to check a crashed run's history anyway.",
            added=True,
        )


def check_result(entry: Entry, error: Callable[[Entry, str, str], HistoryError]) -> None:
    """Raise ``error(...)`` unless the completion's result has the shape its type and
    ``f`` call for."""
    res = entry.result
    etype = entry.type
    if etype == "info" or (etype == "fail" and isinstance(res, str)):
        if isinstance(res, str):
            return
        fix = "Record the error text (type and message) as the result."
    elif entry.f == "read":
        if (
            etype == "ok"
            and isinstance(res, tuple)
            and all(map(isinstance, res, itertools.repeat(Record)))
        ):
            return
        fix = (
            "An ok read carries the tuple of Records it returned, in serving order; "
            "a read that failed carries the error text."
        )
    else:
        if isinstance(res, Ack) and res.applied == (etype == "ok"):
            return
        want = "Ack(applied=True)" if etype == "ok" else "Ack(applied=False) or error text"
        what = _what(entry)
        fix = f"{what[0].upper()}{what[1:]} must carry {want}; an exception is an info."
    raise error(entry, f"{_what(entry)} has result {res!r}", fix)


def _what(entry: Entry) -> str:
    """'an ok write', 'a fail read'..., as messages name an entry."""
    return f"{'a' if entry.type == 'fail' else 'an'} {entry.type} {entry.f}"


_WRITE_BATCH = 65536
"""Entries encoded at a time by :meth:`History.write_jsonl`, and so per zstd frame."""


class History(Sequence[Entry]):
    """A validated, immutable history: entries in index order, with their pairing.

    Validation guarantees that indices are dense from 0, that ``time_ns`` never goes
    back, that every completion follows its own worker's invocation and repeats its
    ``op``, that a worker has one operation outstanding at a time, and that results
    have the shape their entry type calls for. Unless ``allow_incomplete`` is set, every
    invocation has its completion; with it, unmatched invocations (a crashed run) are
    kept and checkers treat them as possibly applied at any time, like ``info``.

    ``defects`` lists what had to be dropped to read a damaged file (a cut-off last
    line); it is empty for a whole history. ``path`` names the file the entries were
    read from, so that errors name its lines.
    """

    __slots__ = ("_entries", "_partner", "defects")

    def __init__(
        self,
        entries: Iterable[Entry],
        *,
        allow_incomplete: bool = False,
        defects: Sequence[str] = (),
        path: str | None = None,
    ) -> None:
        self._entries = tuple(entries)
        validator = Validator(path=path, allow_incomplete=allow_incomplete)
        add = validator.add
        for entry in self._entries:
            add(entry)
        validator.finish()
        self._partner: list[int] = validator.partner or []
        self.defects: tuple[str, ...] = tuple(defects)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Entry, ...]: ...

    def __getitem__(self, index: int | slice) -> Entry | tuple[Entry, ...]:
        return self._entries[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, History):
            return NotImplemented
        return self._entries == other._entries

    def __hash__(self) -> int:
        return hash(self._entries)

    def __repr__(self) -> str:
        return f"<History of {len(self._entries)} entries>"

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self._entries

    def partner(self, entry: Entry | int) -> Entry | None:
        """The completion of an invocation, or the invocation of a completion.

        ``None`` only for an invocation that never completed (``allow_incomplete``).
        """
        index = entry if isinstance(entry, int) else entry.index
        other = self._partner[index]
        return None if other < 0 else self._entries[other]

    def pairs(self) -> Iterator[tuple[Entry, Entry | None]]:
        """Each operation as ``(invocation, completion)``, in invocation order."""
        entries = self._entries
        for entry, other in zip(entries, self._partner, strict=True):
            if entry.type == "invoke":
                yield entry, (None if other < 0 else entries[other])

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Save the history in the format :func:`read_history` reads: zstd-compressed
        if ``path`` ends in ``.zst`` (``history.jsonl.zst``), plain JSON lines else."""
        compress = compressor().compress if is_compressed_name(os.fspath(path)) else None
        entries = self._entries
        with open(path, "wb") as out:
            for start in range(0, len(entries), _WRITE_BATCH):
                data = encode_lines(list(entries[start:start + _WRITE_BATCH]))
                out.write(data if compress is None else compress(data))
