"""Execute a plan's steps against a backend with worker threads, under a time budget.

:func:`chaos.execute.run_plan` chooses where the workers run (here, under the nemesis,
or in worker processes) and calls :func:`run_workers` here; this module imports none
of those above it.

The runner is the only place where operations meet a backend. Each worker gets its own
handle from the factory (the contract says handles share one store), wrapped in the
plan's faults. A step draws its causal_seq from the shared Lamport clock when it starts,
is recorded as invoked, runs, and is recorded as ok, fail or info:

- ``Ack(applied=True)`` is ok, ``Ack(applied=False)`` is fail;
- ``NotImplementedError`` from ``restore`` is fail too (the capability is absent, so the
  restore certainly did not happen) and marks the capability missing;
- any other exception is info: the operation may or may not have happened.

When the steps run out or the budget does, the faults are healed (late deliveries land),
and one last read of every entity the plan touched is recorded, so the checkers see the
final state too.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from invariants.backend import (
    Ack,
    BackendFactory,
    Delete,
    MemoryBackend,
    Record,
    Restore,
    Write,
    send,
)
from invariants.history import Entry, Payload, Read, WriteMeta, describe_error
from scenarios.plan import Plan, Step

from .faults import Clock, build_clock, build_faults

__all__ = ["Recorder", "RunResult", "StopFlag", "final_reads", "run_workers"]


@dataclass
class RunResult:
    """What a run did, beyond the history itself: the runner's own coverage."""

    scenario: str
    steps_planned: int
    steps_done: int = 0
    elapsed_s: float = 0.0
    budget_exhausted: bool = False
    faults_fired: dict[str, int] = field(default_factory=dict)
    restore_supported: bool = True
    not_run: str = ""
    """Why the plan did not run at all (its network needs an HTTP backend); "" if it ran."""
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    """What the nemesis did, for a plan with a network (see :class:`chaos.nemesis.Nemesis`)."""
    stopped: bool = False
    """The ``stop`` event ended the run before its plan did."""
    final_reads_s: float = 0.0
    """Of ``elapsed_s``, the time the entities took to be read back at the end."""


@dataclass
class _Worker:
    index: int
    steps: tuple[Step, ...]
    backend: MemoryBackend
    clock: Clock
    done: int = 0


class Recorder(Protocol):
    """What workers need of a history recorder; a proxy to one in another process fits."""

    def invoke(self, worker: int, op: Payload, *, meta: WriteMeta | None = None) -> Entry: ...

    def ok(self, invocation: Entry, result: Ack | Sequence[Record]) -> Entry: ...

    def fail(self, invocation: Entry, result: Ack | str) -> Entry: ...

    def info(self, invocation: Entry, error: BaseException | str) -> Entry: ...


class StopFlag(Protocol):
    """What workers look at before each step: a thread's Event, or a process-shared one."""

    def is_set(self) -> bool: ...


