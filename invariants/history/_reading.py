"""Reading a history file back: whole (:func:`read_history`) or as a stream of entries
(:class:`HistoryStream`), from ``history.jsonl`` or ``history.jsonl.zst`` alike.

The file is decoded :data:`READ_CHUNK_BYTES` at a time, one msgspec call per chunk of
whole lines; only a chunk that fails is decoded again line by line, to name the line.
A compressed file is told by its first bytes, not its name, and decompressed as it is
read, frame by frame, so that a frame cut short by a crash is noticed.
"""

from __future__ import annotations

import gc
import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import msgspec
import zstandard

from invariants.history._codec import (
    COMPRESSED_SUFFIX,
    ZSTD_MAGIC,
    decode_line,
    decode_lines,
)
from invariants.history._model import Entry, HistoryError
from invariants.history._validation import History, Validator

__all__ = [
    "HISTORY_NAME",
    "READ_CHUNK_BYTES",
    "HistoryStream",
    "collector_paused",
    "find_history",
    "read_history",
]

HISTORY_NAME = "history.jsonl"
"""The name of a run's history in its folder; compressed, with ``.zst`` after it."""
READ_CHUNK_BYTES = 1 << 20
"""Bytes of the file decoded at a time: the memory a stream holds beyond its state."""


def read_history(path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> History:
    """Load and validate a ``history.jsonl`` (or ``history.jsonl.zst``) written by
    :class:`HistoryRecorder` or :meth:`History.write_jsonl`.

    A last line cut short (the run crashed while writing it) raises
    :class:`HistoryError` naming that line, rather than being dropped in silence, and so
    does a compressed file whose last frame is cut short; with ``allow_incomplete=True``
    what was cut is dropped and recorded in ``History.defects``, and operations left
    without a completion are kept as such. Python's cyclic garbage collector is paused
    while the file is decoded. To check a history without holding it all, iterate a
    :class:`HistoryStream` instead.
    """
    name = os.fspath(path)
    defects: list[str] = []
    with collector_paused(kept=True):
        entries = tuple(itertools.chain.from_iterable(_chunks(name, defects, allow_incomplete)))
        return History(entries, allow_incomplete=allow_incomplete, defects=defects, path=name)


class HistoryStream:
    """The entries of a history file, decoded and validated as they are read.

    Each iteration reads the file again from its start and holds only a chunk of it and
    the operations in flight, whatever the history's length. It raises
    :class:`HistoryError` as :func:`read_history` does, before it yields the chunk
    (:data:`READ_CHUNK_BYTES` of the file) where the file goes wrong; about an operation
    never completed, at the end. ``defects`` is set at the end of each iteration, as
    ``History.defects``.
    """

    def __init__(self, path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> None:
        self.path = Path(path)
        self.allow_incomplete = allow_incomplete
        self.defects: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"HistoryStream({os.fspath(self.path)!r})"

    def __iter__(self) -> Iterator[Entry]:
        name = os.fspath(self.path)
        defects: list[str] = []
        validator = Validator(path=name, allow_incomplete=self.allow_incomplete, pairs=False)
        add = validator.add
        for entries in _chunks(name, defects, self.allow_incomplete):
            for entry in entries:
                add(entry)
            yield from entries
        validator.finish()
        self.defects = tuple(defects)


def find_history(folder: str | os.PathLike[str]) -> Path | None:
    """The history of the run saved in ``folder``: ``history.jsonl.zst`` or
    ``history.jsonl``, the newer if both are there; None if neither is."""
    base = Path(folder)
    found = [p for p in (base / (HISTORY_NAME + COMPRESSED_SUFFIX), base / HISTORY_NAME)
             if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None


@contextmanager
def collector_paused(*, kept: bool = False) -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building long-lived data.

    Reading or checking a history allocates millions of objects that all stay alive
    until it ends, so collection passes find nothing to free and only re-scan them,
    again and again, which slows reading and checking severely. Reference counting
    still frees what it can. The checkers pause it too, around a check.

    ``kept`` says that what was built outlives the call (a :class:`History`). It then
    joins the oldest generation directly (``gc.freeze()`` then ``gc.unfreeze()`` moves
    every tracked object there at no cost) instead of being scanned as young objects
    when the collector resumes. Not for a check: its index is garbage once the verdict
    is out, and garbage moved there uncounted would wait for a full collection. Skipped
    if the program froze objects itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if kept and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _chunks(name: str, defects: list[str], allow_incomplete: bool) -> Iterator[list[Entry]]:
    """Every entry of the file, in order, a chunk at a time, each checked alone (not yet
    against the others); what was cut off its end goes to ``defects`` if allowed."""
    with open(name, "rb") as src:
        head = src.read(len(ZSTD_MAGIC))
        blocks = _Frames(src, head, name) if head == ZSTD_MAGIC else _plain(src, head)
        number = 1  # the line number of the first line of the next chunk
        open_ops: dict[int, Entry] = {}
        rest = b""
        pending: list[bytes] = []  # blocks within one line longer than a block
        for block in blocks:
            cut = block.rfind(b"\n") + 1
            if not cut:
                pending.append(block)
                continue
            data = b"".join([rest, *pending, block]) if rest or pending else block
            pending.clear()
            cut += len(data) - len(block)
            rest = data[cut:]
            yield _chunk(data[:cut] if rest else data, number, name, open_ops)
            number += data.count(b"\n", 0, cut)
        rest = b"".join([rest, *pending])
        if rest:
            try:
                entry = decode_line(rest)
            except HistoryError as exc:
                if isinstance(exc.__cause__, msgspec.ValidationError):
                    raise HistoryError(exc.problem, exc.fix, path=name, line=number) from exc
                text = rest.decode("utf-8", "replace")
                shown = text if len(text) <= 40 else text[:37] + "..."
                _cut_short(f"the last line is cut short ({shown!r})",
                           "Delete that line to check the rest, or pass allow_incomplete=True.",
                           name, number, defects, allow_incomplete, exc)
            else:
                yield [entry]
        elif isinstance(blocks, _Frames) and blocks.cut_short:
            _cut_short("the last zstd frame is cut short",
                       "Pass allow_incomplete=True to check the lines before it.",
                       name, number, defects, allow_incomplete, None)


def _cut_short(what: str, fix: str, name: str, number: int, defects: list[str],
               allow_incomplete: bool, cause: BaseException | None) -> None:
    problem = f"{what}; the run that wrote it probably crashed mid-write"
    if not allow_incomplete:
        raise HistoryError(problem, fix, path=name, line=number) from cause
    defects.append(f"line {number}: {problem}")


def _chunk(data: bytes, number: int, name: str, open_ops: dict[int, Entry]) -> list[Entry]:
    """The entries of whole lines, the first of them line ``number``."""
    try:
        entries = decode_lines(data, open_ops)
    except msgspec.DecodeError:
        pass
    else:
        if len(entries) == data.count(b"\n"):
            return entries
    # Something is wrong (blank lines are skipped above, hence the count): say where.
    entries = []
    for offset, line in enumerate(data.split(b"\n")[:-1]):
        try:
            entries.append(decode_line(line))
        except HistoryError as exc:
            raise HistoryError(exc.problem, exc.fix, path=name, line=number + offset) from exc
    return entries


def _plain(src: BinaryIO, head: bytes) -> Iterator[bytes]:
    if head:
        yield head
    while block := src.read(READ_CHUNK_BYTES):
        yield block


class _Frames:
    """The decompressed bytes of a zstd file, frame after frame; ``cut_short`` once the
    input ended inside a frame."""

    def __init__(self, src: BinaryIO, head: bytes, name: str) -> None:
        self._src = src
        self._head = head
        self._name = name
        self.cut_short = False

    def __iter__(self) -> Iterator[bytes]:
        context = zstandard.ZstdDecompressor()
        frame = context.decompressobj()
        inside = False  # input fed to ``frame`` that has not completed it yet
        # Compressed input expands several times over: read less of it at a time.
        size = max(1, READ_CHUNK_BYTES // 8)
        data = self._head
        while data:
            while data:
                try:
                    out = frame.decompress(data)
                except zstandard.ZstdError as exc:
                    raise HistoryError(
                        f"the file starts as zstd but does not decompress ({exc})",
                        "Compress histories as HistoryRecorder(compress=True) does, or "
                        "keep them plain.",
                        path=self._name,
                    ) from exc
                if out:
                    yield out
                if frame.eof:
                    data = frame.unused_data
                    frame = context.decompressobj()
                    inside = False
                else:
                    data = b""
                    inside = True
            data = self._src.read(size)
        self.cut_short = inside

