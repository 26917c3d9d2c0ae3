"""The judgement of a saved history: one streaming pass over its file.

certify, ``memcert replay``, ``memcert chaos``, ``memcert nightly`` and ``memcert load``
all end the same way: the checkers read the history the run saved, and the report counts
its coverage, the backend's own errors and its operations. Each of those reads the file
as it is decoded, in one pass shared by all of them (``check_history``'s ``also``), so a
history of any length is judged without ever being held whole: what stays in memory is
what the checkers keep (docs/invariants.md, "What the checkers keep") and a chunk of the
file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from invariants.checkers import check_history
from invariants.history import Entry, HistoryStream, Paraphrase
from invariants.verdict import CheckResult, Violation

from .coverage import Coverage

__all__ = ["Judged", "judge_file"]


@dataclass(frozen=True)
class Judged:
    """Everything a report takes from a history, from one pass over it."""

    checks: dict[str, CheckResult]
    coverage: dict[str, int]
    errors: dict[str, tuple[int, str]]
    """Errors the backend itself raised: type -> (count, first text)."""
    entries: int
    invocations: int
    restore_unsupported: bool
    """Some restore failed as ``unsupported:``: the backend does not implement it."""


PROGRESS_EVERY = 1 << 14
"""Entries between two calls of a judgement's ``progress``."""


class _Every:
    """Calls ``progress`` with the entries seen so far, every :data:`PROGRESS_EVERY`."""

    __slots__ = ("_progress", "seen")

    def __init__(self, progress: Callable[[int], None]) -> None:
        self._progress = progress
        self.seen = 0

    def observe(self, entry: Entry) -> None:
        self.seen += 1
        if not self.seen % PROGRESS_EVERY:
            self._progress(self.seen)


def judge_file(path: Path, *, level: Paraphrase,
               nemesis: Sequence[Mapping[str, Any]] = (),
               allow_incomplete: bool = False,
               progress: Callable[[int], None] | None = None,
               defects: Sequence[str] = (),
               on_violation: Callable[[Violation], None] | None = None) -> Judged:
    """Check the history at ``path`` (plain or compressed) and count what its report
    needs, streaming it once; ``nemesis`` are the events of every scenario's nemesis, for
    the network and crash conditions of coverage. ``progress`` is told the entries read
    so far, every :data:`PROGRESS_EVERY`: judging a long run takes a while. ``defects``
    are what was lost on the way to this file (a worker's history cut short, before it
    was merged into this one): every result notes them, as it notes the file's own.
    ``on_violation`` is told every violation found, kept or not (report.html marks them
    all from this same pass)."""
    coverage = Coverage(nemesis)
    taps: list[Callable[[Entry], None]] = [coverage.observe]
    if progress is not None:
        taps.append(_Every(progress).observe)
    checks = check_history(HistoryStream(path, allow_incomplete=allow_incomplete), level=level,
                           also=taps, on_violation=on_violation)
    if defects:
        checks = {name: replace(check, notes=(*check.notes, *defects))
                  for name, check in checks.items()}
    return Judged(checks=checks, coverage=coverage.counts(), errors=coverage.errors(),
                  entries=coverage.entries, invocations=coverage.invocations,
                  restore_unsupported=coverage.restore_unsupported)
