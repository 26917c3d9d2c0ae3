"""The shared index of a history that every checker reads from.

:class:`Trace` consumes entries in index order and keeps, per entity and per slot, what
the history says could have happened: which writes exist and how they ended, which
deletes and restores, and for every ``ok`` read which write produced each record it
returned. It defines no invariant; the checkers do, each in its own module, by looking
at a :class:`ReadView` when a read completes.

A read is judged at its completion, against every operation invoked before that point.
An operation still in flight then is treated like an ``info``: it may have taken effect,
and may yet take effect at any later time. A ``fail`` that arrives after the read
completed is not used. This keeps every step O(1) amortised (O(log n) where a bisect
over a key's acknowledged writes is needed) and makes the online count during a run
equal the verdict on the saved history.

Tracing uses the generator's ground truth only: a record's ``value`` leads to the writes
that carried that exact text, and their ``meta`` gives the fact and the slot. The
backend's attribute names and its normalizer are never consulted.

Several checkers may share one Trace, as :class:`~invariants.checkers.CheckerSuite` does;
they must then all be fed each entry before any of them gets the next one.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from typing import Final, cast, get_args

from invariants.backend import Delete, Record, Restore, Write
from invariants.history import Entry, HistoryError, Paraphrase
from invariants.verdict import EntityOpRef, Outcome, ReadRef, ServedRecord, WriteRef

__all__ = ["Trace"]

PENDING: Final = 0
OK: Final = 1
FAIL: Final = 2
INFO: Final = 3
_OUTCOMES: tuple[Outcome, ...] = ("pending", "ok", "fail", "info")
LEVELS: tuple[Paraphrase, ...] = get_args(Paraphrase)
"""Paraphrase levels, each including the ones before it."""

OWN: Final = 0
"""The record traces to a write of the read's own entity and namespace."""
LEAK: Final = 1
"""The record traces only to writes made in other namespaces."""
PHANTOM: Final = 2
"""The record traces to no write that could have produced it."""


class WriteState:
    """One write: payload, ground truth, and how it ended (so far)."""

    __slots__ = (
        "done",
        "fact",
        "fact_state",
        "index",
        "key",
        "paraphrase",
        "same_value",
        "seq",
        "status",
        "value",
    )

    def __init__(
        self, index: int, key: KeyState, fact: str, value: str, seq: int, paraphrase: Paraphrase
    ) -> None:
        self.index = index
        self.done = -1
        self.status = PENDING
        self.key = key
        self.fact = fact
        self.value = value
        self.seq = seq
        self.paraphrase = paraphrase
        self.same_value: WriteState | None = None
        self.fact_state: FactState

    def ref(self) -> WriteRef:
        ent = self.key.entity
        return WriteRef(
            op=self.index,
            completed=None if self.done < 0 else self.done,
            outcome=_OUTCOMES[self.status],
            namespace=ent.namespace,
            entity_id=ent.entity_id,
            slot=self.key.slot,
            fact=self.fact,
            value=self.value,
            causal_seq=self.seq,
            paraphrase=self.paraphrase,
        )


class OpState:
    """One delete or restore."""

    __slots__ = ("done", "entity", "f", "index", "seq", "status")

    def __init__(self, index: int, f: str, seq: int, entity: EntityState) -> None:
        self.index = index
        self.done = -1
        self.status = PENDING
        self.f = f
        self.seq = seq
        self.entity = entity

    def ref(self) -> EntityOpRef:
        return EntityOpRef(
            op=self.index,
            completed=None if self.done < 0 else self.done,
            outcome=_OUTCOMES[self.status],
            f="delete" if self.f == "delete" else "restore",
            namespace=self.entity.namespace,
            entity_id=self.entity.entity_id,
            causal_seq=self.seq,
        )


class FactState:
    """The writes of one fact on one key; finds the highest causal_seq that may count.

    Most facts have one write, so the heap is only built for the second one.
    """

    __slots__ = ("first", "heap", "live")

    def __init__(self, first: WriteState) -> None:
        self.first = first
        self.live = 1
        self.heap: list[tuple[int, int, WriteState]] | None = None

    def add(self, ws: WriteState) -> None:
        heap = self.heap
        if heap is None:
            first = self.first
            heap = self.heap = [(-first.seq, first.index, first)]
        heapq.heappush(heap, (-ws.seq, ws.index, ws))

    def top(self) -> WriteState | None:
        """The write of this fact with the highest causal_seq that has not failed."""
        heap = self.heap
        if heap is None:
            return None if self.first.status == FAIL else self.first
        while heap and heap[0][2].status == FAIL:
            heapq.heappop(heap)
        return heap[0][2] if heap else None


