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

The index only points downwards (trace, entity, slot, fact, write); a write names its
entity by an identity tuple and its slot by name rather than pointing back at them. With
no reference cycles, reference counting frees a whole index the moment its last checker
goes, and Python's cyclic collector never has to scan its millions of objects.

Several checkers may share one Trace, as :class:`~invariants.checkers.CheckerSuite` does;
they must then all be fed each entry before any of them gets the next one.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Generator, Iterable, Iterator, Sequence
from sys import intern
from typing import Final, TypeAlias

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument
from invariants.history import Entry, HistoryError
from invariants.levels import PARAPHRASE_LEVELS, Paraphrase
from invariants.verdict import Answer, EntityOpRef, Outcome, ReadRef, ServedRecord, WriteRef

from ._spill import Spill

__all__ = ["Trace"]

PENDING: Final = 0
OK: Final = 1
FAIL: Final = 2
INFO: Final = 3
_OUTCOMES: tuple[Outcome, ...] = ("pending", "ok", "fail", "info")

LEAK: Final = 1
"""The record traces only to writes made in other namespaces."""
PHANTOM: Final = 2
"""The record traces to no write that could have produced it."""

Ident: TypeAlias = tuple[str, str]
"""(namespace, entity_id): one tuple per entity, so that ``is`` compares entities."""


class WriteState:
    """One write: payload, ground truth, and how it ended (so far).

    It keeps the fields of its invocation and completion that the explanations quote,
    not the entries themselves: a long history's writes outlive their entries, and the
    entries' copies of the namespace, entity and value would otherwise stay alive with
    them. Names that recur (attribute, fact, slot, paraphrase level) are interned, and a
    value written again to the same entity shares the first write's string.
    """

    __slots__ = (
        "attribute",
        "completed_ns",
        "done",
        "fact",
        "ident",
        "index",
        "invoked_ns",
        "n",
        "op_id",
        "paraphrase",
        "result",
        "same_value",
        "seq",
        "slot",
        "status",
        "value",
    )

    def __init__(
        self,
        call: Entry,
        op: Write,
        ident: Ident,
        slot: str,
        fact: str,
        value: str,
        paraphrase: Paraphrase,
    ) -> None:
        self.index = call.index
        self.invoked_ns = call.time_ns
        self.attribute = intern(op.attribute)
        """The attribute as the backend received it."""
        self.op_id = op.op_id
        self.seq = op.causal_seq
        self.done = -1
        """The completion's index; -1 until it arrives. Only then are ``completed_ns``
        and ``result`` (an Ack, or the error's text) set."""
        self.completed_ns: int
        self.result: Ack | str | None
        self.status = PENDING
        self.ident = ident
        self.slot = slot
        self.fact = fact
        self.value = value
        self.paraphrase = paraphrase
        self.same_value: WriteState | None = None
        """The write to the same entity invoked before this one that carried the same
        value, if any."""
        self.n: int
        """How many writes were invoked before this one, whatever their entity: how far
        back :meth:`Trace.overwriters` looks is counted in these. Set by the trace."""

    def __lt__(self, other: WriteState) -> bool:
        """The order of a :class:`FactState` heap: the higher causal_seq first, then the
        write invoked first."""
        return self.seq > other.seq or (self.seq == other.seq and self.index < other.index)

    def ref(self, t0: int) -> WriteRef:
        """This write as an explanation cites it; ``t0`` is the run's first timestamp."""
        done = self.done
        return WriteRef(
            op=self.index,
            completed=None if done < 0 else done,
            outcome=_OUTCOMES[self.status],
            namespace=self.ident[0],
            entity_id=self.ident[1],
            slot=self.slot,
            fact=self.fact,
            value=self.value,
            causal_seq=self.seq,
            paraphrase=self.paraphrase,
            attribute=self.attribute,
            op_id=self.op_id,
            answer=None if done < 0 else _result_answer(self.result),
            invoked_s=(self.invoked_ns - t0) / 1e9,
            completed_s=None if done < 0 else (self.completed_ns - t0) / 1e9,
        )


