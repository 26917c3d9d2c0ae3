"""Deletion monotonicity: a deleted entity serves nothing until a restore, and a restore
revives nothing from before the delete. A violation is a *resurrection*."""

from __future__ import annotations

from typing import Literal

from invariants.verdict import Key, ResurrectionExplanation, Violation

from ._base import Checker
from ._state import OK, OpState, WriteState
from ._trace import Trace
from ._view import ReadView, Traced

__all__ = ["DeletionMonotonicity"]

_Cause = Literal["stale_seq", "before_delete"]


class DeletionMonotonicity(Checker):
    """Flags an ok read of an entity after a delete D of it was acknowledged (before the
    read was invoked) that returns:

    - any record, when no restore could have taken effect after D (a restore that is
      ``ok`` and completed after D was invoked, or ``info``, or still in flight); or
    - after such a restore, a record every producing write of which either has a
      causal_seq below the highest of those deletes (it must stay refused), or was
      acknowledged before the last of them was invoked (the restore revived it).

    Only records that trace to the entity's own writes count; the others are leaks or
    phantoms. Unit of ``checked``: an ok read invoked after a delete of its entity was
    acknowledged. One violation per read at most, citing its first offending record.
    """

    name = "deletion_monotonicity"
    kind = "resurrection"
    numerator_name = "resurrections"
    denominator_name = "reads of a deleted entity"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._after_restore = 0

    def _on_read(self, view: ReadView) -> None:
        ent = view.entity
        if ent is None or not ent.del_done:
            return
        deleted = ent.deleted_before(view.invoke)
        if deleted is None:
            return
        latest, top = deleted
        self.checked += 1
        restored = ent.uncertain_restores > 0 or ent.last_restore_done > latest.index
        if restored:
            self._after_restore += 1
        if not view.by_slot:
            return
        if not restored:
            own = [t for group in view.by_slot.values() for t in group]
            first = min(own, key=_position)
            refused = ent.refused_between(latest.done, view.invoke)
            sender = first.sender()
            self._add(
                Violation(
                    kind="resurrection",
                    key=Key(view.namespace, view.entity_id),
                    witnesses=(latest.index, view.invoke),
                    explanation=ResurrectionExplanation(
                        read=view.ref(),
                        delete=latest.ref(view.t0),
                        cause="no_restore",
                        record=first.served(),
                        write=sender.ref(view.t0),
                        restore=None,
                        revived=len(own),
                        refused=None if refused is None else refused.ref(view.t0),
                        refusals=self._trace.refused_after_delete,
                    ),
                    magnitude=len(own),
                )
            )
            return
        # Most reads after a restore are clean, so the records are scanned in slot order
        # and only a read that revived something pays for finding its first record.
        # A record revives only if every write that carried its value would; the one
        # cited is the write whose fields the record carries (Traced.sender), so a value
        # written both before the delete and after it is told as the store kept it.
        revived: list[tuple[Traced, WriteState, _Cause]] = []
        for group in view.by_slot.values():
            for t in group:
                cause = _cause(t.write, latest, top)
                if cause is not None and all(_cause(p, latest, top) for p in t.more):
                    cited = t.sender()
                    revived.append((t, cited, _cause(cited, latest, top) or cause))
        if not revived:
            return
        record, write, cause = min(revived, key=_revived_position)
        delete = top if cause == "stale_seq" else latest
        restore = ent.restore_after(latest)
        self._add(
            Violation(
                kind="resurrection",
                key=Key(view.namespace, view.entity_id),
                witnesses=tuple(sorted((write.index, delete.index, view.invoke))),
                explanation=ResurrectionExplanation(
                    read=view.ref(),
                    delete=delete.ref(view.t0),
                    cause=cause,
                    record=record.served(),
                    write=write.ref(view.t0),
                    restore=None if restore is None else restore.ref(view.t0),
                    revived=len(revived),
                    refusals=self._trace.refused_after_delete,
                ),
                magnitude=len(revived),
            )
        )

    def _coverage(self) -> dict[str, int]:
        return {
            "ok_deletes": self._trace.ok_deletes,
            "ok_restores": self._trace.ok_restores,
            "deleted_entity_reads": self.checked,
            "reads_after_possible_restore": self._after_restore,
        }

    def _nothing_checked(self) -> str:
        if not self._trace.ok_deletes:
            return "no delete was acknowledged"
        return "no read was invoked after a delete of its entity was acknowledged"


def _position(t: Traced) -> int:
    return t.position


def _revived_position(revived: tuple[Traced, WriteState, _Cause]) -> int:
    return revived[0].position


def _cause(write: WriteState, latest: OpState, top: OpState) -> _Cause | None:
    """Why ``write`` cannot legitimately be visible after the deletes, if it cannot."""
    if write.seq < top.seq:
        return "stale_seq"
    if write.status == OK and write.done < latest.index:
        return "before_delete"
    return None
