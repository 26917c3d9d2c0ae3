"""The one error the scenarios raise: a scenario or suite that cannot be used as written."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from invariants.errors import InvalidInput

__all__ = ["MISSING", "ScenarioError", "did_you_mean", "shown"]

#: Stands for the value of a field that is absent from its file.
MISSING = object()


class ScenarioError(InvalidInput):
    """A scenario or suite file (or a name standing for one) is unusable; nothing ran.

    ``path`` is the offending file, or None when no file was found. ``field`` is the
    dotted name of the offending field (``faults[1].p``, ``params.entities``), so a
    caller can point at it without parsing the message.
    """

    def __init__(
        self, path: Path | None, field: str, value: object, problem: str, fix: str
    ) -> None:
        self.path = path
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        where = "" if path is None else f"{path}: "
        what = field if value is MISSING else f"{field}={shown(value)}"
        # InvalidInput's constructor words its message for one operation's field; a
        # file's errors also name the file, so the message is built here instead.
        ValueError.__init__(self, f"{where}{what}{' ' if what else ''}{problem}. {fix}")

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:
        return type(self), (self.path, self.field, self.value, self.problem, self.fix)


def shown(value: object, limit: int = 60) -> str:
    """A bad value as a message shows it: repr, shortened, and its type."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{text} (type {type(value).__name__})"


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"Did you mean 'x'? "`` for the closest candidate, or nothing if none is close."""
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f"Did you mean {close[0]!r}? " if close else ""
