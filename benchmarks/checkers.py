"""Checker throughput on synthetic histories of 10k, 100k and 1M operations.

An operation is an invocation and its completion, two history entries. The histories
are built directly as :class:`Entry` objects by a small model of a correct backend, so
they are generated in seconds, deterministically from a seed, and check as valid; they
have the shape of a real ``memcert certify`` run (see :func:`synthetic_entries`).

Every size is checked with all checkers (``check_history``) in interleaved rounds,
together with a bare pass over the same history as the in-run baseline: pairing each
completion with its invocation, the least any checker must do. ``read_history``
(decoding ``history.jsonl``) is timed on its own, since certify pays it before checking.
"""

from __future__ import annotations

import gc
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.checkers import check_history
from invariants.history import (
    Entry,
    EntryType,
    History,
    OpName,
    Paraphrase,
    Payload,
    Read,
    Result,
    WriteMeta,
    collector_paused,
    read_history,
)
from invariants.verdict import Validity

from .timing import median

_T = TypeVar("_T")

SIZES = (10_000, 100_000, 1_000_000)
TARGET_OPS_PER_S = 250_000
TARGET_SCALING = 12.0

NAMESPACES = ("bench", "tenant-b")
ENTITIES = 16
SLOTS = ("city", "job", "coffee_preference")
WRITES, READS, RESTORES = 0.68, 0.30, 0.01
"""Shares of the operations; deletes take what is left, and only every other entity
gets them, so about half the reads are of an entity that was once deleted."""
PARAPHRASES: tuple[Paraphrase, ...] = ("surface", "lexical", "semantic")
_F: dict[type, OpName] = {Write: "write", Read: "read", Delete: "delete", Restore: "restore"}


@dataclass(slots=True)
class _Slot:
    record: Record
    fact: str


@dataclass(slots=True)
class _Entity:
    """What a correct backend holds for one (namespace, entity)."""

    entity_id: str
    slots: dict[str, _Slot] = field(default_factory=dict)
    facts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """slot -> the (fact, text) pairs written to it, for paraphrases of recent facts."""
    deleted: bool = False
    delete_seq: int = -1
    version: int = 0


@dataclass(slots=True)
class _Pending:
    invocation: Entry
    entity: _Entity


