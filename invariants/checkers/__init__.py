"""The invariant checkers: one class per invariant, each the only definition of it.

=========================  ==================  ==========================================
checker (invariant)        violation kind      what it flags
=========================  ==================  ==========================================
uniqueness                 conflict            two facts served for one slot
causal_monotonicity        reorder             records out of causal order; a stale fact
deletion_monotonicity      resurrection        records of a deleted entity
semantic_normalization     duplicate           one fact served twice
durability                 lost                an acknowledged write gone
isolation                  leak                a value from another namespace
phantom                    phantom             a value no write produced
=========================  ==================  ==========================================

Every checker is incremental: ``observe(entry)`` in history order, ``result()`` at any
time, ``violation_count`` for live metrics. Batch checking is the same thing run to the
end: :func:`check_history`. :class:`CheckerSuite` runs several checkers over one shared
index of the history, and turns a checker that crashes into an UNKNOWN verdict that
carries the error, instead of an exception. docs/invariants.md defines each invariant,
violation and rate precisely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from invariants.causes import CAUSES
from invariants.errors import InvalidArgument
from invariants.history import Entry, History, HistoryError, HistoryStream, collector_paused
from invariants.levels import Paraphrase
from invariants.verdict import CheckResult, Validity, Violation

from ._base import Checker
from ._trace import IDLE_ENTRIES, Trace
from ._view import ReadView
from .causal_monotonicity import CausalMonotonicity
from .deletion_monotonicity import DeletionMonotonicity
from .durability import Durability
from .isolation import Isolation
from .phantom import Phantom
from .semantic_normalization import SemanticNormalization
from .uniqueness import Uniqueness

__all__ = [
    "ALL_CHECKERS",
    "CHECKER_NAMES",
    "CausalMonotonicity",
    "Checker",
    "CheckerSuite",
    "DeletionMonotonicity",
    "Durability",
    "Isolation",
    "Phantom",
    "SemanticNormalization",
    "Trace",
    "Uniqueness",
    "check_history",
]

ALL_CHECKERS: tuple[type[Checker], ...] = (
    Uniqueness,
    CausalMonotonicity,
    DeletionMonotonicity,
    SemanticNormalization,
    Durability,
    Isolation,
    Phantom,
)
CHECKER_NAMES: tuple[str, ...] = tuple(c.name for c in ALL_CHECKERS)


class CheckerSuite:
    """Several checkers fed together over one shared :class:`Trace`.

    This is what a run uses online (pass :meth:`observe` to the
    ``HistoryRecorder``'s observers) and what :func:`check_history` uses afterwards.
    ``names`` picks checkers (all by default, in :data:`ALL_CHECKERS` order); ``level``
    is the normalization level the backend claims; ``keep`` bounds the violations kept
    in full per checker; after ``idle`` entries that did not touch an entity, the
    shared index moves that entity to a temporary file until one does.
    ``on_violation`` is told every violation any checker finds, kept or not.

    A checker that raises while observing, or while building its result, is dropped
    from the run and reported as UNKNOWN with the error in its notes; the others go
    on. A malformed history (:class:`HistoryError`) is the caller's mistake and is
    raised.
    """

    def __init__(
        self,
        *,
        names: Iterable[str] | None = None,
        level: Paraphrase = "semantic",
        keep: int = 20,
        idle: int = IDLE_ENTRIES,
        on_violation: Callable[[Violation], None] | None = None,
    ) -> None:
        wanted = CHECKER_NAMES if names is None else tuple(names)
        for name in wanted:
            if name not in CHECKER_NAMES:
                raise InvalidArgument(
                    f"names contains {name!r}, which is not a checker; "
                    f"use some of {', '.join(CHECKER_NAMES)}"
                )
        self._trace = Trace(idle=idle)
        self.checkers: dict[str, Checker] = {}
        for cls in ALL_CHECKERS:
            if cls.name in wanted:
                if cls is SemanticNormalization:
                    checker: Checker = SemanticNormalization(
                        level=level, trace=self._trace, keep=keep
                    )
                else:
                    checker = cls(trace=self._trace, keep=keep)
                checker.on_violation = on_violation
                self.checkers[cls.name] = checker
        self._live: list[Checker] = list(self.checkers.values())
        self._crashes: dict[str, str] = {}
        self._defects: tuple[str, ...] = ()
        self._closed = False

    def close(self) -> None:
        """The history has ended: free the index the checkers share, keeping every count.

        A run's online checkers are done once its recorder closes, but the metrics read
        their counts until the verdict is pushed, and the verdict checks the saved
        history with fresh checkers that build the same index again: closing first
        keeps the two from being held at once. After it only the counts answer
        (:attr:`violation_count`, :meth:`violation_counts`, :meth:`rate_terms`,
        :meth:`cause_counts`); :meth:`observe` and :meth:`results` refuse.
        """
        self._closed = True
        self._live = []
        self._trace = Trace()
        for checker in self.checkers.values():
            checker.drop_index()

    def observe(self, entry: Entry) -> None:
        """Feed the next entry to every checker still running."""
        if not self._live:
            self._refuse_closed("observe")
            return
        try:
            view = self._trace.observe(entry)
        except HistoryError:
            raise
        except Exception as exc:
            self._trace_crashed(entry.index, exc)
            return
        if view is not None:
            self._judge(view)

    def observe_all(
        self, entries: Iterable[Entry], *, also: Sequence[Callable[[Entry], None]] = ()
    ) -> None:
        """Feed entries in order, consuming the iterable once; the defects of a
        :class:`History`, or of a :class:`HistoryStream` once it has been read to its
        end, go into every result.

        ``also`` are given every entry too, as it is consumed: what else a report
        counts over the history then shares this one pass over a file, and they see
        every entry even once every checker has crashed. Without them the rest of the
        iterable is left unread then.
        """
        source = entries
        if also:
            entries = _tapped(entries, also)
        self._feed(entries)
        if also:
            for _ in entries:  # every checker crashed early; the others read on
                pass
        if isinstance(source, History | HistoryStream):
            self._defects = source.defects

    def _feed(self, entries: Iterable[Entry]) -> None:
        if not self._live:
            self._refuse_closed("observe_all")
            return
        # One loop over the whole history (Trace.feed) rather than a call per entry,
        # which checking a long history would pay millions of times: most entries only
        # update the trace.
        trace = self._trace
        judge = self._judge
        try:
            for view in trace.feed(entries):
                if not judge(view):
                    return
        except HistoryError:
            raise
        except Exception as exc:
            self._trace_crashed(trace.consumed + 1, exc)

    def _refuse_closed(self, what: str) -> None:
        if self._closed:
            raise InvalidArgument(
                f"CheckerSuite.{what}() after close(): the index is gone; check the saved "
                "history with a fresh suite (check_history)"
            )

    def _judge(self, view: ReadView) -> bool:
        """Show one read to every live checker; False once none is left."""
        for checker in self._live:
            try:
                checker._on_read(view)
            except Exception as exc:
                self._crash(checker, f"checker crashed at entry {view.done}", exc)
        return bool(self._live)

    def _trace_crashed(self, index: int, exc: Exception) -> None:
        for checker in list(self._live):
            self._crash(checker, f"the trace shared by the checkers crashed at entry {index}", exc)

    def _crash(self, checker: Checker, what: str, exc: Exception) -> None:
        if checker.name in self._crashes:
            return
        self._crashes[checker.name] = f"{what}: {type(exc).__name__}: {exc}"
        self._live = [c for c in self._live if c is not checker]

    @property
    def violation_count(self) -> int:
        """Violations found so far by all checkers; cheap enough for every scrape."""
        return sum(c.violation_count for c in self.checkers.values())

    def violation_counts(self) -> dict[str, int]:
        """Violations found so far, per checker name."""
        return {name: c.violation_count for name, c in self.checkers.items()}

    def rate_terms(self) -> dict[str, tuple[int, int]]:
        """Each checker's rate so far as (failed checks, checks), per checker name; as
        cheap as :meth:`violation_counts`, for the live metrics."""
        return {name: c.rate_terms() for name, c in self.checkers.items()}

    def cause_counts(self) -> dict[str, dict[str, int]]:
        """Violations so far per checker name and root cause, every cause of
        :data:`~invariants.causes.CAUSES` present (0 included); as cheap as
        :meth:`violation_counts` times the causes, for the live metrics. Causes are as
        found (:meth:`Checker.cause_counts`), so the counts only grow."""
        counts: dict[str, dict[str, int]] = {}
        for name, checker in self.checkers.items():
            found = checker.cause_counts()
            ordered = {cause: found.pop(cause, 0) for cause in CAUSES.get(name, ())}
            ordered.update(found)
            counts[name] = ordered
        return counts

    def results(self) -> dict[str, CheckResult]:
        """Every checker's verdict so far, by name, in :data:`ALL_CHECKERS` order."""
        self._refuse_closed("results")
        results: dict[str, CheckResult] = {}
        for name, checker in self.checkers.items():
            crash = self._crashes.get(name)
            try:
                result = checker.result()
            except Exception as exc:
                crash = crash or f"checker crashed building its result: {type(exc).__name__}: {exc}"
                result = _crashed_result(checker)
            notes = result.notes + self._defects + ((crash,) if crash else ())
            results[name] = CheckResult(
                checker=result.checker,
                validity=Validity.UNKNOWN if crash else result.validity,
                violation_count=result.violation_count,
                violations=result.violations,
                groups=result.groups,
                checked=result.checked,
                rate=result.rate,
                rate_numerator=result.rate_numerator,
                rate_numerator_name=result.rate_numerator_name,
                rate_denominator=result.rate_denominator,
                rate_denominator_name=result.rate_denominator_name,
                coverage=result.coverage,
                notes=notes,
                causes=result.causes,
            )
        return results

    def validity(self) -> Validity:
        """All verdicts combined: INVALID over UNKNOWN over VALID."""
        return Validity.combine(r.validity for r in self.results().values())


def _crashed_result(checker: Checker) -> CheckResult:
    numerator, denominator = checker.rate_terms()
    return CheckResult(
        checker=checker.name,
        validity=Validity.UNKNOWN,
        violation_count=checker.violation_count,
        violations=(),
        groups=(),
        checked=checker.checked,
        rate=numerator / denominator if denominator else 0.0,
        rate_numerator=numerator,
        rate_numerator_name=checker.numerator_name,
        rate_denominator=denominator,
        rate_denominator_name=checker.denominator_name,
    )


def _tapped(
    entries: Iterable[Entry], also: Sequence[Callable[[Entry], None]]
) -> Iterator[Entry]:
    for entry in entries:
        for observe in also:
            observe(entry)
        yield entry


def check_history(
    history: Iterable[Entry],
    *,
    names: Sequence[str] | None = None,
    level: Paraphrase = "semantic",
    keep: int = 20,
    also: Sequence[Callable[[Entry], None]] = (),
    on_violation: Callable[[Violation], None] | None = None,
) -> dict[str, CheckResult]:
    """Check a whole history with fresh checkers; the same code a run uses online.

    ``history`` is consumed once, in order, and none of its entries is kept beyond what
    the checkers still need (docs/invariants.md, "What the checkers keep"): pass a
    :class:`HistoryStream` to check a file of any length without holding it, or a
    :class:`History` (from :func:`~invariants.history.read_history` or built in
    memory). Both are validated as they are read; a bare iterable of entries is only
    checked for order. ``also`` are given every entry as it is consumed
    (:meth:`CheckerSuite.observe_all`), ``on_violation`` every violation found, kept or
    not. Python's cyclic garbage collector is paused
    while it runs (what it builds stays alive until it returns), and restored afterwards.
    """
    suite = CheckerSuite(names=names, level=level, keep=keep, on_violation=on_violation)
    with collector_paused():
        suite.observe_all(history, also=also)
        results = suite.results()
        # The index has no reference cycles: dropping it here frees it at once, before
        # the collector resumes and would otherwise scan its millions of objects.
        del suite
    return results