class OpState:
    """One delete or restore."""

    __slots__ = ("answer", "call", "done", "f", "ident", "index", "seq", "status")

    def __init__(self, call: Entry, f: str, seq: int, ident: Ident) -> None:
        self.call = call
        self.answer: Entry | None = None
        self.index = call.index
        self.done = -1
        self.status = PENDING
        self.f = f
        self.seq = seq
        self.ident = ident

    def ref(self, t0: int) -> EntityOpRef:
        """This delete or restore as an explanation cites it; ``t0`` as for a write."""
        op: Delete | Restore = self.call.op  # type: ignore[assignment]
        answer = self.answer
        return EntityOpRef(
            op=self.index,
            completed=None if self.done < 0 else self.done,
            outcome=_OUTCOMES[self.status],
            f="delete" if self.f == "delete" else "restore",
            namespace=self.ident[0],
            entity_id=self.ident[1],
            causal_seq=self.seq,
            op_id=op.op_id,
            answer=None if answer is None else _answer(answer),
            invoked_s=_since(self.call, t0),
            completed_s=None if answer is None else _since(answer, t0),
        )


def _since(entry: Entry, t0: int) -> float:
    return (entry.time_ns - t0) / 1e9


def _answer(entry: Entry) -> Answer:
    return _result_answer(entry.result)


def _result_answer(res: object) -> Answer:
    if isinstance(res, Ack):
        return Answer(applied=res.applied, version=res.version, reason=res.reason)
    return Answer(error=str(res))


class FactState(list[WriteState]):
    """The writes of one fact on one key, once it has two, as a heap whose top is the
    write with the highest causal_seq (see :meth:`WriteState.__lt__`); ``live`` counts
    the writes that have not failed. Being the heap itself spares an object per fact."""

    __slots__ = ("live",)

    def __init__(self, first: WriteState, second: WriteState) -> None:
        list.__init__(self, (second, first) if second < first else (first, second))
        self.live = 2 if first.status != FAIL else 1

    def add(self, ws: WriteState) -> None:
        heapq.heappush(self, ws)
        self.live += 1

    def top(self) -> WriteState | None:
        """The write of this fact with the highest causal_seq that has not failed."""
        while self and self[0].status == FAIL:
            heapq.heappop(self)
        return self[0] if self else None


class KeyState:
    """One (namespace, entity, slot).

    ``facts`` maps each fact written to the slot to its one write, or to a
    :class:`FactState` once it has two: most facts are written once, and need no more.

    ``floor_done``/``floor_best`` list, in completion order, the ``ok`` writes that no
    possible delete can have wiped, each with the highest-causal_seq such write so
    far (see :meth:`ReadView.floors`). Once a delete of the entity is acknowledged they
    are void, since that delete may have wiped every write invoked before it: ``epoch``
    then lags the entity's, and the next ``ok`` write empties them. Keeping that lazy
    keeps a delete O(1) however many slots its entity has.
    """

    __slots__ = (
        "busy",
        "epoch",
        "facts",
        "floor_best",
        "floor_done",
        "flying",
        "live_facts",
        "race",
        "raced_writes",
        "repeated_facts",
        "slot",
        "was_contended",
    )

    def __init__(self, slot: str, epoch: int) -> None:
        self.slot = slot
        self.busy = 0
        """Writes to the key in flight now; one that ended ``info`` stays counted, since
        it may take effect at any later time."""
        self.flying: WriteState | None = None
        """The write to the key invoked last."""
        self.raced_writes = 0
        """Writes to the key invoked while another was in flight: each can have made at
        most one surplus record through a check-then-insert race."""
        self.race: tuple[WriteState, WriteState] | None = None
        """The first two writes to the key that were in flight together, if any: a
        check-then-insert race can only have happened on a key that has one."""
        self.was_contended = False
        self.facts: dict[str, WriteState | FactState] = {}
        self.live_facts = 0
        self.repeated_facts = 0
        self.floor_done: list[int] = []
        self.floor_best: list[WriteState] = []
        self.epoch = epoch

    def top(self, fact: str) -> WriteState | None:
        """The write of ``fact`` with the highest causal_seq that has not failed."""
        known = self.facts[fact]
        if isinstance(known, FactState):
            return known.top()
        return None if known.status == FAIL else known


