"""Causal monotonicity: an older write never replaces a newer one, and reads list records
in ascending causal_seq. A violation is a *reorder*."""

from __future__ import annotations

from invariants.verdict import Key, MisorderExplanation, ServedRecord, StaleExplanation, Violation

from ._base import Checker
from ._state import WriteState
from ._trace import Trace
from ._view import ReadView, Traced

__all__ = ["CausalMonotonicity"]


class CausalMonotonicity(Checker):
    """Flags two things an ok read can show.

    - *Misorder*: the records are not listed in ascending ``causal_seq`` (as the backend
      reports it). Checked once per read of two or more records.
    - *Stale fact*: for a slot, every fact the read served is older than a write W of
      another fact on that slot: W was acknowledged before the read was invoked, no
      delete of the entity can have wiped W, and W's causal_seq is above that of every
      write of the served fact that may have taken effect. Facts, not the records'
      causal_seq, are compared, because a backend may merge a paraphrase by advancing
      a record's causal_seq while keeping the older wording. Checked once per read × served
      slot that had such an acknowledged write.

    A slot served with no record at all is a *lost* write, not a reorder
    (:class:`~invariants.checkers.durability.Durability`).
    """

    name = "causal_monotonicity"
    kind = "reorder"
    numerator_name = "reorders"
    denominator_name = "order checks and staleness checks"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._order_checks = 0
        self._stale_checks = 0
        self._skipped = 0

    def _on_read(self, view: ReadView) -> None:
        records = view.records
        if len(records) >= 2:
            self._order_checks += 1
            self.checked += 1
            prev = records[0].causal_seq
            for position in range(1, len(records)):
                seq = records[position].causal_seq
                if seq < prev:
                    self._misorder(view, position)
                    break
                prev = seq
        by_slot = view.by_slot
        if not by_slot:
            return
        floors = view.floors()
        if floors is None:
            self._skipped += 1
            return
        checks = 0
        for slot, group in by_slot.items():
            newest = floors.get(slot)
            if newest is None:
                continue
            checks += 1
            if group[0].write.fact == newest.fact:  # by far the most common case
                continue
            stale: tuple[Traced, WriteState] | None = None
            for t in group:
                fact = t.write.fact
                if fact == newest.fact:
                    break
                top = view.top(slot, fact)
                if top is None or top.seq >= newest.seq:
                    break
                if stale is None:
                    stale = (t, top)
            else:
                if stale is not None:
                    self._stale(view, slot, stale[0], stale[1], newest)
        if checks:
            self._stale_checks += checks
            self.checked += checks

    def _misorder(self, view: ReadView, position: int) -> None:
        records = view.records

        def served(i: int) -> ServedRecord:
            r = records[i]
            return ServedRecord(
                position=i, attribute=r.attribute, value=r.value, causal_seq=r.causal_seq
            )

        earlier, later = served(position - 1), served(position)
        self._add(
            Violation(
                kind="reorder",
                key=Key(view.namespace, view.entity_id),
                witnesses=(view.invoke,),
                explanation=MisorderExplanation(read=view.ref(), earlier=earlier, later=later),
                magnitude=earlier.causal_seq - later.causal_seq,
            )
        )

    def _stale(
        self, view: ReadView, slot: str, served: Traced, top: WriteState, newest: WriteState
    ) -> None:
        self._add(
            Violation(
                kind="reorder",
                key=Key(view.namespace, view.entity_id, slot),
                witnesses=tuple(sorted((top.index, newest.index, view.invoke))),
                explanation=StaleExplanation(
                    read=view.ref(),
                    served=served.served(),
                    top=top.ref(view.t0),
                    newer=newest.ref(view.t0),
                ),
                magnitude=newest.seq - top.seq,
            )
        )

    def _coverage(self) -> dict[str, int]:
        return {
            "order_checks": self._order_checks,
            "staleness_checks": self._stale_checks,
            "reads_skipped_uncertain_delete": self._skipped,
        }

    def _nothing_checked(self) -> str:
        return (
            "no read returned 2 or more records, and no read served a slot after an "
            "acknowledged write to it"
        )

    def _notes(self) -> list[str]:
        if not self._skipped:
            return []
        return [
            f"{self._skipped} read(s) not checked for stale facts: a delete of unknown "
            "outcome could have wiped the entity at any time"
        ]