def run_workers(
    factory: BackendFactory,
    plan: Plan,
    which: Iterable[int],
    recorder: Recorder,
    shared: Clock,
    deadline: float,
    first_worker: int,
    on_step: Callable[[], None] | None = None,
    factory_of: Callable[[int], BackendFactory] | None = None,
    stop: StopFlag | None = None,
) -> RunResult:
    """Run the plan's workers numbered ``which`` as threads of this process, then heal.

    A worker's faults draw from a generator seeded by the plan's seed and the worker's
    number, so a worker behaves the same whichever process runs it. ``factory_of``, if
    given, names the factory of each worker's handle (by its number in the plan), so
    that groups of workers can reach the backend by different routes.

    The deadline is moved on by the time the handles took to open, as worker processes'
    is by the time they took to start: a scenario's share of the budget goes to its
    steps, so a loaded machine that is slow to open connections still runs some.
    """
    result = RunResult(plan.scenario, plan.size)
    opening = time.monotonic()
    workers: list[_Worker] = []
    raw_handles: list[MemoryBackend] = []
    for k in which:
        handle = (factory if factory_of is None else factory_of(k))()
        raw_handles.append(handle)
        worker_rng = random.Random((plan.seed << 20) + k)
        workers.append(_Worker(
            first_worker + k, plan.workers[k], build_faults(handle, plan.faults, worker_rng),
            build_clock(shared, plan.faults, worker_rng)))
    deadline += time.monotonic() - opening
    errors: list[BaseException] = []

    def work(worker: _Worker) -> None:
        try:
            for step in worker.steps:
                if time.monotonic() >= deadline:
                    result.budget_exhausted = True
                    return
                if stop is not None and stop.is_set():
                    result.stopped = True
                    return
                if step.pause_s:
                    time.sleep(step.pause_s)
                if not _run_step(worker, step, recorder, shared, result):
                    result.restore_supported = False
                worker.done += 1
                if on_step is not None:
                    on_step()
        except BaseException as error:  # a runner bug must not pass as a quiet short run
            errors.append(error)

    threads = [threading.Thread(target=work, args=(w,), name=f"memcert-worker-{w.index}")
               for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        heal = getattr(worker.backend, "heal", None)
        if heal is not None:
            heal()
        for name, count in _fired(worker.backend, worker.clock).items():
            result.faults_fired[name] = result.faults_fired.get(name, 0) + count
    for handle in raw_handles:
        handle.close()
    if errors:
        raise errors[0]
    result.steps_done = sum(w.done for w in workers)
    return result


def _run_step(worker: _Worker, step: Step, recorder: Recorder, shared: Clock,
              result: RunResult) -> bool:
    """Run one step; returns False if it found restore unsupported."""
    if step.kind == "read":
        invocation = recorder.invoke(worker.index, Read(step.namespace, step.entity_id))
        try:
            records = worker.backend.read(step.namespace, step.entity_id)
        except Exception as error:  # the outcome of a failed read is simply unknown
            recorder.fail(invocation, describe_error(error))
            return True
        recorder.ok(invocation, records)
        if records:
            shared.observe(max(r.causal_seq for r in records))
        return True
    seq = max(0, worker.clock.next() + step.seq_offset)
    op_id = f"{step.namespace}/{worker.index}/{worker.done}/{seq}"
    op: Write | Delete | Restore
    meta = None
    if step.kind == "write":
        assert step.attribute is not None and step.value is not None
        op = Write(step.namespace, step.entity_id, step.attribute, step.value, seq, op_id)
        meta = WriteMeta(step.meta["fact"], step.meta["slot"],
                         step.meta.get("paraphrase", "none"))  # type: ignore[arg-type]
    elif step.kind == "delete":
        op = Delete(step.namespace, step.entity_id, seq, op_id, reason="memcert")
    else:
        op = Restore(step.namespace, step.entity_id, seq, op_id)
    invocation = recorder.invoke(worker.index, op, meta=meta)
    try:
        ack = send(worker.backend, op)
    except NotImplementedError as error:
        if step.kind == "restore":
            recorder.fail(invocation, f"unsupported: {describe_error(error)}")
            return False
        recorder.info(invocation, describe_error(error))
        return True
    except Exception as error:
        recorder.info(invocation, describe_error(error))
        return True
    (recorder.ok if ack.applied else recorder.fail)(invocation, ack)
    return True


def final_reads(backend: MemoryBackend, plan: Plan, recorder: Recorder,
                 worker: int) -> None:
    """Read every entity the plan touched once more, after every fault has healed."""
    seen: dict[tuple[str, str], None] = {}
    for steps in plan.workers:
        for step in steps:
            seen.setdefault((step.namespace, step.entity_id))
    for namespace, entity_id in seen:
        invocation = recorder.invoke(worker, Read(namespace, entity_id))
        try:
            recorder.ok(invocation, backend.read(namespace, entity_id))
        except Exception as error:
            recorder.fail(invocation, describe_error(error))


def _fired(backend: object, clock: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    for layer in (backend, clock):
        while layer is not None:
            name = getattr(layer, "fault_name", None)
            if name is not None:
                counts[name] = counts.get(name, 0) + int(getattr(layer, "fired", 0))
            layer = getattr(layer, "inner", None)
    return counts

