"""What the runner costs: one plan executed directly, then through ``run_plan``.

The same operations (a fixed, seeded mix of writes, reads, deletes and restores, then
one final read of every entity, as the runner does) go to a fresh store in four ways,
interleaved round by round:

- *direct*: a plain loop that builds each operation and calls the backend;
- ``run_plan`` with one worker and a recorder that keeps nothing (the runner alone);
- the same, with the recorder streaming ``history.jsonl``;
- the same, with the online checkers observing as ``memcert certify`` attaches them.

Overhead is time(run_plan) / time(direct) - 1. On the in-memory example backend an
operation costs a few microseconds, so that ratio is the harness measured against
almost nothing; on the reference store on a SQLite file it is the harness measured
against a real store, which is what the target is about. The absolute harness cost
per operation is printed for both and should agree.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from chaos.examples import InMemoryBackend, SharedFactory
from chaos.faults import LamportClock
from chaos.plan import Plan, Step
from chaos.runner import run_plan
from invariants.backend import BackendFactory, Delete, MemoryBackend, Restore, Write
from invariants.checkers import CheckerSuite
from invariants.history import HistoryRecorder
from reference_store import ReferenceStore

from .timing import median

TARGET = 0.25
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
    times: list[float] = field(default_factory=list)


def _direct(factory: BackendFactory, steps: tuple[Step, ...], folder: Path) -> None:
    backend = factory()
    direct(backend, steps)
    backend.close()


def _through_runner(*, file: bool, online: bool) -> Callable[
        [BackendFactory, tuple[Step, ...], Path], None]:
    def run(factory: BackendFactory, steps: tuple[Step, ...], folder: Path) -> None:
        observers = [CheckerSuite(level=LEVEL).observe] if online else []
        path = folder / "history.jsonl" if file else None
        with HistoryRecorder(path, keep=False, observers=observers) as recorder:
            run_plan(factory, Plan("bench", 0, (steps,)), recorder, budget_s=3600,
                     clock=LamportClock())
    return run


def measure(name: str, factory: BackendFactory, ops: int, rounds: int,
            folder: Path) -> dict[str, float]:
    steps = plan_steps(ops)
    ways = [
        _Way("direct calls (baseline)", _direct),
        _Way("run_plan, recorder in memory", _through_runner(file=False, online=False)),
        _Way("run_plan + history.jsonl", _through_runner(file=True, online=False)),
        _Way("run_plan + history.jsonl + online checkers (as certify)",
             _through_runner(file=True, online=True)),
    ]
    resetter = factory()
    for k in range(rounds + 1):  # the first round warms up and is not counted
        for way in ways if k % 2 else reversed(ways):
            resetter.reset()
            start = time.perf_counter()
            way.run(factory, steps, folder)
            if k:
                way.times.append(time.perf_counter() - start)
    resetter.close()
    ops_run = ops + len({s.entity_id for s in steps})
    base = median(ways[0].times)
    print(f"\n### {name}")
    print(f"{ops:,} planned operations + {ops_run - ops} final reads, one worker; "
          f"{rounds} interleaved rounds, the median is shown.\n")
    print("| way | s | µs/op | overhead vs direct | harness µs/op |")
    print("|---|---:|---:|---:|---:|")
    figures: dict[str, float] = {}
    for way in ways:
        seconds = median(way.times)
        overhead = seconds / base - 1
        print(f"| {way.name} | {seconds:.3f} | {seconds / ops_run * 1e6:,.1f} | "
              f"{'—' if way is ways[0] else f'{overhead:+.1%}'} | "
              f"{'—' if way is ways[0] else f'{(seconds - base) / ops_run * 1e6:,.1f}'} |")
    full = median(ways[-1].times) / base - 1
    figures["overhead"] = full
    figures["harness_us_per_op"] = (median(ways[-1].times) - base) / ops_run * 1e6
    return figures


def run(rounds: int = 5) -> dict[str, float]:
    print("\n## Runner overhead (run_plan vs calling the backend directly)")
    with tempfile.TemporaryDirectory(prefix="memcert-bench-") as tmp:
        folder = Path(tmp)

        def reference() -> ReferenceStore:
            return ReferenceStore(folder / "ref.sqlite3")

        ref = measure("Reference store, SQLite file (WAL, synchronous=NORMAL)", reference,
                      4_000, rounds, folder)
        mem = measure("In-memory example backend (chaos.examples.InMemoryBackend)",
                      SharedFactory(InMemoryBackend, LEVEL), 20_000, rounds, folder)
    print(f"\noverhead on the reference store = {ref['overhead']:+.1%} (target <= "
          f"{TARGET:.0%}): {'met' if ref['overhead'] <= TARGET else 'NOT met'}; "
          f"on the in-memory backend = {mem['overhead']:+.0%}, which is the harness's own "
          f"{mem['harness_us_per_op']:.0f} µs/op against a backend that costs almost "
          "nothing (not judged).")
    return {"overhead_reference": ref["overhead"], "overhead_in_memory": mem["overhead"],
            "harness_us_per_op": mem["harness_us_per_op"]}
