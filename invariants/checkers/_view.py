"""What a checker sees of an ok read: its records, each traced to the writes that could
have produced it, grouped by slot, and the questions a checker asks of the read's entity
as it stood when the read completed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

from invariants.backend import Record
from invariants.history import Entry
from invariants.verdict import ReadRef, ServedRecord

from ._state import EntityState, WriteState, seconds_since

__all__ = ["LEAK", "PHANTOM", "ReadView", "Stray", "Traced"]

LEAK: Final = 1
"""The record traces only to writes made in other namespaces."""
PHANTOM: Final = 2
"""The record traces to no write that could have produced it."""

class Traced:
    """One record of an ok read that traces to the read's own entity and namespace.

    ``write`` and then ``more`` are the writes of that entity, invoked before the read
    completed and not failed, that carried the record's value, in invocation order;
    almost always there is just ``write``, whose slot and fact are the record's.
    """

    __slots__ = ("more", "position", "record", "write")

    def __init__(
        self, position: int, record: Record, write: WriteState, more: tuple[WriteState, ...]
    ) -> None:
        self.position = position
        self.record = record
        self.write = write
        self.more = more

    @property
    def producers(self) -> tuple[WriteState, ...]:
        """Every write that may have produced the record, in invocation order."""
        return (self.write, *self.more)

    def sender(self) -> WriteState:
        """The producer an explanation should cite: the one whose attribute and
        causal_seq the record carries, as the backend stored them, else the one whose
        causal_seq it carries, else the first. A value written twice is common; the
        record's own fields say which write the backend kept."""
        if not self.more:
            return self.write
        r = self.record
        by_seq = None
        for w in self.producers:
            if w.seq == r.causal_seq:
                if w.attribute == r.attribute:
                    return w
                by_seq = by_seq or w
        return by_seq or self.write

    def served(self) -> ServedRecord:
        return _served(self.position, self.record)


class Stray:
    """One record of an ok read that does not trace to the read's own entity.

    ``origin`` is LEAK or PHANTOM. ``others`` are, for a LEAK, the writes in other
    namespaces that carried the value and, for a PHANTOM, the writes of that value that
    cannot count.
    """

    __slots__ = ("origin", "others", "position", "record")

    def __init__(
        self, position: int, record: Record, origin: int, others: tuple[WriteState, ...]
    ) -> None:
        self.position = position
        self.record = record
        self.origin = origin
        self.others = others

    def served(self) -> ServedRecord:
        return _served(self.position, self.record)


def _served(position: int, r: Record) -> ServedRecord:
    return ServedRecord(
        position=position,
        attribute=r.attribute,
        value=r.value,
        causal_seq=r.causal_seq,
        version=r.version,
    )


class ReadView:
    """An ok read at its completion, with every record traced.

    ``by_slot`` groups the records that trace to the entity by slot, in serving order,
    and ``stacked`` says whether some slot got two or more of them; ``strays`` lists the
    others, LEAK and PHANTOM. ``foreign`` says whether some other namespace held writes.
    """

    __slots__ = (
        "_floors",
        "by_slot",
        "call",
        "done",
        "entity",
        "entity_id",
        "foreign",
        "invoke",
        "namespace",
        "records",
        "stacked",
        "strays",
        "t0",
        "time_ns",
    )

    def __init__(
        self,
        call: Entry,
        answer: Entry,
        namespace: str,
        entity_id: str,
        records: tuple[Record, ...],
        entity: EntityState | None,
        foreign: bool,
        t0: int,
    ) -> None:
        self.call = call
        self.invoke = call.index
        self.done = answer.index
        self.time_ns = answer.time_ns
        self.t0 = t0
        """The run's first timestamp, which every ref's times count from."""
        self.namespace = namespace
        self.entity_id = entity_id
        self.records = records
        self.entity = entity
        self.foreign = foreign
        self.by_slot: dict[str, list[Traced]] = {}
        self.stacked = False
        self.strays: Sequence[Stray] = ()
        self._floors: dict[str, WriteState] | None = None

    def floors(self) -> dict[str, WriteState] | None:
        """For each slot of the entity, the write the read must reflect, if any.

        That is the highest-causal_seq ``ok`` write acknowledged before the read was
        invoked and invoked after the entity's last acknowledged delete completed: no
        delete can have wiped it. None when a delete of unknown outcome (info, or still
        in flight) makes every such claim unsafe.
        """
        floors = self._floors
        if floors is None:
            ent = self.entity
            if ent is None or ent.uncertain_deletes:
                return None
            floors = self._floors = {}
            before = self.invoke
            epoch = ent.epoch
            for slot, key in ent.keys.items():
                done = key.floor_done
                if not done or key.epoch != epoch:
                    continue
                if done[-1] < before:
                    floors[slot] = key.floor_best[-1]
                else:
                    j = bisect_left(done, before)
                    if j:
                        floors[slot] = key.floor_best[j - 1]
        return floors

    def top(self, slot: str, fact: str) -> WriteState | None:
        """Among the writes of ``fact`` to ``slot`` of the read's entity, the one with the
        highest causal_seq that has not failed; ``fact`` is a traced record's fact."""
        ent = self.entity
        return None if ent is None else ent.keys[slot].top(fact)

    def ref(self) -> ReadRef:
        t0 = self.t0
        return ReadRef(
            op=self.invoke,
            completed=self.done,
            namespace=self.namespace,
            entity_id=self.entity_id,
            records=tuple(_served(i, r) for i, r in enumerate(self.records)),
            invoked_s=seconds_since(self.call, t0),
            completed_s=(self.time_ns - t0) / 1e9,
        )
