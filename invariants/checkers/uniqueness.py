"""Uniqueness: a read never serves two facts for one slot. A violation is a *conflict*."""

from __future__ import annotations

from dataclasses import replace

from invariants.causes import classify
from invariants.verdict import ConflictExplanation, Key, ReadRef, Violation

from ._base import Checker
from ._trace import Trace
from ._view import ReadView, Traced

__all__ = ["Uniqueness"]


class Uniqueness(Checker):
    """Flags an ok read that returns records of two or more facts for one slot.

    Slots and facts come from the writes the records trace to, so two records under
    attribute variants (``coffee_preference`` / ``Coffee Preference``) still land in one
    slot. Unit of ``checked``: a read × a slot of the read's entity that, when the read
    completed, had writes of two or more facts that had not failed.
    """

    name = "uniqueness"
    kind = "conflict"
    numerator_name = "conflicts"
    denominator_name = "reads of a slot with 2 or more facts written"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._aliased: ReadRef | None = None
        self._raced_spellings = 0
        """Conflicts of two spellings counted as races: aliases if ``_aliased`` is set."""
        self._sequential: ReadRef | None = None
        """The first read that proved the store keeps records without concurrency:
        from then on every conflict counts as not_replaced (see ``causes``)."""

    def _on_read(self, view: ReadView) -> None:
        ent = view.entity
        if ent is None:
            return
        self.checked += ent.contended
        if not view.stacked:
            return
        for slot, group in view.by_slot.items():
            if len(group) < 2:
                continue
            per_fact: dict[str, Traced] = {}
            for t in group:
                per_fact.setdefault(t.write.fact, t)
            if len(per_fact) < 2:
                continue
            traced = tuple(sorted(per_fact.values(), key=_sent_first))
            writes = tuple(t.sender() for t in traced)
            race = ent.keys[slot].race
            violation = self._add(
                Violation(
                    kind="conflict",
                    key=Key(view.namespace, view.entity_id, slot),
                    witnesses=tuple(sorted({w.index for w in writes} | {view.invoke})),
                    explanation=ConflictExplanation(
                        read=view.ref(),
                        slot=slot,
                        writes=tuple(w.ref(view.t0) for w in writes),
                        records=tuple(t.served() for t in traced),
                        racers=() if race is None else tuple(w.ref(view.t0) for w in race),
                        raced_writes=ent.keys[slot].raced_writes,
                    ),
                    magnitude=len(writes),
                )
            )
            if violation.cause == "not_replaced" and self._sequential is None:
                self._sequential = view.ref()
            if violation.cause == "alias" and self._aliased is None:
                self._aliased = view.ref()
            if violation.cause == "race" and len({t.record.attribute for t in traced}) > 1:
                self._raced_spellings += 1

    def _revise(self, violation: Violation) -> Violation:
        e = violation.explanation
        assert isinstance(e, ConflictExplanation)
        if self._sequential is not None and violation.cause != "not_replaced":
            e = replace(e, sequential=self._sequential)
        elif self._aliased is not None and violation.cause == "race":
            e = replace(e, aliased=self._aliased)
        else:
            return violation
        cause, detail = classify(replace(violation, explanation=e))
        return replace(violation, explanation=e, cause=cause, detail=detail)

    def _cause_counts(self) -> dict[str, int]:
        counts = super()._cause_counts()
        if self._sequential is not None:
            return {cause: 0 for cause in counts} | {"not_replaced": self.violation_count}
        if self._aliased is not None:
            counts["alias"] += self._raced_spellings
            counts["race"] -= self._raced_spellings
        return counts

    def _coverage(self) -> dict[str, int]:
        return {
            "ok_reads": self._trace.ok_reads,
            "contended_slots": self._trace.contended_keys,
            "contended_slot_reads": self.checked,
        }

    def _nothing_checked(self) -> str:
        if not self._trace.contended_keys:
            return "no slot ever had writes of 2 or more facts"
        return "no read of a slot with writes of 2 or more facts"


def _sent_first(t: Traced) -> int:
    """Writes in the order they were sent: W1 is the earlier, in prose and view alike."""
    return t.sender().index
