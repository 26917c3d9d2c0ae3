"""What the runner costs: one plan executed directly, then through ``run_plan``.

The same operations (a fixed, seeded mix of writes, reads, deletes and restores, then
one final read of every entity, as the runner does) go to a fresh store in seven ways,
interleaved round by round:

- *direct*: a plain loop that builds each operation and calls the backend;
- ``run_plan`` with one worker and a recorder that keeps nothing (the runner alone);
- the same, with the recorder streaming ``history.jsonl`` and flushing every line (the
  recorder's default), then with grouped flushes (``flush_interval_s``);
- the same two, with the online checkers observing each entry as it is recorded, as
  ``memcert certify`` attached them until 2026-11-30;
- grouped flushes with the online checkers deferred to the recorder's writer thread
  (``deferred_observers``), as ``memcert certify`` records.

Every run starts on an empty store. Overhead is time(run_plan) / time(direct) - 1,
taken in each round against that round's direct run, and the median over rounds is
shown, by wall time (judged) and by this process's CPU time. On the in-memory example
backend an operation costs a few microseconds, so that ratio is the harness measured
against almost nothing; on the reference store on a SQLite file it is the harness
measured against a real store, which is what the target is about. The absolute harness
cost per operation is printed for both.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final

from chaos.examples import InMemoryBackend, SharedFactory
from chaos.execute import run_plan
from chaos.faults import LamportClock
from invariants.backend import BackendFactory, Delete, MemoryBackend, Restore, Write
from invariants.checkers import CheckerSuite
from invariants.history import HistoryRecorder
from reference_store import ReferenceStore
from scenarios.plan import Plan, Step

from .timing import median

TARGET = 0.25
FLUSH_INTERVAL_S = 0.1
"""The grouped flushes measured, as ``memcert certify`` is meant to record: lines reach
``history.jsonl`` within this, and the online checkers lag the run by as much."""
CERTIFY_OPS = 12_000
"""About the operations a default ``memcert certify`` runs (12,038 in its five scenarios
on the in-memory example backend, seed 5). The online checkers' trace grows with the
run, and the larger it is the more it costs the store, so a shorter plan would flatter
the harness."""
ENTITIES = 20
SLOTS = ("city", "job", "coffee_preference")
LEVEL: Final = "lexical"


def plan_steps(ops: int, seed: int = 0) -> tuple[Step, ...]:
    """A certify-like mix: 68% writes (a quarter of them paraphrases), 30% reads, 2%
    deletes and restores."""
    rng = random.Random(seed)
    steps = []
    for k in range(ops):
        entity = f"user-{rng.randrange(ENTITIES)}"
        roll = rng.random()
        if roll < 0.68:
            slot = SLOTS[rng.randrange(len(SLOTS))]
            fact = f"f{k if rng.random() < 0.75 else k // 4}"
            paraphrase = "none" if fact == f"f{k}" else "surface"
            value = f"{slot} is value {fact}" + (" !" if paraphrase != "none" else "")
            steps.append(Step("write", "bench", entity, slot, value,
                              {"fact": fact, "slot": slot, "paraphrase": paraphrase}))
        elif roll < 0.98:
            steps.append(Step("read", "bench", entity))
        else:
            steps.append(Step("delete" if roll < 0.99 else "restore", "bench", entity))
    return tuple(steps)


def direct(backend: MemoryBackend, steps: tuple[Step, ...]) -> None:
    """What the runner does per step, minus the runner: build the op, call the backend."""
    clock = LamportClock()
    done = 0
    for step in steps:
        if step.kind == "read":
            backend.read(step.namespace, step.entity_id)
            continue
        seq = clock.next()
        op_id = f"{step.namespace}/0/{done}/{seq}"
        if step.kind == "write":
            assert step.attribute is not None and step.value is not None
            backend.write(Write(step.namespace, step.entity_id, step.attribute, step.value, seq,
                                op_id))
        elif step.kind == "delete":
            backend.delete(Delete(step.namespace, step.entity_id, seq, op_id, reason="memcert"))
        else:
            backend.restore(Restore(step.namespace, step.entity_id, seq, op_id))
        done += 1
    for entity_id in dict.fromkeys(step.entity_id for step in steps):
        backend.read("bench", entity_id)


@dataclass
class _Way:
    name: str
    run: Callable[[BackendFactory, tuple[Step, ...], Path], None]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _direct(factory: BackendFactory, steps: tuple[Step, ...], folder: Path) -> None:
    backend = factory()
    direct(backend, steps)
    backend.close()


def _through_runner(*, file: bool, online: bool, flush_interval_s: float = 0.0,
                    deferred: bool = False) -> Callable[
        [BackendFactory, tuple[Step, ...], Path], None]:
    def run(factory: BackendFactory, steps: tuple[Step, ...], folder: Path) -> None:
        observers = [CheckerSuite(level=LEVEL).observe] if online else []
        path = folder / "history.jsonl" if file else None
        with HistoryRecorder(path, keep=False, flush_interval_s=flush_interval_s,
                             observers=[] if deferred else observers,
                             deferred_observers=observers if deferred else []) as recorder:
            run_plan(factory, Plan("bench", 0, (steps,)), recorder, budget_s=3600,
                     clock=LamportClock())
    return run


FILE_ONLY = f"run_plan + history.jsonl, flushed every {FLUSH_INTERVAL_S:g} s"
PER_LINE = "run_plan + history.jsonl + online checkers, flushed every line"
GROUPED = f"run_plan + history.jsonl + online checkers, flushed every {FLUSH_INTERVAL_S:g} s"
DEFERRED = f"{GROUPED}, checkers deferred to the writer"


def measure(name: str, fresh: Callable[[], BackendFactory], ops: int, rounds: int,
            folder: Path) -> dict[str, float]:
    """Time every way on ``fresh()``, a factory of an empty store made before each run."""
    steps = plan_steps(ops)
    ways = [
        _Way("direct calls (baseline)", _direct),
        _Way("run_plan, recorder in memory", _through_runner(file=False, online=False)),
        _Way("run_plan + history.jsonl, flushed every line",
             _through_runner(file=True, online=False)),
        _Way(FILE_ONLY,
             _through_runner(file=True, online=False, flush_interval_s=FLUSH_INTERVAL_S)),
        _Way(PER_LINE, _through_runner(file=True, online=True)),
        _Way(GROUPED, _through_runner(file=True, online=True,
                                      flush_interval_s=FLUSH_INTERVAL_S)),
        _Way(DEFERRED, _through_runner(file=True, online=True,
                                       flush_interval_s=FLUSH_INTERVAL_S, deferred=True)),
    ]
    for k in range(rounds + 1):  # the first round warms up and is not counted
        for way in ways if k % 2 else reversed(ways):
            factory = fresh()
            start, cpu = time.perf_counter(), time.process_time()
            way.run(factory, steps, folder)
            if k:
                way.wall.append(time.perf_counter() - start)
                way.cpu.append(time.process_time() - cpu)
    ops_run = ops + len({s.entity_id for s in steps})
    base = ways[0]
    print(f"\n### {name}")
    print(f"{ops:,} planned operations + {ops_run - ops} final reads, one worker; "
          f"{rounds} interleaved rounds, each run on an empty store. Times are medians; an "
          "overhead is the median over rounds of the ratio to that round's direct run, with "
          "its range. Wall time is judged; CPU time (all threads of this process) says what "
          "the harness costs whatever else runs on the machine.\n")
    print("| way | wall µs/op | overhead, wall (range) | CPU µs/op | overhead, CPU (range) |")
    print("|---|---:|---:|---:|---:|")
    figures: dict[str, float] = {}
    for way in ways:
        wall, cpu = median(way.wall) / ops_run * 1e6, median(way.cpu) / ops_run * 1e6
        if way is base:
            print(f"| {way.name} | {wall:,.1f} | — | {cpu:,.1f} | — |")
            continue
        by_wall = _ratios(way.wall, base.wall)
        by_cpu = _ratios(way.cpu, base.cpu)
        figures[way.name] = median(by_wall)
        figures[f"{way.name} (CPU)"] = median(by_cpu)
        print(f"| {way.name} | {wall:,.1f} | {_range(by_wall)} | {cpu:,.1f} | "
              f"{_range(by_cpu)} |")
    figures["harness_us_per_op"] = (median(ways[-1].cpu) - median(base.cpu)) / ops_run * 1e6
    return figures


def _ratios(times: list[float], base: list[float]) -> list[float]:
    return sorted(t / b - 1 for t, b in zip(times, base, strict=True))


def _range(ratios: list[float]) -> str:
    return f"{median(ratios):+.1%} ({ratios[0]:+.0%} to {ratios[-1]:+.0%})"


def run(rounds: int = 9) -> dict[str, float]:
    print("\n## Runner overhead (run_plan vs calling the backend directly)")
    with tempfile.TemporaryDirectory(prefix="memcert-bench-") as tmp:
        folder = Path(tmp)
        template = folder / "empty.sqlite3"
        ReferenceStore(template).close()
        path = folder / "ref.sqlite3"

        def fresh_reference() -> BackendFactory:
            # A copy of an empty store, so that no run inherits the WAL or free pages of
            # the one before it (resetting in place made a way's time depend on its place
            # in the round).
            for suffix in ("-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(template, path)
            return partial(ReferenceStore, path)

        shared = SharedFactory(InMemoryBackend, LEVEL)

        def fresh_in_memory() -> BackendFactory:
            handle = shared()
            handle.reset()
            handle.close()
            return shared

        ref = measure("Reference store, SQLite file (WAL, synchronous=NORMAL)", fresh_reference,
                      CERTIFY_OPS, rounds, folder)
        mem = measure("In-memory example backend (chaos.examples.InMemoryBackend)",
                      fresh_in_memory, 20_000, rounds, folder)
    for label, way in (("as certify recorded until 2026-11-30 (every line flushed, checkers "
                        "inline)", PER_LINE),
                       (f"the runner and its history file alone (flushed every "
                        f"{FLUSH_INTERVAL_S:g} s, no online checkers)", FILE_ONLY),
                       (f"as certify records (flushed every {FLUSH_INTERVAL_S:g} s, online "
                        "checkers deferred to the writer)", DEFERRED)):
        print(f"\n{label}: overhead on the reference store = {ref[way]:+.1%} by wall time "
              f"(target <= {TARGET:.0%}): {'met' if ref[way] <= TARGET else 'NOT met'}; "
              f"{ref[f'{way} (CPU)']:+.1%} by CPU time; on the in-memory backend "
              f"{mem[way]:+.0%} (not judged).")
    print(f"The harness costs {mem['harness_us_per_op']:.0f} µs of CPU per operation on the "
          f"in-memory backend and {ref['harness_us_per_op']:.0f} µs on the reference store "
          "(as certify records).")
    return {"overhead_reference": ref[DEFERRED], "overhead_reference_before": ref[PER_LINE],
            "overhead_reference_file_only": ref[FILE_ONLY],
            "overhead_in_memory": mem[DEFERRED], "harness_us_per_op": mem["harness_us_per_op"]}