class KeyState:
    """One (namespace, entity, slot).

    ``floor_done``/``floor_best`` list, in completion order, the ``ok`` writes that no
    possible delete can have wiped, each with the highest-causal_seq such write so
    far (see :meth:`ReadView.floors`). Once a delete of the entity is acknowledged they
    are void, since that delete may have wiped every write invoked before it: ``epoch``
    then lags the entity's, and the next ``ok`` write empties them. Keeping that lazy
    keeps a delete O(1) however many slots its entity has.
    """

    __slots__ = (
        "entity",
        "epoch",
        "facts",
        "floor_best",
        "floor_done",
        "live_facts",
        "repeated_facts",
        "slot",
        "was_contended",
    )

    def __init__(self, entity: EntityState, slot: str) -> None:
        self.entity = entity
        self.slot = slot
        self.was_contended = False
        self.facts: dict[str, FactState] = {}
        self.live_facts = 0
        self.repeated_facts = 0
        self.floor_done: list[int] = []
        self.floor_best: list[WriteState] = []
        self.epoch = entity.epoch


class EntityState:
    """One (namespace, entity): its slots, deletes and restores.

    ``del_done`` holds the completion indices of acknowledged deletes, ascending;
    ``del_latest[i]``/``del_top[i]`` are, among the first i+1 of them, the one invoked
    last and the one with the highest causal_seq.
    """

    __slots__ = (
        "contended",
        "del_done",
        "del_latest",
        "del_top",
        "entity_id",
        "epoch",
        "keys",
        "last_del_done",
        "last_restore_done",
        "namespace",
        "repeated",
        "restores",
        "uncertain_deletes",
        "uncertain_restores",
    )

    def __init__(self, namespace: str, entity_id: str) -> None:
        self.namespace = namespace
        self.entity_id = entity_id
        self.keys: dict[str, KeyState] = {}
        self.del_done: list[int] = []
        self.del_latest: list[OpState] = []
        self.del_top: list[OpState] = []
        self.last_del_done = -1
        self.epoch = 0
        self.uncertain_deletes = 0
        self.uncertain_restores = 0
        self.last_restore_done = -1
        self.restores: list[OpState] = []
        self.contended = 0
        self.repeated = 0

    def deleted_before(self, before: int) -> tuple[OpState, OpState] | None:
        """Among deletes acknowledged before index ``before``: the one invoked last and
        the one with the highest causal_seq; None if there is none."""
        done = self.del_done
        if not done:
            return None
        j = len(done) if done[-1] < before else bisect_left(done, before)
        if not j:
            return None
        return self.del_latest[j - 1], self.del_top[j - 1]

    def restore_after(self, delete: OpState) -> OpState | None:
        """The latest restore that may have taken effect after ``delete`` did."""
        for st in reversed(self.restores):
            if st.status != FAIL and (st.status != OK or st.done > delete.index):
                return st
        return None


class Traced:
    """One record of an ok read and where it came from.

    ``producers`` are the writes of the read's own namespace and entity, invoked before
    the read completed and not failed, that carried the record's value; ``slot`` and
    ``fact`` come from the first of them (empty for a LEAK or PHANTOM). ``others`` are,
    for a LEAK, the writes in other namespaces and, for a PHANTOM, the writes of that
    value that cannot count.
    """

    __slots__ = ("fact", "origin", "others", "position", "producers", "record", "slot")

    def __init__(
        self,
        position: int,
        record: Record,
        origin: int,
        producers: tuple[WriteState, ...],
        others: tuple[WriteState, ...],
        slot: str,
        fact: str,
    ) -> None:
        self.position = position
        self.record = record
        self.origin = origin
        self.producers = producers
        self.others = others
        self.slot = slot
        self.fact = fact

    def served(self) -> ServedRecord:
        r = self.record
        return ServedRecord(
            position=self.position, attribute=r.attribute, value=r.value, causal_seq=r.causal_seq
        )


class ReadView:
    """An ok read at its completion, with every record traced.

    ``by_slot`` groups the OWN records by slot, in serving order, and ``stacked`` says
    whether some slot got two or more of them; ``strays`` lists the LEAK and PHANTOM
    records. ``foreign`` says whether some other namespace held writes.
    """

    __slots__ = (
        "_floors",
        "by_slot",
        "done",
        "entity",
        "entity_id",
        "foreign",
        "invoke",
        "namespace",
        "records",
        "stacked",
        "strays",
    )

    def __init__(
        self,
        invoke: int,
        done: int,
        namespace: str,
        entity_id: str,
        records: tuple[Record, ...],
        entity: EntityState | None,
        foreign: bool,
    ) -> None:
        self.invoke = invoke
        self.done = done
        self.namespace = namespace
        self.entity_id = entity_id
        self.records = records
        self.entity = entity
        self.foreign = foreign
        self.by_slot: dict[str, list[Traced]] = {}
        self.stacked = False
        self.strays: list[Traced] = []
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

    def ref(self) -> ReadRef:
        return ReadRef(
            op=self.invoke, completed=self.done, namespace=self.namespace, entity_id=self.entity_id
        )


