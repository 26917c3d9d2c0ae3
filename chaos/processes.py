"""Worker processes: the plan's workers spread over processes that share one history.

The history stays in this process. Workers in other processes reach the recorder and
the Lamport clock through a multiprocessing manager served from a thread here, so an
invocation gets its index *before* the operation starts (the call returns first), and
real-time order in the history stays sound: an operation can only look longer than it
was, never shorter. ``CLOCK_MONOTONIC`` is system-wide, so one deadline serves all.

Each child counts its steps in a shared counter of its own and looks at a shared stop
flag before each step; this process reads the one and sets the other at every
:data:`TICK_S`, which is how a progress bar moves and ``--fail-fast`` stops workers in
other processes (a pair of shared-memory operations per step, against the two calls to
this process's manager each step makes anyway).

A plan whose ``processes`` table has ``kill_at`` is a crash test of a library backend
(the ``crash_worker`` scenario): at each of those fractions of the budget one worker
process is frozen (SIGSTOP) while it has an operation in flight, then killed (SIGKILL),
its operations in flight are recorded as unknown, and a fresh process takes over the
steps its workers had not begun, as a supervisor would restart it. The kill and the
restart are noted as nemesis events, so the crash coverage conditions and the
durability checker judge them exactly as they judge a crash of a service.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import pickle
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.context import SpawnProcess
from multiprocessing.managers import BaseManager
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as SharedEvent
from queue import Empty
from typing import Any

from invariants.errors import InvalidArgument
from invariants.factory import load_factory
from invariants.history import Entry, HistoryRecorder
from scenarios.plan import Plan

from .faults import LamportClock
from .freeze import freeze, thaw
from .runner import RunResult, run_workers

__all__ = ["run_in_processes"]

TICK_S = 0.1
"""How often this process passes the children's steps on and their stop flag down."""
IN_FLIGHT_WAIT_S = 1.0
"""How long a kill waits, thawing and freezing again, for an operation in flight."""
SETTLE_S = 0.02
"""How long a frozen child's last calls to this process's manager get to land before
the kill looks for an operation in flight; one that lands later is refused
(:class:`_Counting`)."""


class _Client(BaseManager):
    """The worker side: only the names, the objects live in the parent."""


_Client.register("recorder")
_Client.register("clock")


class _Counting:
    """The recorder as the children see it: it also counts each worker's invocations, so
    that a process taking over a killed one knows which steps were begun, and its
    acknowledged writes, so that a kill has something to lose.

    Each child records through a door of its own (:meth:`door`), which a kill shuts
    (:meth:`shut`) once the child is dead: a call the child sent just before it was
    frozen may still be on its way through the manager, and an invocation recorded after
    the kill would stay outstanding for the worker the next process takes over. Every
    call is recorded under one lock, so a call is either recorded before the door shuts,
    and the kill sees it, or refused: an invocation refused never reached the backend
    (the child waits for its index first), and a completion refused leaves the
    operation unknown, as the kill recorded it.
    """

    def __init__(self, recorder: HistoryRecorder) -> None:
        self.recorder = recorder
        self.invoked: dict[int, int] = {}
        self.acknowledged: dict[int, int] = {}
        """Per worker, its writes answered ``applied``."""
        self._shut: set[int] = set()
        self._lock = threading.Lock()

    def door(self, number: int) -> _Door:
        return _Door(self, number)

    def shut(self, number: int) -> None:
        """Refuse whatever child ``number`` sends from now on."""
        with self._lock:
            self._shut.add(number)

    def invoke(self, number: int, worker: int, op: Any, **kwargs: Any) -> Entry:
        with self._lock:
            self._check(number)
            self.invoked[worker] = self.invoked.get(worker, 0) + 1
            return self.recorder.invoke(worker, op, **kwargs)

    def complete(self, number: int, etype: str, invocation: Entry, result: Any) -> Entry:
        with self._lock:
            self._check(number)
            if etype == "ok":
                if invocation.f == "write" and getattr(result, "applied", False):
                    worker = invocation.worker
                    self.acknowledged[worker] = self.acknowledged.get(worker, 0) + 1
                return self.recorder.ok(invocation, result)
            if etype == "fail":
                return self.recorder.fail(invocation, result)
            return self.recorder.info(invocation, result)

    def _check(self, number: int) -> None:
        if number in self._shut:
            raise RuntimeError(f"worker process {number} was killed; its call is refused")


