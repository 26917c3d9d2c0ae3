"""Properties: a correct store is never flagged, under any interleaving or unknown outcome,
and breaking one of its reads is always caught.

The store here is a plain dict model that keeps the contract: one record per slot, the
highest causal_seq wins, paraphrases merge, deletes tombstone the entity (and refuse
writes below the delete's causal_seq even after a restore). Workers interleave; each
operation takes effect at one point between its invocation and its completion, or, when
its outcome is reported as unknown, at some later point or never.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.checkers import CheckerSuite, check_history
from invariants.history import Entry, History, HistoryRecorder, Payload, Read, WriteMeta
from invariants.levels import CLAIMABLE_LEVELS
from invariants.verdict import Validity


@dataclass
class _Slot:
    fact: str
    value: str
    attribute: str
    seq: int


@dataclass
class _Entity:
    deleted: bool = False
    tomb: int = -1
    slots: dict[str, _Slot] = field(default_factory=dict)


class CorrectStore:
    """A dict model that keeps every invariant memcert checks."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.entities: dict[tuple[str, str], _Entity] = {}
        self.meta: dict[str, WriteMeta] = {}

    def apply(self, op: Payload) -> Ack | tuple[Record, ...]:
        ent = self.entities.setdefault((op.namespace, op.entity_id), _Entity())
        if isinstance(op, Read):
            if ent.deleted:
                return ()
            slots = sorted(ent.slots.values(), key=lambda s: s.seq)
            return tuple(Record(op.entity_id, s.attribute, s.value, s.seq, 1) for s in slots)
        if isinstance(op, Delete):
            ent.deleted, ent.tomb = True, max(ent.tomb, op.causal_seq)
            ent.slots.clear()
            return Ack(applied=True)
        if isinstance(op, Restore):
            if not ent.deleted:
                return Ack(applied=False, reason="not_deleted")
            ent.deleted = False
            return Ack(applied=True)
        assert isinstance(op, Write)
        meta = self.meta[op.op_id]
        current = ent.slots.get(meta.slot)
        if ent.deleted:
            return Ack(applied=False, reason="tombstoned")
        if op.causal_seq < ent.tomb or (current and op.causal_seq < current.seq):
            return Ack(applied=False, reason="stale")
        if current and current.fact == meta.fact and self.rnd.random() < 0.5:
            current.seq = op.causal_seq  # merge: keep the old wording, advance the seq
        else:
            ent.slots[meta.slot] = _Slot(meta.fact, op.value, op.attribute, op.causal_seq)
        return Ack(applied=True)


@dataclass
class _InFlight:
    invocation: Entry
    fate: str  # "normal", "lost_ack" (applied, then unknown) or "unknown" (maybe later)
    result: Ack | tuple[Record, ...] | None = None


