"""The numbers a fault parameter or a toxic attribute accepts, declared as data.

Declared here, below :mod:`chaos`, so that a scenario file is checked against the same
ranges as the fault or toxic that will act on it, without importing the behaviour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from invariants.errors import InvalidArgument

__all__ = ["NumberRange"]


@dataclass(frozen=True, slots=True)
class NumberRange:
    """The numbers one parameter accepts: ``low`` to ``high`` inclusive, whole numbers
    only if ``integer``. ``meaning`` completes "Give ..." in every error about it, so a
    scenario file and a direct call are told the same thing."""

    low: float
    high: float
    meaning: str
    integer: bool = False

    def refusal(self, value: object) -> tuple[str, str] | None:
        """``(problem, fix)`` if ``value`` is refused, else None.

        Returned rather than raised so a caller that knows more (a file and a field)
        can word the error around it.
        """
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number", f"Give {self.meaning}."
        finite = isinstance(value, int) or math.isfinite(value)
        whole = isinstance(value, int) or value.is_integer()
        if not (finite and self.low <= value <= self.high and (whole or not self.integer)):
            return "is out of range", f"Give {self.meaning}."
        return None

    def check(self, owner: str, name: str, value: object) -> float:
        """``value`` as the fault uses it (an int if ``integer``), or InvalidArgument."""
        refused = self.refusal(value)
        if refused is not None:
            problem, fix = refused
            raise InvalidArgument(
                f"{owner}: {name}={value!r} (type {type(value).__name__}) {problem}. {fix}"
            )
        assert isinstance(value, int | float)
        return int(value) if self.integer else float(value)