class _Door:
    """One child's recorder: the calls the runner makes, through :class:`_Counting`."""

    def __init__(self, counting: _Counting, number: int) -> None:
        self._counting = counting
        self._number = number

    def invoke(self, worker: int, op: Any, **kwargs: Any) -> Entry:
        return self._counting.invoke(self._number, worker, op, **kwargs)

    def ok(self, invocation: Entry, result: Any) -> Entry:
        return self._counting.complete(self._number, "ok", invocation, result)

    def fail(self, invocation: Entry, error: Any) -> Entry:
        return self._counting.complete(self._number, "fail", invocation, error)

    def info(self, invocation: Entry, error: Any) -> Entry:
        return self._counting.complete(self._number, "info", invocation, error)


@dataclasses.dataclass
class _Child:
    """One worker process: its workers (by number in the plan), and its step counter."""

    which: list[int]
    process: SpawnProcess
    number: int
    steps: Any


@dataclasses.dataclass(frozen=True)
class _Flag:
    """The stop flag: a shared byte, read and set without a lock. A worker process looks
    at it before every step, and one killed while it held an Event's lock would leave
    this process waiting on that lock for ever."""

    raw: Any

    def is_set(self) -> bool:
        return bool(self.raw.value)

    def set(self) -> None:
        self.raw.value = 1


