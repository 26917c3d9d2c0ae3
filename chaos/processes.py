"""Worker processes: the plan's workers spread over processes that share one history.

The history stays in this process. Workers in other processes reach the recorder and
the Lamport clock through a multiprocessing manager served from a thread here, so an
invocation gets its index *before* the operation starts (the call returns first), and
real-time order in the history stays sound: an operation can only look longer than it
was, never shorter. ``CLOCK_MONOTONIC`` is system-wide, so one deadline serves all.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import threading
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.managers import BaseManager
from typing import Any

from invariants.errors import InvalidArgument
from invariants.history import HistoryRecorder

from .factory import load_factory
from .faults import LamportClock
from .plan import Plan
from .runner import RunResult, run_workers

__all__ = ["run_in_processes"]


class _Client(BaseManager):
    """The worker side: only the names, the objects live in the parent."""


_Client.register("recorder")
_Client.register("clock")


def run_in_processes(spec: str, plan: Plan, recorder: HistoryRecorder, clock: LamportClock,
                     deadline: float, processes: int, first_worker: int) -> RunResult:
    """Run the plan's workers in ``processes`` spawned processes and merge their results."""
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
    try:
        with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
            futures = [pool.submit(_child, spec, plan, share, first_worker, deadline,
                                   server.address, authkey) for share in shares if share]
            for future in futures:
                part: RunResult = future.result()
                merged.steps_done += part.steps_done
                merged.budget_exhausted |= part.budget_exhausted
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


def _child(spec: str, plan: Plan, which: list[int], first_worker: int, deadline: float,
           address: Any, authkey: bytes) -> RunResult:
    client = _Client(address=address, authkey=authkey)
    client.connect()
    recorder = client.recorder()  # type: ignore[attr-defined]
    clock = client.clock()  # type: ignore[attr-defined]
    return run_workers(load_factory(spec), plan, which, recorder, clock, deadline, first_worker)