class EntityState:
    """One (namespace, entity): its slots, deletes and restores.

    ``del_done`` holds the completion indices of acknowledged deletes, ascending;
    ``del_latest[i]``/``del_top[i]`` are, among the first i+1 of them, the one invoked
    last and the one with the highest causal_seq.
    """

    __slots__ = (
        "busy",
        "contended",
        "del_done",
        "del_latest",
        "del_top",
        "epoch",
        "ident",
        "keys",
        "last_del_done",
        "last_restore_done",
        "refused",
        "repeated",
        "restores",
        "touched",
        "uncertain_deletes",
        "uncertain_restores",
        "values",
    )

    def __init__(self, ident: Ident) -> None:
        self.ident = ident
        self.busy = 0
        """Writes, deletes and restores of the entity in flight: while one is, the
        entity stays in memory (the operations in flight point into it)."""
        self.touched = -1
        """The index of the last invocation of a write, delete or restore of the entity,
        or completion of a read of it (a completion of the others needs no mark: while
        they were in flight ``busy`` kept the entity in memory)."""
        self.keys: dict[str, KeyState] = {}
        self.values: dict[str, WriteState] = {}
        """Each value written to the entity: its latest write, whose ``same_value``
        chain holds the entity's earlier writes of it. Kept per entity, so that tracing
        a record costs the same however often other entities wrote the same text."""
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
        self.refused: list[WriteState] = []
        """The entity's writes that failed, in invocation order: the evidence that a
        tombstone held for a while."""

    def writes(self) -> Iterator[WriteState]:
        """Every write to the entity, slot by slot."""
        for key in self.keys.values():
            for known in key.facts.values():
                if isinstance(known, FactState):
                    yield from known
                else:
                    yield known

    def refused_between(self, after: int, before: int) -> WriteState | None:
        """The first write invoked after index ``after`` and before ``before`` that
        the backend refused, if any."""
        refused = self.refused
        j = bisect_right(refused, after, key=_index)
        if j < len(refused) and refused[j].index < before:
            return refused[j]
        return None

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
            invoked_s=_since(self.call, t0),
            completed_s=(self.time_ns - t0) / 1e9,
        )


IDLE_ENTRIES: Final = 1 << 16
"""Entries after which an entity none of them touched goes to disk (see ``_spill``)."""
REACH: Final = 64
"""How many writes before a lost write :meth:`Trace.overwriters` looks back over."""
_LEVELS: Final[dict[str, Paraphrase]] = {level: level for level in PARAPHRASE_LEVELS}
"""Each paraphrase level's one string, for the writes to share."""
_NO_VALUES: Final[dict[str, WriteState]] = {}
"""The values of an entity that wrote nothing."""

_WriteCall: TypeAlias = tuple[WriteState, KeyState, EntityState]
"""A write in flight, with where it goes (kept out of the index, which only points down)."""
_InFlight: TypeAlias = _WriteCall | OpState | Entry
"""What a worker has in flight: a write, a delete or restore, or a read (its invocation)."""


