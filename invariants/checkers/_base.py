"""What every checker shares: feeding, counting violations, and building the result."""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import ClassVar

from invariants.causes import CAUSES, classify
from invariants.errors import InvalidArgument
from invariants.history import Entry, HistoryError
from invariants.verdict import (
    CheckResult,
    ReadRef,
    Validity,
    Violation,
    ViolationGroup,
    ViolationKind,
    cited,
)

from ._trace import Trace
from ._view import ReadView

__all__ = ["PER_CAUSE", "Checker"]

PER_CAUSE = 3
"""Violations kept of each cause, past the checker's ``keep``."""


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
    while every one is counted, and past it the first :data:`PER_CAUSE` (at most
    ``keep``) of each cause are kept too, so that every cause found has an example. Each kept
    violation's ``repeats`` counts every violation citing the same operations.
    :attr:`on_violation`, when set, is told every violation as it is found, kept or not:
    a report that marks every violation's witnesses needs them all, which ``keep`` bounds.
    """

    name: ClassVar[str]
    kind: ClassVar[ViolationKind]
    numerator_name: ClassVar[str]
    denominator_name: ClassVar[str]
    on_violation: Callable[[Violation], None] | None = None

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
            raise InvalidArgument(
                f"keep={keep!r} (type {type(keep).__name__}) is not a count; pass an int >= 0"
            )
        self._trace = trace if trace is not None else Trace()
        self._keep = keep
        self._count = 0
        self._kept: list[Violation] = []
        self._per_cause: Counter[str] = Counter()
        self._repeats: dict[tuple[int, ...], int] = {}
        """Per set of cited operations (a kept violation's witnesses bar its read), how
        many violations cited them."""
        self._first: Violation | None = None
        self._worst: Violation | None = None
        self._last: Violation | None = None
        self._seen = -1
        self._causes: Counter[str] = Counter()
        self.checked = 0
        """Opportunities for a violation seen so far, in the checker's own unit: the
        denominator of its rate. A check finds at most one failure."""

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

    def drop_index(self) -> None:
        """Let go of the index of the history (see :meth:`CheckerSuite.close`); the
        counts stay, and :meth:`result` no longer describes the history."""
        self._trace = Trace()

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
        numerator, denominator = self.rate_terms()
        groups: tuple[ViolationGroup, ...] = ()
        final = self._final
        if self._first is not None and self._last is not None:
            groups = (
                ViolationGroup(
                    kind=self.kind,
                    count=self._count,
                    first=final(self._first),
                    worst=None if self._worst is None else final(self._worst),
                    last=final(self._last),
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
            violations=tuple(final(v) for v in self._kept),
            groups=groups,
            checked=self.checked,
            rate=numerator / denominator if denominator else 0.0,
            rate_numerator=numerator,
            rate_numerator_name=self.numerator_name,
            rate_denominator=denominator,
            rate_denominator_name=self.denominator_name,
            coverage=self._coverage(),
            notes=tuple(notes),
            causes=self._cause_counts(),
        )

    def _add(self, violation: Violation) -> Violation:
        """Count ``violation`` and return it classified by its cause."""
        cause, detail = classify(violation)
        violation = replace(violation, cause=cause, detail=detail)
        self._causes[cause] += 1
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
        cited = _cited(violation)
        repeats = self._repeats
        if cited in repeats:
            repeats[cited] += 1
        if len(self._kept) < self._keep or self._per_cause[cause] < min(PER_CAUSE, self._keep):
            self._kept.append(violation)
            self._per_cause[cause] += 1
            repeats.setdefault(cited, 1)
        if self.on_violation is not None:
            self.on_violation(violation)
        return violation

    @abc.abstractmethod
    def _on_read(self, view: ReadView) -> None:
        """Judge one ok read; must not look at anything invoked after it completed."""

    @abc.abstractmethod
    def _coverage(self) -> dict[str, int]:
        """Counts of the conditions this checker examined."""

    @abc.abstractmethod
    def _nothing_checked(self) -> str:
        """Why ``checked`` can be 0: the condition that never occurred."""

    def _final(self, violation: Violation) -> Violation:
        """A kept violation as the whole history shows it, with its repeats counted; a
        checker whose causes depend on later entries reclassifies in :meth:`_revise`."""
        repeats = self._repeats.get(_cited(violation), 1)
        return self._revise(replace(violation, repeats=repeats))

    def _revise(self, violation: Violation) -> Violation:
        """Hook: reclassify a kept violation once the whole history is known."""
        return violation

    def _cause_counts(self) -> dict[str, int]:
        """Violations per cause, in :data:`~invariants.causes.CAUSES` order, every
        cause of the checker present (0 included) so that a breakdown shows what was
        ruled out as well as what was found."""
        counts = self._causes
        ordered = {cause: counts.get(cause, 0) for cause in CAUSES.get(self.name, ())}
        ordered.update((c, n) for c, n in counts.items() if c not in ordered)
        return ordered

    def cause_counts(self) -> dict[str, int]:
        """Violations so far per cause, as each was classified when it was found; cheap
        (one entry per cause), for online metrics. Its counts only grow, as a
        Prometheus counter's must: a durability violation a later read explains
        (``visible_late``) stays under the cause it was found with here, and moves in
        :meth:`result` alone."""
        return dict(self._causes)

    def rate_terms(self) -> tuple[int, int]:
        """The rate's numerator and denominator so far; O(1), for online metrics.

        The denominator is always ``checked``, and the numerator counts the checks that
        found a violation, so a rate can never exceed 1 and the column a report calls
        "checked" is what the rate divides by.
        """
        return self._failed_checks(), self.checked

    def _failed_checks(self) -> int:
        """Checks that found a violation; a checker that can find several violations in
        one check (one per fact, say) counts that check once."""
        return self._count

    def _notes(self) -> list[str]:
        return []


def _cited(violation: Violation) -> tuple[int, ...]:
    """The operations a violation's explanation cites, bar the reads: two reads that
    saw the same writes misbehave cite the same tuple."""
    return tuple(ref.op for _, ref in cited(violation.explanation) if not isinstance(ref, ReadRef))