class Trace:
    """Incremental index of a history; see the module docstring."""

    def __init__(self) -> None:
        self._last = -1
        self._view: ReadView | None = None
        self._pending: dict[int, WriteState | OpState | int] = {}
        self._values: dict[str, WriteState] = {}
        self._entities: dict[tuple[str, str], EntityState] = {}
        self._namespaces: set[str] = set()
        self.contended_keys = 0
        """Slots that ever had non-failed writes of two or more facts."""
        self.ok_writes = 0
        self.ok_deletes = 0
        self.ok_restores = 0
        self.ok_reads = 0
        self.paraphrase_writes: dict[str, int] = dict.fromkeys(LEVELS, 0)
        """Writes that completed ok or info, by paraphrase level."""

    @property
    def in_flight(self) -> int:
        """Operations invoked and not completed yet."""
        return len(self._pending)

    def observe(self, entry: Entry) -> ReadView | None:
        """Consume the next entry; for an ok read, return its view.

        Feeding the entry just consumed again returns the same view without doing
        anything, which is how checkers that share this Trace each get it.
        """
        i = entry.index
        last = self._last
        if i != last + 1:
            if i == last:
                return self._view
            raise HistoryError(
                f"entry {i} fed to a checker after entry {last}",
                "Feed entries in index order, each once; checkers sharing a Trace must all "
                "get one entry before any of them gets the next.",
            )
        view = None
        pending = self._pending
        worker = entry.worker
        if entry.type == "invoke":
            if worker in pending:
                raise HistoryError(
                    f"entry {i}: worker {worker} invokes with an operation outstanding",
                    "Validate the history (History or read_history) before checking it.",
                )
            f = entry.f
            if f == "write":
                self._invoke_write(entry)
            elif f == "read":
                pending[worker] = i
            else:
                self._invoke_entity_op(entry)
        else:
            st = pending.pop(worker, None)
            if st is None:
                raise HistoryError(
                    f"entry {i}: worker {worker} completes an operation it never invoked",
                    "Validate the history (History or read_history) before checking it.",
                )
            if type(st) is int:
                if entry.type == "ok":
                    view = self._read(entry, st)
            elif type(st) is WriteState:
                self._complete_write(entry, st)
            else:
                self._complete_entity_op(entry, cast(OpState, st))
        self._view = view
        self._last = i
        return view

    def _entity(self, namespace: str, entity_id: str) -> EntityState:
        ent = self._entities.get((namespace, entity_id))
        if ent is None:
            ent = self._entities[(namespace, entity_id)] = EntityState(namespace, entity_id)
        return ent

    def _invoke_write(self, entry: Entry) -> None:
        op = cast(Write, entry.op)
        meta = entry.meta
        if meta is None:
            raise HistoryError(
                f"entry {entry.index}: a write has no meta",
                "Record the generator's fact, slot and paraphrase level with every write.",
            )
        ns = op.namespace
        ent = self._entities.get((ns, op.entity_id)) or self._entity(ns, op.entity_id)
        keys = ent.keys
        if not keys:  # the entity's first write
            self._namespaces.add(ns)
        slot = meta.slot
        key = keys.get(slot)
        if key is None:
            key = keys[slot] = KeyState(ent, slot)
        value = op.value
        ws = WriteState(entry.index, key, meta.fact, value, op.causal_seq, meta.paraphrase)
        values = self._values
        ws.same_value = values.get(value)
        values[value] = ws
        fs = key.facts.get(meta.fact)
        if fs is None:
            fs = key.facts[meta.fact] = FactState(ws)
            self._fact_revived(key)
        else:
            fs.add(ws)
            fs.live += 1
            if fs.live == 1:
                self._fact_revived(key)
            elif fs.live == 2:
                key.repeated_facts += 1
                if key.repeated_facts == 1:
                    ent.repeated += 1
        ws.fact_state = fs
        self._pending[entry.worker] = ws

    def _fact_revived(self, key: KeyState) -> None:
        key.live_facts += 1
        if key.live_facts == 2:
            key.entity.contended += 1
            if not key.was_contended:
                key.was_contended = True
                self.contended_keys += 1

    def _complete_write(self, entry: Entry, ws: WriteState) -> None:
        ws.done = entry.index
        etype = entry.type
        if etype == "ok":
            ws.status = OK
            self.ok_writes += 1
            self.paraphrase_writes[ws.paraphrase] += 1
            key = ws.key
            ent = key.entity
            if key.epoch != ent.epoch:
                key.floor_done.clear()
                key.floor_best.clear()
                key.epoch = ent.epoch
            if ws.index > ent.last_del_done:
                best = key.floor_best
                key.floor_done.append(entry.index)
                best.append(ws if not best or ws.seq >= best[-1].seq else best[-1])
        elif etype == "fail":
            ws.status = FAIL
            fs = ws.fact_state
            key = ws.key
            fs.live -= 1
            if fs.live == 1:
                key.repeated_facts -= 1
                if key.repeated_facts == 0:
                    key.entity.repeated -= 1
            elif fs.live == 0:
                key.live_facts -= 1
                if key.live_facts == 1:
                    key.entity.contended -= 1
        else:
            ws.status = INFO
            self.paraphrase_writes[ws.paraphrase] += 1

    def _invoke_entity_op(self, entry: Entry) -> None:
        op = cast(Delete | Restore, entry.op)
        ent = self._entity(op.namespace, op.entity_id)
        st = OpState(entry.index, entry.f, op.causal_seq, ent)
        if entry.f == "delete":
            ent.uncertain_deletes += 1
        else:
            ent.uncertain_restores += 1
            ent.restores.append(st)
        self._pending[entry.worker] = st

    def _complete_entity_op(self, entry: Entry, st: OpState) -> None:
        st.done = entry.index
        ent = st.entity
        etype = entry.type
        is_delete = st.f == "delete"
        if etype == "info":
            st.status = INFO
            return
        if is_delete:
            ent.uncertain_deletes -= 1
        else:
            ent.uncertain_restores -= 1
        if etype == "fail":
            st.status = FAIL
            return
        st.status = OK
        if is_delete:
            self.ok_deletes += 1
            latest, top = (ent.del_latest[-1], ent.del_top[-1]) if ent.del_done else (st, st)
            ent.del_done.append(entry.index)
            ent.del_latest.append(st if st.index >= latest.index else latest)
            ent.del_top.append(st if st.seq >= top.seq else top)
            ent.last_del_done = entry.index
            ent.epoch += 1
        else:
            self.ok_restores += 1
            ent.last_restore_done = entry.index

    def _read(self, entry: Entry, invoke: int) -> ReadView:
        self.ok_reads += 1
        op = entry.op
        records = cast("tuple[Record, ...]", entry.result)
        ns = op.namespace
        namespaces = self._namespaces
        foreign = len(namespaces) > (1 if ns in namespaces else 0)
        ent = self._entities.get((ns, op.entity_id))
        view = ReadView(invoke, entry.index, ns, op.entity_id, records, ent, foreign)
        values = self._values
        by_slot = view.by_slot
        for position, record in enumerate(records):
            w = values.get(record.value)
            if w is not None and w.same_value is None and w.key.entity is ent and w.status != FAIL:
                slot = w.key.slot
                t = Traced(position, record, OWN, (w,), (), slot, w.fact)
            else:
                t = _trace_chain(position, record, w, ent, ns)
                if t.origin != OWN:
                    view.strays.append(t)
                    continue
                slot = t.slot
            group = by_slot.get(slot)
            if group is None:
                by_slot[slot] = [t]
            else:
                group.append(t)
                view.stacked = True
        return view


def _trace_chain(
    position: int, record: Record, w: WriteState | None, ent: EntityState | None, ns: str
) -> Traced:
    """Trace a value that several writes carried, or that is not simply the entity's own."""
    own: list[WriteState] = []
    foreign: list[WriteState] = []
    dead: list[WriteState] = []
    chain: list[WriteState] = []
    while w is not None:
        chain.append(w)
        w = w.same_value
    for w in reversed(chain):  # invocation order
        if w.status == FAIL:
            dead.append(w)
        elif w.key.entity is ent:
            own.append(w)
        elif w.key.entity.namespace != ns:
            foreign.append(w)
        else:
            dead.append(w)
    if own:
        return Traced(position, record, OWN, tuple(own), (), own[0].key.slot, own[0].fact)
    if foreign:
        return Traced(position, record, LEAK, (), tuple(foreign), "", "")
    return Traced(position, record, PHANTOM, (), tuple(dead), "", "")
