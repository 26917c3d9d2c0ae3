"""The guard's judge: the checkers, fed the guarded operations as a history.

The guard defines no invariant. It records what it saw of each sampled entity (the
caller's operations as they were invoked and answered, and its own verification reads)
as history entries, in the order they happened, and feeds them to a
:class:`~invariants.checkers.CheckerSuite`: the very checkers a certification uses. What
a chaos run takes from the generator's ground truth, a write's slot and fact, comes
here from memcert's normalizer at the guard's level (``attribute_key`` and
``value_key``), since production writes carry none.

The checkers trace a record to the writes that carried its exact text, which a
generator makes unique; production values are not (``"yes"`` is the value of many
attributes). So the judge keys every value by its slot, the attribute's canonical form,
in the writes and in the records it is shown, and takes the key off again in what it
reports: a record then traces only to writes of its own slot.

The phantom checker is left out: a record no guarded write produced is, in production,
most often one written before the guard started or by a process it does not watch, so
it proves nothing (docs/guard.md, "What the guard cannot see").
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from invariants.backend import Record, Write
from invariants.checkers import CheckerSuite
from invariants.history import Entry, EntryType, OpName, Payload, Result, WriteMeta
from invariants.levels import Paraphrase
from invariants.normalize import Normalizer
from invariants.normalize.surface import fold
from invariants.verdict import Violation, render_interpretation, render_view

__all__ = ["GUARD_CHECKERS", "SHARED_CHECKERS", "Finding", "Judge", "Step"]

_KEY = re.compile("\ue000[^\ue001]*\ue001")
_T = TypeVar("_T")

GUARD_CHECKERS: tuple[str, ...] = (
    "uniqueness", "causal_monotonicity", "deletion_monotonicity", "semantic_normalization",
    "durability", "isolation",
)
"""The checkers the guard runs when it sees every change of a sampled entity."""

SHARED_CHECKERS: tuple[str, ...] = tuple(c for c in GUARD_CHECKERS if c != "durability")
"""The checkers it runs when other writers it does not watch share the store: a record
they replace or delete would read as a lost write."""


@dataclass(frozen=True, slots=True)
class Step:
    """One entry of the guard's history before it is numbered: numbers are given in
    the order the judge consumes steps, which is the order they happened."""

    worker: int
    time_ns: int
    type: EntryType
    f: OpName
    op: Payload
    result: Result = None
    token: object = None
    """For a completed read, what its findings are filed under (see :meth:`Judge.take`)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken invariant the guard found, as data and as text.

    ``violation`` is the checker's own, with its cause and explanation; ``found`` is how
    many violations of that checker the same read showed (this one is the last); ``text``
    renders the operations and the read as the backend saw them, then memcert's reading,
    whose slots and facts come from the guard's normalizer.
    """

    checker: str
    violation: Violation
    found: int
    level: str
    text: str

    @property
    def cause(self) -> str:
        return self.violation.cause

    @property
    def namespace(self) -> str:
        return self.violation.key.namespace

    @property
    def entity_id(self) -> str:
        return self.violation.key.entity_id


class Judge:
    """Numbers the steps, derives each write's slot and fact, and feeds the checkers.

    Thread-safe: :meth:`consume` and the counts take one lock, so a scrape reads counts
    that match a point between two entries.
    """

    def __init__(self, normalizer: Normalizer, checkers: Iterable[str]) -> None:
        self._normalizer = normalizer
        self._names = tuple(checkers)
        self._lock = threading.Lock()
        self._suite = CheckerSuite(names=self._names, level=normalizer.level, keep=1)
        self._index = 0
        self._open: dict[int, Step] = {}
        self._filed: dict[object, list[Finding]] = {}
        self._sampled: dict[str, int] = {}
        self._carried: dict[str, tuple[int, int]] = {}
        self._carried_violations: dict[str, int] = {}
        self._carried_causes: dict[str, dict[str, int]] = {}

    @property
    def level(self) -> str:
        return self._normalizer.level

    def meta(self, op: Write) -> WriteMeta:
        """The write's slot and fact, by memcert's normalizer, with how far its wording
        is from the fact's canonical text (none, surface, or the guard's level)."""
        n = self._normalizer
        key = n.value_key(op.value)
        paraphrase: Paraphrase = (
            "none" if op.value == key else "surface" if fold(op.value) == key else n.level)
        return WriteMeta(key, n.attribute_key(op.attribute), paraphrase)

    def consume(self, steps: Iterable[Step]) -> list[Finding]:
        """Feed steps in order; return what their reads found, and file it by token."""
        found: list[Finding] = []
        with self._lock:
            for step in steps:
                found.extend(self._consume(step))
        return found

    def take(self, token: object) -> list[Finding]:
        """The findings of the read filed under ``token``, once."""
        with self._lock:
            return self._filed.pop(token, [])

    def reset(self) -> None:
        """The store was emptied: judge from a fresh history, carrying the counts, and
        the operations still in flight, so no counter goes down and none is lost."""
        with self._lock:
            for name, (failed, checks) in self._suite.rate_terms().items():
                before = self._carried.get(name, (0, 0))
                self._carried[name] = (before[0] + failed, before[1] + checks)
            for name, n in self._suite.violation_counts().items():
                self._carried_violations[name] = self._carried_violations.get(name, 0) + n
            for name, causes in self._suite.cause_counts().items():
                into = self._carried_causes.setdefault(name, {})
                for cause, n in causes.items():
                    into[cause] = into.get(cause, 0) + n
            self._suite.close()
            self._suite = CheckerSuite(names=self._names, level=self._normalizer.level,
                                       keep=1)
            self._index = 0
            open_steps = list(self._open.values())
            self._open.clear()
            for step in open_steps:
                self._consume(step)

    def counts(self) -> tuple[dict[str, int], dict[str, tuple[int, int]],
                              dict[str, dict[str, int]], dict[str, int]]:
        """Violations, rate terms and causes per checker, and sampled operations per
        kind, so far."""
        with self._lock:
            violations = {name: n + self._carried_violations.get(name, 0)
                          for name, n in self._suite.violation_counts().items()}
            terms = {}
            for name, (failed, checks) in self._suite.rate_terms().items():
                before = self._carried.get(name, (0, 0))
                terms[name] = (failed + before[0], checks + before[1])
            causes = {}
            for name, by_cause in self._suite.cause_counts().items():
                before_causes = self._carried_causes.get(name, {})
                causes[name] = {cause: n + before_causes.get(cause, 0)
                                for cause, n in by_cause.items()}
            return violations, terms, causes, dict(self._sampled)

    def _consume(self, step: Step) -> list[Finding]:
        meta = self.meta(step.op) if step.type == "invoke" and isinstance(
            step.op, Write) else None
        op, result = step.op, step.result
        if isinstance(op, Write):
            op = replace(op, value=self._keyed(op.attribute, op.value))
        elif step.type == "ok" and step.f == "read" and isinstance(result, tuple):
            result = tuple(replace(r, value=self._keyed(r.attribute, r.value))
                           for r in result if isinstance(r, Record))
        entry = Entry(self._index, step.worker, step.time_ns, step.type, step.f, op,
                      result, meta)
        self._index += 1
        if step.type == "invoke":
            self._open[step.worker] = step
            if step.worker >= 0:
                self._sampled[step.f] = self._sampled.get(step.f, 0) + 1
        else:
            self._open.pop(step.worker, None)
        if step.f != "read" or step.type != "ok":
            self._suite.observe(entry)
            return []
        before = self._suite.violation_counts()
        self._suite.observe(entry)
        after = self._suite.violation_counts()
        found = [self._finding(name, after[name] - before[name])
                 for name in after if after[name] > before[name]]
        if found and step.token is not None:
            self._filed.setdefault(step.token, []).extend(found)
        return found

    def _keyed(self, attribute: str, value: str) -> str:
        return f"\ue000{self._normalizer.attribute_key(attribute)}\ue001{value}"

    def _finding(self, name: str, count: int) -> Finding:
        result = self._suite.checkers[name].result()
        violation = _unkeyed(result.groups[0].last)
        lines = render_view(violation)
        lines.append(f"memcert's reading (slots and facts by the guard's {self.level} "
                     f"normalizer): {render_interpretation(violation)}")
        return Finding(name, violation, count, self.level, "\n".join(lines))



def _unkeyed(data: _T) -> _T:
    """``data`` with every value's slot key taken off, whatever dataclass holds it."""
    value: Any = data
    if isinstance(value, str):
        return _KEY.sub("", value)  # type: ignore[return-value]
    if isinstance(value, tuple):
        return tuple(_unkeyed(item) for item in value)  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _unkeyed(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return replace(value, **changes)  # type: ignore[return-value]
    return data
