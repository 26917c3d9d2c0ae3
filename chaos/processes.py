"""Worker processes: the plan's workers spread over processes that share one history.

The history stays in this process. Workers in other processes reach the recorder and
the Lamport clock through a multiprocessing manager served from a thread here, so an
invocation gets its index *before* the operation starts (the call returns first), and
real-time order in the history stays sound: an operation can only look longer than it
was, never shorter. ``CLOCK_MONOTONIC`` is system-wide, so one deadline serves all.

The children count their steps in a shared counter and look at a shared stop flag
before each step; this process reads the one and sets the other at every
:data:`TICK_S`, which is how a progress bar moves and ``--fail-fast`` stops workers in
other processes (a pair of shared-memory operations per step, against the two calls to
this process's manager each step makes anyway).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from multiprocessing.managers import BaseManager
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as SharedEvent
from typing import Any

from invariants.errors import InvalidArgument
from invariants.factory import load_factory
from invariants.history import HistoryRecorder
from scenarios.plan import Plan

from .faults import LamportClock
from .runner import RunResult, run_workers

__all__ = ["run_in_processes"]

TICK_S = 0.1
"""How often this process passes the children's steps on and their stop flag down."""


class _Client(BaseManager):
    """The worker side: only the names, the objects live in the parent."""


_Client.register("recorder")
_Client.register("clock")


def run_in_processes(spec: str, plan: Plan, recorder: HistoryRecorder, clock: LamportClock,
                     deadline: float, processes: int, first_worker: int,
                     on_step: Callable[[], None] | None = None,
                     stop: threading.Event | None = None) -> RunResult:
    """Run the plan's workers in ``processes`` spawned processes and merge their results.

    ``on_step`` is called here once per step the children took, a tick's worth at a
    time; once ``stop`` is set, the children's workers stop before their next step.
    """
    if getattr(load_factory(spec), "shares_across_processes", True) is False:
        raise InvalidArgument(
            f"backend {spec!r} keeps its store inside one process, so worker processes "
            "would each see an empty store of their own; run it with threads only")
    class _Hub(BaseManager):
        """This run's server; a class per run, because registration is per class."""

    _Hub.register("recorder", callable=lambda: recorder)
    _Hub.register("clock", callable=lambda: clock)
    authkey = secrets.token_bytes(16)
    server = _Hub(address=("127.0.0.1", 0), authkey=authkey).get_server()
    serving = threading.Thread(target=_serve, args=(server,), name="memcert-hub", daemon=True)
    serving.start()
    shares = [list(range(len(plan.workers)))[p::processes] for p in range(processes)]
    merged = RunResult(plan.scenario, plan.size)
    context = multiprocessing.get_context("spawn")
    steps: Synchronized[int] = context.Value("q", 0)
    halt = context.Event()
    try:
        with ProcessPoolExecutor(max_workers=processes, mp_context=context,
                                 initializer=_share, initargs=(steps, halt)) as pool:
            futures = [pool.submit(_child, spec, plan, share, first_worker, deadline,
                                   server.address, authkey) for share in shares if share]
            told = 0
            while wait(futures, timeout=TICK_S, return_when=FIRST_EXCEPTION).not_done:
                told = _tick(steps, told, on_step)
                if stop is not None and stop.is_set():
                    halt.set()
            _tick(steps, told, on_step)
            for future in futures:
                part: RunResult = future.result()
                merged.steps_done += part.steps_done
                merged.budget_exhausted |= part.budget_exhausted
                merged.stopped |= part.stopped
                merged.restore_supported &= part.restore_supported
                for name, count in part.faults_fired.items():
                    merged.faults_fired[name] = merged.faults_fired.get(name, 0) + count
    finally:
        # serve_forever creates stop_event and polls it; the listener must close too.
        # Neither attribute is in typeshed's stub of Server.
        server.stop_event.set()  # type: ignore[attr-defined]
        server.listener.close()  # type: ignore[attr-defined]
    return merged


def _serve(server: Any) -> None:
    """Serve until stopped; the stdlib ends serve_forever with sys.exit, meant for a process."""
    with contextlib.suppress(SystemExit):
        server.serve_forever()


def _tick(steps: Synchronized[int], told: int, on_step: Callable[[], None] | None) -> int:
    """Tell ``on_step`` of the steps taken since ``told``; returns the steps taken."""
    taken = steps.value
    if on_step is not None:
        for _ in range(taken - told):
            on_step()
    return taken


_steps: Synchronized[int] | None = None
_halt: SharedEvent | None = None


def _share(steps: Synchronized[int], halt: SharedEvent) -> None:
    """A child's initializer: shared objects reach a spawned process only this way."""
    global _steps, _halt
    _steps, _halt = steps, halt


def _counted() -> None:
    assert _steps is not None
    with _steps.get_lock():
        _steps.value += 1


def _child(spec: str, plan: Plan, which: list[int], first_worker: int, deadline: float,
           address: Any, authkey: bytes) -> RunResult:
    client = _Client(address=address, authkey=authkey)
    client.connect()
    recorder = client.recorder()  # type: ignore[attr-defined]
    clock = client.clock()  # type: ignore[attr-defined]
    return run_workers(load_factory(spec), plan, which, recorder, clock, deadline, first_worker,
                       on_step=_counted, stop=_halt)
