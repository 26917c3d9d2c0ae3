"""What every checker shares: feeding, counting violations, and building the result."""

from __future__ import annotations

import abc
from typing import ClassVar

from invariants.errors import InvalidArgument
from invariants.history import Entry, HistoryError
from invariants.verdict import CheckResult, Validity, Violation, ViolationGroup, ViolationKind

from ._trace import ReadView, Trace

__all__ = ["Checker"]


class Checker(abc.ABC):
    """An incremental checker: the one definition of one invariant.

    Feed it every entry of a history, in index order, through :meth:`observe`; ask for
    :meth:`result` at any time. During a run the live metrics read
    :attr:`violation_count`; after it, the saved history is fed to a fresh checker of
    the same class. Either way the same code decides.

    A checker judges each ``ok`` read when it completes (see ``_trace``) and never
    revises a judgement, so its count only grows. ``observe`` refuses an entry given
    twice or out of order; ``result`` does not change the checker's state.

    ``trace`` lets several checkers share one index of the history (they must then be
    fed in lockstep); ``keep`` bounds how many violations are kept in full per kind,
    while every one is counted.
    """

    name: ClassVar[str]
    kind: ClassVar[ViolationKind]
    numerator_name: ClassVar[str]
    denominator_name: ClassVar[str]

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
            raise InvalidArgument(
                f"keep={keep!r} (type {type(keep).__name__}) is not a count; pass an int >= 0"
            )
        self._trace = trace if trace is not None else Trace()
        self._keep = keep
        self._count = 0
        self._kept: list[Violation] = []
        self._first: Violation | None = None
        self._worst: Violation | None = None
        self._last: Violation | None = None
        self._seen = -1
        self.checked = 0
        """Opportunities for a violation seen so far, in the checker's own unit."""

    def observe(self, entry: Entry) -> None:
        """Consume the next entry of the history."""
        view = self._trace.observe(entry)
        if entry.index <= self._seen:
            raise HistoryError(
                f"entry {entry.index} fed to the {self.name} checker twice",
                "Feed each entry to each checker once, in index order.",
            )
        self._seen = entry.index
        if view is not None:
            self._on_read(view)

    @property
    def violation_count(self) -> int:
        """Violations found so far; O(1), for online metrics."""
        return self._count

    def result(self) -> CheckResult:
        """The verdict on everything observed so far."""
        if self._count:
            validity = Validity.INVALID
        elif self.checked:
            validity = Validity.VALID
        else:
            validity = Validity.UNKNOWN
        numerator, denominator = self._rate_terms()
        groups: tuple[ViolationGroup, ...] = ()
        if self._first is not None and self._last is not None:
            groups = (
                ViolationGroup(
                    kind=self.kind,
                    count=self._count,
                    first=self._first,
                    worst=self._worst,
                    last=self._last,
                ),
            )
        notes = list(self._notes())
        if not self.checked and not self._count:
            notes.append(f"nothing to check: {self._nothing_checked()}")
        if self._trace.in_flight:
            notes.append(
                f"{self._trace.in_flight} operation(s) had not completed; they count as "
                "possibly applied at any time"
            )
        return CheckResult(
            checker=self.name,
            validity=validity,
            violation_count=self._count,
            violations=tuple(self._kept),
            groups=groups,
            checked=self.checked,
            rate=numerator / denominator if denominator else 0.0,
            rate_numerator=numerator,
            rate_numerator_name=self.numerator_name,
            rate_denominator=denominator,
            rate_denominator_name=self.denominator_name,
            coverage=self._coverage(),
            notes=tuple(notes),
        )

    def _add(self, violation: Violation) -> None:
        self._count += 1
        if self._first is None:
            self._first = violation
        self._last = violation
        magnitude = violation.magnitude
        if magnitude is not None and (
            self._worst is None
            or self._worst.magnitude is None
            or magnitude > self._worst.magnitude
        ):
            self._worst = violation
        if len(self._kept) < self._keep:
            self._kept.append(violation)

    @abc.abstractmethod
    def _on_read(self, view: ReadView) -> None:
        """Judge one ok read; must not look at anything invoked after it completed."""

    @abc.abstractmethod
    def _coverage(self) -> dict[str, int]:
        """Counts of the conditions this checker examined."""

    @abc.abstractmethod
    def _nothing_checked(self) -> str:
        """Why ``checked`` can be 0: the condition that never occurred."""

    def _rate_terms(self) -> tuple[int, int]:
        return self._count, self.checked

    def _notes(self) -> list[str]:
        return []