def run_in_processes(spec: str, plan: Plan, recorder: HistoryRecorder, clock: LamportClock,
                     deadline: float, processes: int, first_worker: int,
                     on_step: Callable[[], None] | None = None,
                     stop: threading.Event | None = None,
                     kill_at: Sequence[float] = ()) -> RunResult:
    """Run the plan's workers in ``processes`` spawned processes and merge their results.

    ``on_step`` is called here once per step the children took, a tick's worth at a
    time; once ``stop`` is set, the children's workers stop before their next step.
    ``kill_at`` lists fractions of the run (by steps done or by time to ``deadline``,
    whichever is further) at which one worker process is killed mid-operation and
    replaced (see the module's docstring).
    """
    if getattr(load_factory(spec), "shares_across_processes", True) is False:
        raise InvalidArgument(
            f"backend {spec!r} keeps its store inside one process, so worker processes "
            "would each see an empty store of their own; run it with threads only")

    counting = _Counting(recorder)

    class _Hub(BaseManager):
        """This run's server; a class per run, because registration is per class."""

    _Hub.register("recorder", callable=counting.door)
    _Hub.register("clock", callable=lambda: clock)
    authkey = secrets.token_bytes(16)
    server = _Hub(address=("127.0.0.1", 0), authkey=authkey).get_server()
    serving = threading.Thread(target=_serve, args=(server,), name="memcert-hub", daemon=True)
    serving.start()
    context = multiprocessing.get_context("spawn")
    counters: list[Any] = []
    ready: Synchronized[int] = context.Value("q", 0)
    ends: Synchronized[float] = context.Value("d", 0.0)
    go, halt = context.Event(), _Flag(context.RawValue("b", 0))
    results: Any = context.Queue()
    merged = RunResult(plan.scenario, plan.size)

    def spawn(which: list[int], run: Plan, number: int) -> _Child:
        # A counter without a lock, written by its child alone: a child killed while it
        # held a shared counter's lock would leave this process waiting on it for ever.
        steps = context.RawValue("q", 0)
        counters.append(steps)
        process = context.Process(
            target=_child, name=f"memcert-worker-{number}", daemon=True,
            args=(spec, run, which, first_worker, server.address, authkey,
                  _Shared(steps, ready, ends, go, halt), results, number))
        process.start()
        return _Child(which, process, number, steps)

    shares = [list(range(len(plan.workers)))[p::processes] for p in range(processes)]
    children = {n: spawn(share, plan, n) for n, share in enumerate(shares) if share}
    running = dict(children)
    told = 0
    try:
        # The budget starts once every process has imported the backend: starting a
        # Python process takes seconds on a loaded machine, and a share of a few seconds
        # would otherwise go to imports.
        deadline = _start(ready, len(children), ends, go, deadline, running, results)
        started = time.monotonic()
        kills = list(kill_at)
        while running:
            told = _tick(counters, told, on_step)
            if stop is not None and stop.is_set():
                halt.set()
            if kills and _progress(_taken(counters), plan.size, started, deadline) >= kills[0] \
                    and not halt.is_set():
                victim = _victim(running, len(merged.nemesis) // 2, counting, first_worker)
                if victim is not None:
                    kills.pop(0)
                    _kill(victim, counting, first_worker, merged, started)
                    del running[victim.number]
                    number = max(children) + 1
                    rest = _remaining(plan, victim.which, counting, first_worker)
                    begin = len(recorder)
                    children[number] = running[number] = spawn(victim.which, rest, number)
                    _note(merged, "restart", recorder, begin, victim, started)
            _collect(results, running, merged)
        _tick(counters, told, on_step)
    finally:
        halt.set()
        for child in children.values():
            child.process.join(5)
            if child.process.is_alive():
                child.process.kill()
                child.process.join()
        # serve_forever creates stop_event and polls it; the listener must close too.
        # Neither attribute is in typeshed's stub of Server.
        server.stop_event.set()  # type: ignore[attr-defined]
        server.listener.close()  # type: ignore[attr-defined]
    merged.steps_done = _taken(counters)
    return merged


@dataclasses.dataclass(frozen=True)
class _Shared:
    """What a child shares with this process: its steps taken (its own counter), the
    processes ready, when the budget ends, the signal to begin, and the signal to stop."""

    steps: Any
    ready: Synchronized[int]
    ends: Synchronized[float]
    go: SharedEvent
    halt: _Flag


def _start(ready: Synchronized[int], count: int, ends: Synchronized[float], go: SharedEvent,
           deadline: float, running: dict[int, _Child], results: Any) -> float:
    """Wait until ``count`` children are ready, then give them the deadline, moved on by
    the time they took to start, and let them begin; returns the deadline."""
    waited_from = time.monotonic()
    while ready.value < count:
        if any(not child.process.is_alive() for child in running.values()):
            _collect(results, running, RunResult("", 0))
            raise RuntimeError("a worker process died before it was ready")
        time.sleep(0.01)
    moved = deadline + (time.monotonic() - waited_from)
    ends.value = moved
    go.set()
    return moved


def _progress(done: int, planned: int, started: float, deadline: float) -> float:
    """How far through the plan the run is, by steps done or by time spent, whichever is
    further, as the nemesis counts it: a fast backend finishes its steps well before its
    budget, and the kills must still fall inside the run."""
    by_time = (time.monotonic() - started) / max(deadline - started, 1e-9)
    return max(done / max(planned, 1), by_time)


def _victim(running: dict[int, _Child], kills_so_far: int, counting: _Counting,
            first_worker: int) -> _Child | None:
    """The process to kill next, each kill a different one of those running, in turn; or
    None until one has had a write acknowledged, since a kill before any proves nothing
    about what a crash keeps (the kill then waits for the next tick). A process is a
    victim only once it has taken a step of its own: before that it may hold the lock of
    the counter of processes ready, which no one would release."""
    alive = [child for child in running.values()
             if child.process.is_alive() and child.steps.value > 0]
    ready = [child for child in alive
             if any(counting.acknowledged.get(first_worker + k) for k in child.which)]
    if not ready:
        return None
    return ready[kills_so_far % len(ready)]


def _kill(victim: _Child, counting: _Counting, first_worker: int, merged: RunResult,
          started: float) -> None:
    """Freeze ``victim`` with an operation in flight, SIGKILL it, and record what it had
    in flight as unknown."""
    recorder = counting.recorder
    workers = {first_worker + k for k in victim.which}
    pid = victim.process.pid
    assert pid is not None
    waited = time.monotonic() + IN_FLIGHT_WAIT_S
    while True:
        freeze(pid)
        time.sleep(SETTLE_S)
        if recorder.outstanding_of(workers) or time.monotonic() >= waited:
            break
        thaw(pid)
        time.sleep(0.001)
    begin = len(recorder)
    victim.process.kill()
    victim.process.join()
    counting.shut(victim.number)
    for invocation in recorder.outstanding_of(workers):
        recorder.info(invocation, "worker process killed with SIGKILL, the operation in "
                                  "flight (injected)")
    merged.nemesis.append(_event("kill", begin, len(recorder), workers, victim, started))
    merged.faults_fired["kill"] = merged.faults_fired.get("kill", 0) + 1


def _note(merged: RunResult, do: str, recorder: HistoryRecorder, begin: int, victim: _Child,
          started: float) -> None:
    workers = {int(w) for w in merged.nemesis[-1]["workers"]}
    merged.nemesis.append(_event(do, begin, len(recorder), workers, victim, started))
    merged.faults_fired[do] = merged.faults_fired.get(do, 0) + 1


def _event(do: str, begin: int, end: int, workers: set[int], victim: _Child,
           started: float) -> dict[str, Any]:
    return {"do": do, "process": victim.number, "t_s": round(time.monotonic() - started, 3),
            "begin": begin, "end": end, "workers": sorted(workers)}


def _remaining(plan: Plan, which: Sequence[int], counting: _Counting,
               first_worker: int) -> Plan:
    """The plan with each of ``which``'s workers left only the steps it had not begun."""
    steps = list(plan.workers)
    for k in which:
        steps[k] = steps[k][counting.invoked.get(first_worker + k, 0):]
    return dataclasses.replace(plan, workers=tuple(steps))


def _collect(results: Any, running: dict[int, _Child], merged: RunResult) -> None:
    """Fold in what children finished within a tick; a child that died unkilled is an
    error of the run, raised with what it said."""
    try:
        number, part = results.get(timeout=TICK_S)
    except Empty:
        for number, child in list(running.items()):
            if not child.process.is_alive() and child.process.exitcode not in (0, None):
                raise RuntimeError(f"worker process {number} died with exit code "
                                   f"{child.process.exitcode} before it finished") from None
        return
    running.pop(number, None)
    if isinstance(part, BaseException):
        raise part
    merged.budget_exhausted |= part.budget_exhausted
    merged.stopped |= part.stopped
    merged.restore_supported &= part.restore_supported
    for name, count in part.faults_fired.items():
        merged.faults_fired[name] = merged.faults_fired.get(name, 0) + count


def _serve(server: Any) -> None:
    """Serve until stopped; the stdlib ends serve_forever with sys.exit, meant for a process."""
    with contextlib.suppress(SystemExit):
        server.serve_forever()


def _taken(counters: Sequence[Any]) -> int:
    """The steps every child has taken, those killed included."""
    return sum(counter.value for counter in counters)


def _tick(counters: Sequence[Any], told: int, on_step: Callable[[], None] | None) -> int:
    """Tell ``on_step`` of the steps taken since ``told``; returns the steps taken."""
    taken = _taken(counters)
    if on_step is not None:
        for _ in range(taken - told):
            on_step()
    return taken


def _child(spec: str, plan: Plan, which: list[int], first_worker: int, address: Any,
           authkey: bytes, shared: _Shared, results: Any, number: int) -> None:
    """A worker process: import the backend and open a first handle, say it is ready,
    wait for the signal to begin, run its workers as threads, and send back the result
    or the error (an error crosses the queue as an exception, pickled)."""

    lock = threading.Lock()

    def counted() -> None:
        with lock:  # this process's threads share its counter
            shared.steps.value += 1

    try:
        client = _Client(address=address, authkey=authkey)
        client.connect()
        recorder = client.recorder(number)  # type: ignore[attr-defined]
        clock = client.clock()  # type: ignore[attr-defined]
        factory = load_factory(spec)
        # One handle opened and closed before the budget starts: a backend's first handle
        # in a process (an engine, a schema check, a model) is the slow one.
        factory().close()
        with shared.ready.get_lock():
            shared.ready.value += 1
        shared.go.wait()
        part: RunResult | BaseException = run_workers(
            factory, plan, which, recorder, clock, shared.ends.value, first_worker,
            on_step=counted, stop=shared.halt)
    except BaseException as error:
        part = _picklable(error)
    results.put((number, part))


def _picklable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling both ways, else a RuntimeError that says what it
    was: an exception whose constructor takes other arguments than its message pickles
    fine and fails only in the parent, which would then report the unpickling instead."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error