class Trace:
    """Incremental index of a history; see the module docstring."""

    def __init__(self, *, idle: int = IDLE_ENTRIES) -> None:
        if not isinstance(idle, int) or isinstance(idle, bool) or idle < 1:
            raise InvalidArgument(
                f"idle={idle!r} (type {type(idle).__name__}) is not a count of entries; "
                "pass an int >= 1"
            )
        self._idle = idle
        self._park_at = idle
        """The index at which idle entities are next looked for."""
        self._spill = Spill()
        self._last = -1
        self.t0 = 0
        """The first entry's timestamp: explanations give times relative to it."""
        self._view: ReadView | None = None
        self._pending: dict[int, _InFlight] = {}
        self._values: dict[str, Ident | list[Ident]] = {}
        """Each value written: the entity it was written to, or, once several were, the
        list of them in order of their first write of it. Only a record that does not
        trace to its own entity looks here."""
        self._entities: dict[str, dict[str, EntityState]] = {}
        self._namespaces: set[str] = set()
        self.contended_keys = 0
        """Slots that ever had non-failed writes of two or more facts."""
        self.refused_after_delete = 0
        """Writes refused that were invoked after a delete of their entity completed."""
        self.ok_writes = 0
        self.ok_deletes = 0
        self.ok_restores = 0
        self.ok_reads = 0
        self.paraphrase_writes: dict[str, int] = dict.fromkeys(PARAPHRASE_LEVELS, 0)
        """Writes that completed ok or info, by paraphrase level."""
        self._writes = 0
        """Writes invoked so far."""

    @property
    def in_flight(self) -> int:
        """Operations invoked and not completed yet."""
        return len(self._pending)

    @property
    def in_memory(self) -> int:
        """Entities held in memory now; the others wait on disk."""
        return sum(len(by_id) for by_id in self._entities.values())

    @property
    def parked(self) -> int:
        """Entities moved to disk so far (each time counts), having gone untouched for
        ``idle`` entries."""
        return self._spill.parked

    def _park_idle(self, now: int) -> None:
        """Move to disk every entity no entry touched in the last ``idle`` entries and
        none of whose operations is in flight; the next entry that needs one brings it
        back (:meth:`_find`)."""
        horizon = now - self._idle
        spill = self._spill
        entities = self._entities
        for ns in list(entities):
            by_id = entities[ns]
            for entity_id in [e for e, ent in by_id.items() if ent.touched < horizon
                              and not ent.busy]:
                if spill.put((ns, entity_id), by_id[entity_id]):
                    del by_id[entity_id]
            if not by_id:
                del entities[ns]

    def _find(self, namespace: str, entity_id: str) -> EntityState | None:
        """The entity, brought back from disk if it was parked; None if it never was."""
        by_id = self._entities.get(namespace)
        ent = None if by_id is None else by_id.get(entity_id)
        if ent is None and len(self._spill):
            ent = self._spill.take((namespace, entity_id))
            if ent is not None:
                self._entities.setdefault(namespace, {})[entity_id] = ent
        return ent

    @property
    def consumed(self) -> int:
        """The index of the last entry consumed, -1 before the first."""
        return self._last

    def observe(self, entry: Entry) -> ReadView | None:
        """Consume the next entry; for an ok read, return its view.

        Feeding the entry just consumed again returns the same view without doing
        anything, which is how checkers that share this Trace each get it. This is
        :meth:`feed` given one entry: a run's online checkers and the final judgement of
        its saved history go through the same steps.
        """
        steps = self.feed((entry,))
        view = next(steps, None)
        steps.close()
        return view

    def feed(self, entries: Iterable[Entry]) -> Generator[ReadView, None, None]:
        """Consume entries in order, yielding each ok read's view as it completes.

        The one implementation of consuming entries: it consumes the iterable once and
        keeps none of its entries, only the index, so a history streamed from its file is
        never held whole. An entry given again right after itself is skipped, yielding
        its view again if it was a read. If consuming an entry raises, :attr:`consumed`
        tells which entry came last.
        """
        pending = self._pending
        invoke_write, complete_write = self._invoke_write, self._complete_write
        invoke_entity_op, complete_entity_op = self._invoke_entity_op, self._complete_entity_op
        read = self._read
        last = self._last
        view = self._view
        idle = self._idle
        park_at = self._park_at
        try:
            for entry in entries:
                i = entry.index
                if i != last + 1:
                    if i == last:
                        if view is not None and view.done == i:
                            yield view
                        continue
                    raise _out_of_order(i, last)
                if i >= park_at:
                    self._park_idle(i)
                    park_at = i + idle
                worker = entry.worker
                if i == 0:
                    self.t0 = entry.time_ns
                if entry.type == "invoke":
                    if worker in pending:
                        raise _busy(i, worker)
                    f = entry.f
                    if f == "write":
                        invoke_write(entry)
                    elif f == "read":
                        pending[worker] = entry
                    else:
                        invoke_entity_op(entry)
                    last = i
                    continue
                st = pending.pop(worker, None)
                if type(st) is tuple:
                    ws, key, ent = st
                    complete_write(entry, ws, key, ent)
                elif type(st) is Entry:
                    if entry.type == "ok":
                        view = read(entry, st)
                        last = i
                        yield view
                        continue
                elif type(st) is OpState:
                    complete_entity_op(entry, st)
                else:
                    raise _stray(i, worker)
                last = i
        finally:
            self._park_at = park_at
            self._last = last
            self._view = view if view is not None and view.done == last else None

    def overwriters(self, ws: WriteState) -> list[WriteState]:
        """Writes to other slots of ``ws``'s entity that were invoked before ``ws``
        completed and completed after it (or never did): the writers that could have
        written a whole-entity copy, read before ``ws`` landed, back over it; in
        invocation order.

        Only the :data:`REACH` writes invoked just before ``ws`` (whatever their entity)
        are looked at, besides those invoked while it was in flight, which bounds what a
        question can find.
        """
        ent = self._find(*ws.ident)
        if ent is None:
            return []
        done = ws.done if ws.done >= 0 else self._last + 1
        found = [
            other
            for other in ent.writes()
            if other.n >= ws.n - REACH
            and other.index < done
            and other is not ws
            and other.slot != ws.slot
            and other.status != FAIL
            and (other.done < 0 or other.done > done)
        ]
        found.sort(key=_index)
        return found

    def _entity(self, namespace: str, entity_id: str) -> EntityState:
        ent = self._find(namespace, entity_id)
        if ent is None:
            ent = EntityState((namespace, entity_id))
            self._entities.setdefault(namespace, {})[entity_id] = ent
        return ent

    def _invoke_write(self, entry: Entry) -> None:
        op: Write = entry.op  # type: ignore[assignment]
        meta = entry.meta
        if meta is None:
            raise HistoryError(
                f"entry {entry.index}: a write has no meta",
                "Record the generator's fact, slot and paraphrase level with every write.",
            )
        ns = op.namespace
        try:
            ent = self._entities[ns][op.entity_id]
        except KeyError:
            ent = self._entity(ns, op.entity_id)
        ent.touched = entry.index
        ent.busy += 1
        keys = ent.keys
        slot = meta.slot
        try:
            key = keys[slot]
        except KeyError:
            if not keys:  # the entity's first write
                self._namespaces.add(ns)
            key = keys[slot] = KeyState(intern(slot), ent.epoch)
        value = op.value
        fact = intern(meta.fact)
        values = ent.values
        before = values.get(value)
        if before is None:
            writers = self._values.get(value)
            if writers is None:
                self._values[value] = ent.ident
            elif type(writers) is tuple:
                self._values[value] = [writers, ent.ident]
            else:
                writers.append(ent.ident)  # type: ignore[union-attr]
        else:
            value = before.value
        ws = WriteState(entry, op, ent.ident, key.slot, fact, value, _LEVELS[meta.paraphrase])
        ws.same_value = before
        values[value] = ws
        ws.n = n = self._writes
        self._writes = n + 1
        facts = key.facts
        known = facts.setdefault(fact, ws)
        if known is ws:
            live = 1
        elif isinstance(known, FactState):
            known.add(ws)
            live = known.live
        else:
            fs = facts[fact] = FactState(known, ws)
            live = fs.live
        if live == 1:
            live = key.live_facts = key.live_facts + 1
            if live == 2:
                ent.contended += 1
                if not key.was_contended:
                    key.was_contended = True
                    self.contended_keys += 1
        elif live == 2:
            key.repeated_facts += 1
            if key.repeated_facts == 1:
                ent.repeated += 1
        if key.busy:
            key.raced_writes += 1
            if key.race is None and key.flying is not None:
                key.race = (key.flying, ws)
        key.busy += 1
        key.flying = ws
        self._pending[entry.worker] = (ws, key, ent)

    def _complete_write(
        self, entry: Entry, ws: WriteState, key: KeyState, ent: EntityState
    ) -> None:
        ws.done = done = entry.index
        ent.busy -= 1
        ws.completed_ns = entry.time_ns
        ws.result = entry.result  # type: ignore[assignment]
        etype = entry.type
        if etype != "info":  # an info write may still land at any time: in flight for good
            key.busy -= 1
        if etype == "ok":
            ws.status = OK
            self.ok_writes += 1
            self.paraphrase_writes[ws.paraphrase] += 1
            if key.epoch != ent.epoch:
                key.floor_done.clear()
                key.floor_best.clear()
                key.epoch = ent.epoch
            if ws.index > ent.last_del_done:
                best = key.floor_best
                key.floor_done.append(done)
                best.append(ws if not best or ws.seq >= best[-1].seq else best[-1])
        elif etype == "fail":
            ws.status = FAIL
            insort(ent.refused, ws, key=_index)
            if ws.index > ent.last_del_done >= 0:
                self.refused_after_delete += 1
            known = key.facts[ws.fact]
            if isinstance(known, FactState):
                known.live -= 1
                live = known.live
            else:  # the fact's one write
                live = 0
            if live == 1:
                key.repeated_facts -= 1
                if key.repeated_facts == 0:
                    ent.repeated -= 1
            elif live == 0:
                key.live_facts -= 1
                if key.live_facts == 1:
                    ent.contended -= 1
        else:
            ws.status = INFO
            self.paraphrase_writes[ws.paraphrase] += 1

    def _invoke_entity_op(self, entry: Entry) -> None:
        op: Delete | Restore = entry.op  # type: ignore[assignment]
        ent = self._entity(op.namespace, op.entity_id)
        ent.touched = entry.index
        ent.busy += 1
        st = OpState(entry, entry.f, op.causal_seq, ent.ident)
        if entry.f == "delete":
            ent.uncertain_deletes += 1
        else:
            ent.uncertain_restores += 1
            ent.restores.append(st)
        self._pending[entry.worker] = st

    def _complete_entity_op(self, entry: Entry, st: OpState) -> None:
        st.done = entry.index
        st.answer = entry
        ent = self._entities[st.ident[0]][st.ident[1]]
        ent.busy -= 1
        ent.touched = entry.index
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

    def _read(self, entry: Entry, call: Entry) -> ReadView:
        self.ok_reads += 1
        op = entry.op
        records: tuple[Record, ...] = entry.result  # type: ignore[assignment]
        ns = op.namespace
        namespaces = self._namespaces
        foreign = len(namespaces) > (1 if ns in namespaces else 0)
        try:
            ent: EntityState | None = self._entities[ns][op.entity_id]
        except KeyError:
            ent = self._find(ns, op.entity_id)
        if ent is not None:
            ent.touched = entry.index
        view = ReadView(call, entry, ns, op.entity_id, records, ent, foreign, self.t0)
        own: dict[str, WriteState] = _NO_VALUES if ent is None else ent.values
        by_slot = view.by_slot
        strays: list[Stray] | None = None
        for position, record in enumerate(records):
            w = own.get(record.value)
            if w is not None and w.same_value is None and w.status != FAIL:
                t = Traced(position, record, w, ())
            else:
                traced = self._trace_chain(position, record, w, ent, ns)
                if isinstance(traced, Stray):
                    if strays is None:
                        strays = view.strays = []
                    strays.append(traced)
                    continue
                t = traced
                w = t.write
            group = by_slot.get(w.slot)
            if group is None:
                by_slot[w.slot] = [t]
            else:
                group.append(t)
                view.stacked = True
        return view

    def _trace_chain(
        self,
        position: int,
        record: Record,
        w: WriteState | None,
        ent: EntityState | None,
        ns: str,
    ) -> Traced | Stray:
        """Trace a value the read's entity wrote more than once, or not simply.

        ``w`` is the entity's latest write of the value, if any. A value no write of the
        entity can have produced is looked up among every entity that wrote it. Every
        list this yields is in invocation order.
        """
        own: list[WriteState] = []
        dead: list[WriteState] = []
        while w is not None:
            (own if w.status != FAIL else dead).append(w)
            w = w.same_value
        if own:
            own.reverse()
            return Traced(position, record, own[0], tuple(own[1:]))
        foreign: list[WriteState] = []
        writers = self._values.get(record.value)
        idents = () if writers is None else (writers,) if type(writers) is tuple else writers
        for ident in idents:
            if ent is not None and ident == ent.ident:
                continue
            other = self._find(*ident)
            assert other is not None, ident  # an entity, once seen, is never forgotten
            w = other.values[record.value]
            while w is not None:
                if w.status != FAIL and w.ident[0] != ns:
                    foreign.append(w)
                else:
                    dead.append(w)
                w = w.same_value
        if foreign:
            foreign.sort(key=_index)
            return Stray(position, record, LEAK, tuple(foreign))
        dead.sort(key=_index)
        return Stray(position, record, PHANTOM, tuple(dead))


def _index(ws: WriteState) -> int:
    return ws.index


def _out_of_order(i: int, last: int) -> HistoryError:
    return HistoryError(
        f"entry {i} fed to a checker after entry {last}",
        "Feed entries in index order, each once; checkers sharing a Trace must all "
        "get one entry before any of them gets the next.",
    )


def _busy(i: int, worker: int) -> HistoryError:
    return HistoryError(
        f"entry {i}: worker {worker} invokes with an operation outstanding",
        "Validate the history (History or read_history) before checking it.",
    )


def _stray(i: int, worker: int) -> HistoryError:
    return HistoryError(
        f"entry {i}: worker {worker} completes an operation it never invoked",
        "Validate the history (History or read_history) before checking it.",
    )
