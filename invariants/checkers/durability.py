"""Durability: an acknowledged write stays readable until a delete. A violation is a
*lost* write."""

from __future__ import annotations

from dataclasses import replace

from invariants.causes import classify
from invariants.verdict import Key, LostExplanation, ReadRef, Violation, WriteRef

from ._base import PER_CAUSE, Checker
from ._trace import Trace
from ._view import ReadView

__all__ = ["Durability"]


class Durability(Checker):
    """Flags an ok read that returns no record at all for a slot although a write W to
    that slot was acknowledged before the read was invoked and no delete of the entity
    can have taken effect after W (an acknowledged delete that completed after W was
    invoked, or any delete of unknown outcome).

    A newer write to the slot cannot explain the absence: it would be served instead.
    Serving an older fact instead of W is a reorder, and is counted there only. Unit
    of ``checked``: a read × a slot of its entity that had such a write W.
    """

    name = "durability"
    kind = "lost"
    numerator_name = "lost writes"
    denominator_name = "reads of a slot with an acknowledged write"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._skipped = 0
        self._lost: dict[int, _Lost] = {}
        """Each lost write (by invocation index): how often it was found missing, and
        the later read that served it, once one did."""

    def _on_read(self, view: ReadView) -> None:
        if view.entity is None:
            return
        lost = self._lost
        if lost:
            for group in view.by_slot.values():
                for t in group:
                    found = lost.get(t.write.index)
                    if found is not None and found.served_later is None:
                        found.served_later = view.ref()
                        self._keep_late(found)
        floors = view.floors()
        if floors is None:
            self._skipped += 1
            return
        served = view.by_slot
        self.checked += len(floors)
        if floors.keys() <= served.keys():
            return
        for slot, write in floors.items():
            if slot not in served:
                known = lost.get(write.index)
                if known is None:
                    t0 = view.t0
                    overwriters = self._trace.overwriters(write)
                    known = lost[write.index] = _Lost(tuple(w.ref(t0) for w in overwriters))
                known.reads += 1
                violation = Violation(
                    kind="lost",
                    key=Key(view.namespace, view.entity_id, slot),
                    witnesses=(write.index, view.invoke),
                    explanation=LostExplanation(
                        read=view.ref(),
                        slot=slot,
                        write=write.ref(view.t0),
                        concurrent=known.concurrent,
                    ),
                )
                added = self._add(violation)
                if known.first is None:
                    known.first = added

    def _keep_late(self, found: _Lost) -> None:
        """Keep an example of ``visible_late`` once a lost write is served.

        Which violations are kept as examples is decided when each is found, by its
        cause then (``lost_update`` or ``never_visible``); a write served later moves
        to ``visible_late`` only now. Without this, a run whose early violations filled
        the quotas would count ``visible_late`` with no example of it.
        """
        first = found.first
        if first is None or self._per_cause["visible_late"] >= min(PER_CAUSE, self._keep):
            return
        if not any(kept is first for kept in self._kept):
            self._kept.append(first)
        self._per_cause["visible_late"] += 1

    def _revise(self, violation: Violation) -> Violation:
        e = violation.explanation
        assert isinstance(e, LostExplanation)
        later = self._lost[e.write.op].served_later
        if later is None:
            return violation
        e = replace(e, served_later=later)
        cause, detail = classify(replace(violation, explanation=e))
        return replace(violation, explanation=e, cause=cause, detail=detail)

    def _cause_counts(self) -> dict[str, int]:
        counts = super()._cause_counts()
        for known in self._lost.values():
            if known.served_later is not None:
                cause = "lost_update" if known.concurrent else "never_visible"
                counts[cause] -= known.reads
                counts["visible_late"] += known.reads
        return counts

    def _coverage(self) -> dict[str, int]:
        return {
            "ok_writes": self._trace.ok_writes,
            "slot_reads_after_ok_write": self.checked,
            "reads_skipped_uncertain_delete": self._skipped,
        }

    def _nothing_checked(self) -> str:
        if not self._trace.ok_writes:
            return "no write was acknowledged"
        return "no read was invoked after an acknowledged write to its entity"

    def _notes(self) -> list[str]:
        if not self._skipped:
            return []
        return [
            f"{self._skipped} read(s) not checked: a delete of unknown outcome could have "
            "wiped the entity at any time"
        ]


class _Lost:
    """What the checker learns about one lost write as the history goes on."""

    __slots__ = ("concurrent", "first", "reads", "served_later")

    def __init__(self, concurrent: tuple[WriteRef, ...]) -> None:
        self.concurrent = concurrent
        self.reads = 0
        self.served_later: ReadRef | None = None
        self.first: Violation | None = None
        """Its first violation, the example of ``visible_late`` should it be served."""
