"""Phantom: every value a read returns was produced by a write. A violation is a
*phantom*."""

from __future__ import annotations

from invariants.causes import EDIT_SIMILARITY, alteration, similarity, value_difference
from invariants.verdict import Key, PhantomExplanation, Violation

from ._base import Checker
from ._state import EntityState, WriteState
from ._trace import Trace
from ._view import PHANTOM, ReadView

__all__ = ["Phantom"]


class Phantom(Checker):
    """Flags each record of an ok read whose value traces to no write that could have
    produced it: none to the read's entity in its namespace that was invoked before
    the read completed and did not fail, and none in another namespace either (that
    would be a leak).

    Unit of ``checked``: a record returned by an ok read.
    """

    name = "phantom"
    kind = "phantom"
    numerator_name = "phantom records"
    denominator_name = "records read"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._nearest: dict[tuple[tuple[str, str], str, str], WriteState | None] = {}
        """The nearest write per (entity, attribute, served value): one phantom value is
        often served by many reads."""

    def _on_read(self, view: ReadView) -> None:
        self.checked += len(view.records)
        for t in view.strays:
            if t.origin == PHANTOM:
                witnesses: tuple[int, ...] = (view.invoke,)
                nearest = None
                if t.others:
                    witnesses = tuple(sorted((t.others[0].index, view.invoke)))
                elif view.entity is not None:
                    nearest = self._near(view.entity, t.record.attribute, t.record.value,
                                         view.done)
                    if nearest is not None:
                        witnesses = tuple(sorted((nearest.index, view.invoke)))
                self._add(
                    Violation(
                        kind="phantom",
                        key=Key(view.namespace, view.entity_id),
                        witnesses=witnesses,
                        explanation=PhantomExplanation(
                            read=view.ref(),
                            record=t.served(),
                            candidates=tuple(w.ref(view.t0) for w in t.others),
                            nearest=None if nearest is None else nearest.ref(view.t0),
                            difference=None if nearest is None
                            else value_difference(nearest.value, t.record.value),
                        ),
                    )
                )

    def _near(self, entity: EntityState, attribute: str, value: str,
              before: int) -> WriteState | None:
        """The write to ``entity`` invoked before index ``before`` whose value ``value``
        looks derived from: an exact alteration first, else the closest edit; among
        the writes under the record's own ``attribute`` first (the same slot, as the
        backend files it), then among all of the entity's."""
        key = (entity.ident, attribute, value)
        if key in self._nearest:
            return self._nearest[key]
        candidates = [w for w in entity.writes() if w.index < before]
        same = [w for w in candidates if w.attribute == attribute]
        found = self._closest(same, value) if same else None
        if found is None and len(same) < len(candidates):
            found = self._closest(candidates, value)
        self._nearest[key] = found
        return found

    @staticmethod
    def _closest(candidates: list[WriteState], value: str) -> WriteState | None:
        found = next((w for w in candidates if alteration(w.value, value, edits=False)), None)
        if found is None:
            best = EDIT_SIMILARITY
            for w in candidates:
                score = similarity(w.value, value)
                if score >= best:
                    found, best = w, score
        return found

    def _coverage(self) -> dict[str, int]:
        return {"ok_reads": self._trace.ok_reads, "records_checked": self.checked}

    def _nothing_checked(self) -> str:
        return "no read returned a record"