class _Generator:
    """Random workers against a model of a correct backend, one entry at a time.

    Each step either completes the chosen worker's outstanding operation or invokes its
    next one, so about half the workers have an operation in flight at any moment and
    completions arrive out of invocation order. An operation takes effect at its
    completion, which is what makes the model's answers correct. Writes draw causal
    seqs from one Lamport clock when invoked; overlap alone then makes some arrive
    stale, and a few more lag on purpose (a client with a slow clock).

    Only writes end in ``info`` (applied or not, at random): an ``info`` delete would
    leave its entity's later reads unjudgeable for durability and staleness, so a
    history with them would measure checks skipped rather than checks made.
    """

    def __init__(self, seed: int, workers: int) -> None:
        self.rng = random.Random(seed)
        self.workers = workers
        self.entries: list[Entry] = []
        self.time_ns = 1_000_000
        self.clock = 0
        self.serial = 0
        self.outstanding: dict[int, _Pending] = {}
        self.entities = [
            (ns, _Entity(f"user-{k}")) for ns in NAMESPACES for k in range(ENTITIES)
        ]
        self.deleted: list[tuple[str, _Entity]] = []

    def run(self, ops: int) -> list[Entry]:
        rng = self.rng
        invoked = 0
        while invoked < ops:
            worker = rng.randrange(self.workers)
            if worker in self.outstanding:
                self._complete(worker)
            else:
                self._invoke(worker)
                invoked += 1
        for worker in sorted(self.outstanding):
            self._complete(worker)
        return self.entries

    def _append(
        self, worker: int, etype: EntryType, op: Payload, result: Result, meta: WriteMeta | None
    ) -> Entry:
        self.time_ns += self.rng.randrange(200, 5_000)
        entry = Entry(len(self.entries), worker, self.time_ns, etype, _F[type(op)], op, result,
                      meta)
        self.entries.append(entry)
        return entry

    def _invoke(self, worker: int) -> None:
        rng = self.rng
        roll = rng.random()
        op: Payload
        meta = None
        if roll < WRITES + READS:
            ns, ent = self.entities[rng.randrange(len(self.entities))]
            if roll < WRITES:
                op, meta = self._write(worker, ns, ent)
            else:
                op = Read(ns, ent.entity_id)
        elif roll < 1 - RESTORES or not self.deleted:
            ns, ent = self.entities[2 * rng.randrange(len(self.entities) // 2)]
            op = Delete(ns, ent.entity_id, self._tick(), self._op_id(worker), "bench")
        else:
            ns, ent = self.deleted[rng.randrange(len(self.deleted))]
            op = Restore(ns, ent.entity_id, self._tick(), self._op_id(worker))
        invocation = self._append(worker, "invoke", op, None, meta)
        self.outstanding[worker] = _Pending(invocation, ent)

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _op_id(self, worker: int) -> str:
        self.serial += 1
        return f"op-{worker}-{self.serial}"

    def _write(self, worker: int, ns: str, ent: _Entity) -> tuple[Write, WriteMeta]:
        """A new fact (67%), a paraphrase of one of the slot's recent facts (18%), or one
        of them in the very same wording again (15%), as in a certify run."""
        rng = self.rng
        slot = SLOTS[rng.randrange(len(SLOTS))]
        seq = self._tick()
        if rng.random() < 0.02:
            seq = max(1, seq - rng.randrange(1, 50))
        known = ent.facts.setdefault(slot, [])
        roll = rng.random()
        attribute = slot
        paraphrase: Paraphrase = "none"
        if known and roll < 0.15:
            fact, value = known[rng.randrange(len(known))]
        elif known and roll < 0.33:
            fact, plain = known[-1 - rng.randrange(min(3, len(known)))]
            paraphrase = PARAPHRASES[rng.randrange(3)]
            value = f"{plain} ({paraphrase} {self.serial})"
            if paraphrase == "surface":
                attribute = slot.replace("_", " ").title()
        else:
            fact = f"f{self.serial}"
            value = f"{slot} fact {self.serial} of {ns}/{ent.entity_id}"
            known.append((fact, value))
            if len(known) > 8:
                del known[0]
        op = Write(ns, ent.entity_id, attribute, value, seq, self._op_id(worker))
        return op, WriteMeta(fact, slot, paraphrase)

    def _complete(self, worker: int) -> None:
        pending = self.outstanding.pop(worker)
        inv, ent = pending.invocation, pending.entity
        op = inv.op
        rng = self.rng
        etype: EntryType
        result: Result
        if type(op) is Read:
            if rng.random() < 0.005:
                etype, result = "fail", "ConnectionError: connection refused"
            else:
                etype = "ok"
                result = () if ent.deleted else tuple(
                    sorted((s.record for s in ent.slots.values()), key=_seq_and_version))
        elif type(op) is Write:
            assert inv.meta is not None
            if rng.random() < 0.03:
                etype, result = "info", "LostAcknowledgement: the answer was lost"
                if rng.random() < 0.5:
                    self._apply_write(ent, op, inv.meta)
            else:
                ack = self._apply_write(ent, op, inv.meta)
                etype, result = ("ok" if ack.applied else "fail"), ack
        else:
            if type(op) is Delete:
                ack = self._apply_delete(ent, op)
            else:
                assert isinstance(op, Restore)
                ack = self._apply_restore(ent, op)
            etype, result = ("ok" if ack.applied else "fail"), ack
        self._append(worker, etype, op, result, inv.meta)

    def _apply_write(self, ent: _Entity, op: Write, meta: WriteMeta) -> Ack:
        ent.version += 1
        if ent.deleted:
            return Ack(False, reason="tombstoned")
        if op.causal_seq <= ent.delete_seq:
            return Ack(False, reason="predates_delete")
        current = ent.slots.get(meta.slot)
        if current is not None:
            if op.causal_seq < current.record.causal_seq:
                return Ack(False, version=current.record.version, reason="stale")
            if current.fact == meta.fact:
                # A paraphrase merges: the stored wording stays, its causal_seq advances.
                r = current.record
                current.record = Record(r.entity_id, r.attribute, r.value, op.causal_seq,
                                        r.version)
                return Ack(True, version=r.version, reason="merged")
        record = Record(op.entity_id, op.attribute, op.value, op.causal_seq, ent.version)
        ent.slots[meta.slot] = _Slot(record, meta.fact)
        return Ack(True, version=ent.version)

    def _apply_delete(self, ent: _Entity, op: Delete) -> Ack:
        ent.version += 1
        if not ent.deleted:
            self.deleted.append((op.namespace, ent))
        ent.deleted = True
        ent.delete_seq = max(ent.delete_seq, op.causal_seq)
        ent.slots.clear()
        return Ack(True, version=ent.version)

    def _apply_restore(self, ent: _Entity, op: Restore) -> Ack:
        ent.version += 1
        if not ent.deleted:
            return Ack(False, reason="not_deleted")
        if op.causal_seq < ent.delete_seq:
            return Ack(False, reason="stale")
        ent.deleted = False
        self.deleted.remove((op.namespace, ent))
        return Ack(True, version=ent.version)


def _seq_and_version(r: Record) -> tuple[int, int]:
    return r.causal_seq, r.version


def synthetic_entries(ops: int, *, seed: int = 0, workers: int = 8) -> list[Entry]:
    """A history of ``ops`` operations shaped like a certify run, same seed same history.

    ``workers`` threads on 16 entities in each of two namespaces that share entity ids,
    three slots each: 68% writes (a fifth of them paraphrases at the three levels, a
    seventh repeating an earlier wording, some stale, 3% ``info``), 30% reads returning
    what a correct backend would serve (2.5 records on average), and 2% deletes and
    restores. A default certify run of the reference store has the same mix: 30% reads
    of 2.4 records, half of them of an entity once deleted, 67 distinct facts and 82
    distinct values per 100 writes (this generator: 67 and 86).
    """
    with collector_paused():
        return _Generator(seed, workers).run(ops)


def bare_pass(history: History) -> int:
    """The in-run baseline: pair every completion with its invocation, count records."""
    outstanding: dict[int, Entry] = {}
    records = 0
    for entry in history:
        if entry.type == "invoke":
            outstanding[entry.worker] = entry
        else:
            del outstanding[entry.worker]
            if entry.f == "read" and entry.type == "ok":
                records += len(entry.result)  # type: ignore[arg-type]
    return records


def _timed(fn: Callable[..., _T], *args: Any) -> tuple[float, _T]:
    """Seconds ``fn(*args)`` took, and its result.

    A collection runs first, so that no round pays for the garbage an earlier one left.
    """
    seconds, _, result = _timed_cpu(fn, *args)
    return seconds, result


def _timed_cpu(fn: Callable[..., _T], *args: Any) -> tuple[float, float, _T]:
    """Wall seconds and CPU seconds of this process ``fn(*args)`` took, and its result.

    On a shared machine the CPU time says what the code costs; the wall time, which the
    target is judged on, adds whatever the other processes took from it.
    """
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return time.perf_counter() - start, time.process_time() - cpu, result


@contextmanager
def _frozen() -> Iterator[None]:
    """Keep the collector from rescanning what exists now (the histories under test) in
    the collections between timed runs; it still sees everything the runs allocate."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@dataclass
class _Size:
    ops: int
    history: History
    generate_s: float
    validate_s: float
    check_s: list[float] = field(default_factory=list)
    check_cpu_s: list[float] = field(default_factory=list)
    bare_s: list[float] = field(default_factory=list)


def _generate(ops: int, seed: int) -> _Size:
    generate_s, entries = _timed(partial(synthetic_entries, ops, seed=seed))
    validate_s, history = _timed(History, entries)
    return _Size(ops, history, generate_s, validate_s)


def run(sizes: tuple[int, ...] = SIZES, rounds: int = 3, seed: int = 0) -> dict[str, float]:
    measured = [_generate(ops, seed) for ops in sizes]
    verdicts = {name: r.validity for name, r in check_history(measured[0].history).items()}
    with _frozen():
        for _ in range(rounds):
            for size in measured:
                size.bare_s.append(_timed(bare_pass, size.history)[0])
                wall, cpu, _ = _timed_cpu(check_history, size.history)
                size.check_s.append(wall)
                size.check_cpu_s.append(cpu)

    print("\n## Checker throughput (all checkers, `check_history`)")
    print(f"Synthetic histories (seed {seed}) built in memory, {rounds} interleaved rounds; the "
          "median round is shown. An op is an invocation and its completion; the bare pass "
          "only pairs them, as the in-run baseline. The check's time includes freeing its "
          "index. ops/s is judged on wall time; CPU time is this process's alone.\n")
    print("| ops | entries | generate s | validate s | bare pass s | check s | check CPU s "
          "| ops/s | ops/s by CPU | check / bare |\n"
          "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    figures: dict[str, float] = {}
    for size in measured:
        check, bare, cpu = median(size.check_s), median(size.bare_s), median(size.check_cpu_s)
        figures[f"ops_per_s_{size.ops}"] = size.ops / check
        figures[f"cpu_ops_per_s_{size.ops}"] = size.ops / cpu
        print(f"| {size.ops:,} | {len(size.history):,} | {size.generate_s:.2f} | "
              f"{size.validate_s:.2f} | {bare:.3f} | {check:.3f} | {cpu:.3f} | "
              f"{size.ops / check:,.0f} | {size.ops / cpu:,.0f} | {check / bare:.0f} |")
    by_ops = {s.ops: median(s.check_s) for s in measured}
    if 100_000 in by_ops and 1_000_000 in by_ops:
        scaling = figures["scaling"] = by_ops[1_000_000] / by_ops[100_000]
        slowest = min(figures[f"ops_per_s_{ops}"] for ops in by_ops)
        print(f"\nslowest throughput = {slowest:,.0f} ops/s (target >= {TARGET_OPS_PER_S:,}): "
              f"{_met(slowest >= TARGET_OPS_PER_S)}; time(1M) / time(100k) = {scaling:.2f} "
              f"(target <= {TARGET_SCALING:g}): {_met(scaling <= TARGET_SCALING)}.")
    invalid = sorted(n for n, v in verdicts.items() if v is Validity.INVALID)
    print(f"Verdicts on the {measured[0].ops:,}-op history: "
          + (f"INVALID ({', '.join(invalid)}): the generator is wrong." if invalid else
             ", ".join(f"{n} {v.value}" for n, v in verdicts.items()) + "."))
    folder = Path(tempfile.mkdtemp(prefix="memcert-bench-"))
    saved = []
    for size in measured:
        path = folder / f"history-{size.ops}.jsonl"
        size.history.write_jsonl(path)
        saved.append((size.ops, path))
    del measured  # reading back should not compete with a million entries kept in memory
    figures.update(_read_back(saved, rounds))
    folder.rmdir()
    return figures


def _read_back(saved: list[tuple[int, Path]], rounds: int) -> dict[str, float]:
    """Time ``read_history`` on each saved history, then check what was read back.

    That is what certify and replay do. A history read from a file checks slower than
    one built in memory: its strings are new objects, spread over memory, and their
    hashes are computed afresh. The 1M-op file (~0.7 GB) is read and checked once, to
    keep the run short. Each file is deleted once measured.
    """
    print("\n## Reading history.jsonl back, and checking what was read")
    print("`read_history` decodes and validates the file; the check is `check_history` on "
          "its result, as certify does. Rounds run back to back per size; the median is "
          "shown.\n")
    print("| ops | file MB | rounds | read s | read ops/s | check s | check ops/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    figures: dict[str, float] = {}
    for ops, path in saved:
        n = rounds if ops <= 100_000 else 1
        reads: list[float] = []
        for _ in range(n):
            seconds, back = _timed(read_history, path)
            reads.append(seconds)
        with _frozen():
            checks = [_timed(check_history, back)[0] for _ in range(n)]
        del back
        read, check = median(reads), median(checks)
        figures[f"read_ops_per_s_{ops}"] = ops / read
        figures[f"read_back_check_ops_per_s_{ops}"] = ops / check
        print(f"| {ops:,} | {path.stat().st_size / 1e6:,.1f} | {n} | {read:.2f} | "
              f"{ops / read:,.0f} | {check:.3f} | {ops / check:,.0f} |")
        os.remove(path)
    return figures


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"
