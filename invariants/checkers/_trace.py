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

The index's nodes are in ``_state`` and a read's view in ``_view``. The index only points
downwards (trace, entity, slot, fact, write): with no reference cycles, reference
counting frees a whole index the moment its last checker goes, and Python's cyclic
collector never has to scan its millions of objects. Entities nobody touches for a while
wait on disk (``_spill``).

Several checkers may share one Trace, as :class:`~invariants.checkers.CheckerSuite` does;
they must then all be fed each entry before any of them gets the next one.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Generator, Iterable
from sys import intern
from typing import Final, TypeAlias

from invariants.backend import Delete, Record, Restore, Write
from invariants.errors import InvalidArgument
from invariants.history import Entry, HistoryError
from invariants.levels import PARAPHRASE_LEVELS, Paraphrase

from ._spill import Spill
from ._state import (
    FAIL,
    INFO,
    OK,
    EntityState,
    FactState,
    Ident,
    KeyState,
    OpState,
    WriteState,
    index_of,
)
from ._view import LEAK, PHANTOM, ReadView, Stray, Traced

__all__ = ["IDLE_ENTRIES", "REACH", "Trace"]

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
        found.sort(key=index_of)
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
            insort(ent.refused, ws, key=index_of)
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
            foreign.sort(key=index_of)
            return Stray(position, record, LEAK, tuple(foreign))
        dead.sort(key=index_of)
        return Stray(position, record, PHANTOM, tuple(dead))


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
