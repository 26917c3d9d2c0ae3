"""Uniqueness: a read never serves two facts for one slot. A violation is a *conflict*."""

from __future__ import annotations

from invariants.verdict import ConflictExplanation, Key, Violation

from ._base import Checker
from ._trace import ReadView, WriteState

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
            per_fact: dict[str, WriteState] = {}
            for t in group:
                per_fact.setdefault(t.write.fact, t.write)
            if len(per_fact) < 2:
                continue
            writes = tuple(per_fact.values())
            self._add(
                Violation(
                    kind="conflict",
                    key=Key(view.namespace, view.entity_id, slot),
                    witnesses=tuple(sorted({w.index for w in writes} | {view.invoke})),
                    explanation=ConflictExplanation(
                        read=view.ref(), slot=slot, writes=tuple(w.ref() for w in writes)
                    ),
                    magnitude=len(writes),
                )
            )

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
