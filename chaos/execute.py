"""Run one plan: the dispatcher that picks where its workers run, then reads back.

A plain plan runs as threads of this process (:func:`chaos.runner.run_workers`), a
plan with a network under the nemesis (:mod:`chaos.nemesis`), and a plan spread over
worker processes through :mod:`chaos.processes`. Each of those imports the runner, so
the dispatcher sits here, above all three, and none of them imports it back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from invariants.adapters.http import HttpFactory
from invariants.backend import BackendFactory
from invariants.errors import InvalidArgument
from invariants.history import HistoryRecorder
from scenarios.network_plan import Network
from scenarios.plan import Plan
from scenarios.process_plan import Processes

from .faults import LamportClock
from .nemesis import not_runnable, run_under_nemesis
from .processes import run_in_processes
from .runner import RunResult, final_reads, run_workers
from .sharing import not_shared

__all__ = ["Runnability", "Shaped", "run_plan"]


def run_plan(
    factory: BackendFactory,
    plan: Plan,
    recorder: HistoryRecorder,
    *,
    budget_s: float,
    clock: LamportClock | None = None,
    on_step: Callable[[], None] | None = None,
    first_worker: int = 0,
    processes: int = 0,
    factory_spec: str | None = None,
    stop: threading.Event | None = None,
    process_phase: bool = True,
    runnability: Runnability | None = None,
) -> RunResult:
    """Run every worker's steps concurrently until done or until ``budget_s`` runs out.

    Workers are threads of this process, or, with ``processes`` > 0, threads spread over
    that many worker processes, each of which builds its handles from ``factory_spec``
    (a spec, because a callable does not cross a process boundary). ``first_worker``
    offsets worker ids so that several plans can share one history. ``on_step`` is
    called once per step, to drive progress bars: after every step of a thread worker,
    or in this process a tick at a time for workers in other processes. Once ``stop`` is
    set, each worker stops before its next step (in another process, within a tick), as
    at the end of the budget, and the run ends as usual (faults healed, every entity read
    back), with ``stopped`` true.

    A plan with a ``network`` runs under :mod:`chaos.nemesis`, always with threads; if
    the backend cannot take its faults, nothing runs and ``not_run`` says why.

    A plan with a ``processes`` table (the process phase, ``crash_worker``) always runs
    in worker processes: ``processes`` of them if given, else the plan's own count. It
    runs only if a probe shows the store is shared across processes
    (:func:`chaos.sharing.not_shared`), and not at all without ``process_phase``
    (``--processes 0``); either way ``not_run`` says why. A run of many plans passes one
    ``runnability``, so that the probe runs once, and its shares of the budget can go to
    the plans that run.
    """
    asked = runnability or Runnability(factory, factory_spec=factory_spec,
                                       process_phase=process_phase)
    reason = asked.reason(plan)
    if reason:
        return RunResult(plan.scenario, plan.size, not_run=reason)
    shared = clock if clock is not None else LamportClock()
    deadline = time.monotonic() + budget_s
    started = time.monotonic()
    if plan.network is not None:
        result = run_under_nemesis(factory, plan, recorder, shared, budget_s=budget_s,
                                   deadline=deadline, first_worker=first_worker,
                                   on_step=on_step, stop=stop)
        if result.not_run:
            return result
    elif plan.processes is not None:
        assert factory_spec is not None
        result = run_in_processes(factory_spec, plan, recorder, shared, deadline,
                                  max(processes, plan.processes.count), first_worker,
                                  on_step, stop, kill_at=plan.processes.kill_at)
    elif processes > 0:
        if factory_spec is None:
            raise InvalidArgument("processes > 0 needs factory_spec='package.module:callable',"
                                  " which each worker process imports")
        result = run_in_processes(factory_spec, plan, recorder, shared, deadline, processes,
                                  first_worker, on_step, stop)
    else:
        result = run_workers(factory, plan, range(len(plan.workers)), recorder, shared,
                             deadline, first_worker, on_step, stop=stop)
    reading = time.monotonic()
    backend = factory()
    try:
        final_reads(backend, plan, recorder, first_worker + len(plan.workers))
    finally:
        backend.close()
    result.final_reads_s = time.monotonic() - reading
    result.elapsed_s = time.monotonic() - started
    return result


class Shaped(Protocol):
    """What decides where a plan can run: a :class:`scenarios.Scenario`, or its plan."""

    @property
    def network(self) -> Network | None: ...

    @property
    def processes(self) -> Processes | None: ...


class Runnability:
    """Which plans can run against one backend, asked before they run.

    A plan with a ``network`` needs a service memcert can put faults in front of (and
    signal, for crashes and pauses); a plan with a ``processes`` table needs a store that
    worker processes share, which only a probe can tell (:func:`chaos.sharing.not_shared`).
    The probe starts a process, so its answer is kept for the run. Asked up front, the
    answers let a suite give the shares of the plans that cannot run to those that can,
    instead of leaving part of the budget unspent.
    """

    def __init__(self, factory: BackendFactory, *, factory_spec: str | None,
                 process_phase: bool) -> None:
        self.factory = factory
        self.factory_spec = factory_spec
        self.process_phase = process_phase
        self._sharing: str | None = None

    def reason(self, plan: Shaped) -> str:
        """Why ``plan`` (or any plan of a scenario) cannot run against this backend, or ""
        if it can."""
        if plan.network is not None:
            return not_runnable(self.factory, plan.network)
        if plan.processes is None:
            return ""
        if not self.process_phase:
            return "turned off with --processes 0"
        if self._sharing is None:
            self._sharing = not_shared(self.factory_spec,
                                       http=isinstance(self.factory, HttpFactory))
        return self._sharing
