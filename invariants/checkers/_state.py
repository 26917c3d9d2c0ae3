"""The nodes of a trace's index: one write, delete or restore; one fact, slot, entity.

Each keeps what later entries can still need of its operations (docs/invariants.md,
"What the checkers keep"), and points only downwards (entity, slot, fact, write): a
write names its entity by an identity tuple and its slot by name, so the index has no
reference cycles, and a whole entity pickles on its own when it goes idle (``_spill``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from sys import intern
from typing import Final, TypeAlias

from invariants.backend import Ack, Delete, Restore, Write
from invariants.history import Entry
from invariants.levels import Paraphrase
from invariants.verdict import Answer, EntityOpRef, Outcome, WriteRef

__all__ = [
    "FAIL",
    "INFO",
    "OK",
    "PENDING",
    "EntityState",
    "FactState",
    "Ident",
    "KeyState",
    "OpState",
    "WriteState",
    "index_of",
    "seconds_since",
]

PENDING: Final = 0
OK: Final = 1
FAIL: Final = 2
INFO: Final = 3
_OUTCOMES: tuple[Outcome, ...] = ("pending", "ok", "fail", "info")

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
            invoked_s=seconds_since(self.call, t0),
            completed_s=None if answer is None else seconds_since(answer, t0),
        )


def seconds_since(entry: Entry, t0: int) -> float:
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
        j = bisect_right(refused, after, key=index_of)
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



def index_of(ws: WriteState) -> int:
    """A write's invocation index: the key of every list of writes kept in that order."""
    return ws.index
