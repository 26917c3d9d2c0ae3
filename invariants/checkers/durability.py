"""Durability: an acknowledged write stays readable until a delete. A violation is a
*lost* write."""

from __future__ import annotations

from invariants.verdict import Key, LostExplanation, Violation

from ._base import Checker
from ._trace import ReadView, Trace

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

    def _on_read(self, view: ReadView) -> None:
        if view.entity is None:
            return
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
                self._add(
                    Violation(
                        kind="lost",
                        key=Key(view.namespace, view.entity_id, slot),
                        witnesses=(write.index, view.invoke),
                        explanation=LostExplanation(read=view.ref(), slot=slot, write=write.ref()),
                    )
                )

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