def run(
    seed: int,
    *,
    steps: int,
    workers: int,
    namespaces: int,
    faults: bool,
    observers: Sequence[Callable[[Entry], None]] = (),
) -> History:
    """A correct store driven by interleaved workers, recorded as a history."""
    rnd = random.Random(seed)
    store = CorrectStore(rnd)
    ticks = itertools.count()
    recorder = HistoryRecorder(clock=lambda: next(ticks), observers=observers)
    in_flight: dict[int, _InFlight] = {}
    limbo: list[Payload] = []
    used_seqs: set[int] = set()
    clock = 0
    written: set[str] = set()

    def next_seq(skew: bool) -> int:
        nonlocal clock
        clock += 1
        seq = clock
        if skew:
            seq = clock - rnd.randint(1, 6)
            while seq in used_seqs:
                seq -= 1
            if seq < 0:
                seq = clock
        used_seqs.add(seq)
        return seq

    def start(worker: int) -> None:
        ns = f"ns{rnd.randrange(namespaces)}"
        entity = f"u{rnd.randrange(2)}"
        kind = rnd.choices(["write", "read", "delete", "restore"], [5, 4, 1, 1])[0]
        meta = None
        op: Payload
        if kind == "write":
            slot = rnd.choice(["drink", "city"])
            fact = f"{slot}-{rnd.randrange(3)}"
            seq = next_seq(skew=rnd.random() < 0.2)
            level = "none" if fact not in written else rnd.choice(CLAIMABLE_LEVELS)
            written.add(fact)
            op = Write(ns, entity, slot, f"{fact}@{seq}", seq, f"op{seq}")
            meta = WriteMeta(fact, slot, level)  # type: ignore[arg-type]
            store.meta[op.op_id] = meta
        elif kind == "read":
            op = Read(ns, entity)
        elif kind == "delete":
            op = Delete(ns, entity, next_seq(skew=False), f"del{clock}")
        else:
            op = Restore(ns, entity, next_seq(skew=False), f"res{clock}")
        fate = "normal"
        if faults:
            fate = rnd.choices(["normal", "lost_ack", "unknown"], [6, 1, 1])[0]
        in_flight[worker] = _InFlight(recorder.invoke(worker, op, meta=meta), fate)

    def step(worker: int) -> None:
        job = in_flight[worker]
        if job.fate == "unknown":
            del in_flight[worker]
            recorder.info(job.invocation, "TimeoutError: no answer")
            if rnd.random() < 0.5:
                limbo.append(job.invocation.op)
        elif job.result is None:
            job.result = store.apply(job.invocation.op)
        else:
            del in_flight[worker]
            if job.fate == "lost_ack":
                recorder.info(job.invocation, "ConnectionError: reset after apply")
            elif isinstance(job.result, Ack) and not job.result.applied:
                recorder.fail(job.invocation, job.result)
            else:
                recorder.ok(job.invocation, job.result)

    for _ in range(steps):
        if limbo and rnd.random() < 0.1:
            store.apply(limbo.pop(rnd.randrange(len(limbo))))
        worker = rnd.randrange(workers)
        if worker in in_flight:
            step(worker)
        else:
            start(worker)
    while in_flight:
        step(next(iter(in_flight)))
    return recorder.history()


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    steps=st.integers(10, 150),
    workers=st.integers(1, 4),
    namespaces=st.integers(1, 2),
)
def test_a_correct_store_is_never_flagged(seed, steps, workers, namespaces):
    online = CheckerSuite()
    history = run(
        seed,
        steps=steps,
        workers=workers,
        namespaces=namespaces,
        faults=True,
        observers=[online.observe],
    )
    results = check_history(history)
    flagged = {name: r.violations[:1] for name, r in results.items() if r.violation_count}
    assert not flagged
    assert online.results() == results


def _sequential(seed: int, steps: int) -> History:
    return run(seed, steps=steps, workers=1, namespaces=1, faults=False)


def _with_result(history: History, completion: Entry, records: tuple[Record, ...]) -> History:
    entries = list(history)
    entries[completion.index] = replace(completion, result=records)
    return History(entries)


def _reads_with_records(history: History) -> list[Entry]:
    return [e for e in history if e.f == "read" and e.type == "ok" and e.result]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(30, 150), pick=st.randoms())
def test_dropping_a_record_is_caught_as_lost(seed, steps, pick):
    history = _sequential(seed, steps)
    reads = _reads_with_records(history)
    assume(reads)
    read = pick.choice(reads)
    records = list(read.result)
    records.pop(pick.randrange(len(records)))
    results = check_history(_with_result(history, read, tuple(records)))
    assert results["durability"].validity is Validity.INVALID


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(40, 200), pick=st.randoms())
def test_serving_a_superseded_fact_is_caught(seed, steps, pick):
    history = _sequential(seed, steps)
    writes = {
        e.op.value: e for e in history if e.f == "write" and e.type == "ok"
    }  # completions of acknowledged writes, by value
    candidates = []
    for read in _reads_with_records(history):
        for position, record in enumerate(read.result):
            current = writes[record.value]
            for old in writes.values():
                if (
                    old.index < read.index
                    and old.op.entity_id == read.op.entity_id
                    and old.meta.slot == current.meta.slot
                    and old.meta.fact != current.meta.fact
                ):
                    candidates.append((read, position, old))
    assume(candidates)
    read, position, old = pick.choice(candidates)
    records = list(read.result)
    records[position] = replace(records[position], value=old.op.value)
    results = check_history(_with_result(history, read, tuple(records)))
    kinds = {v.kind for r in results.values() for v in r.violations}
    assert kinds and kinds <= {"reorder", "resurrection"}


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(30, 150), pick=st.randoms())
def test_adding_a_value_no_write_produced_is_caught_as_phantom(seed, steps, pick):
    history = _sequential(seed, steps)
    reads = [e for e in history if e.f == "read" and e.type == "ok"]
    assume(reads)
    read = pick.choice(reads)
    ghost = Record(read.op.entity_id, "drink", "never written", 10**6, 1)
    results = check_history(_with_result(history, read, (*read.result, ghost)))
    assert results["phantom"].validity is Validity.INVALID
