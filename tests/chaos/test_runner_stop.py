"""The runner's ``stop`` event: workers stop before their next step, and the run still
ends as a run does, with every operation completed and every entity read back; and its
deadline, which counts from the moment the workers can step."""

from __future__ import annotations

import threading
import time

from chaos.examples import InMemoryBackend, SharedFactory
from chaos.execute import run_plan
from chaos.faults import LamportClock
from invariants.history import HistoryRecorder
from scenarios.plan import Plan, Step

WORKERS = 4
STEPS = 200


def _plan() -> Plan:
    def steps(worker: int) -> tuple[Step, ...]:
        return tuple(
            Step("write", "ns", f"e{n % 5}", "city", f"city {worker}-{n}",
                 {"fact": f"f{worker}-{n}", "slot": "city", "paraphrase": "none"})
            if n % 3 else Step("read", "ns", f"e{n % 5}")
            for n in range(STEPS))
    return Plan("stop", 0, tuple(steps(w) for w in range(WORKERS)))


def test_a_set_stop_ends_every_worker_after_its_step_and_the_run_as_usual():
    stop = threading.Event()
    stepped = 0
    lock = threading.Lock()

    def on_step() -> None:
        nonlocal stepped
        with lock:
            stepped += 1
            if stepped == 50:
                stop.set()

    with HistoryRecorder(None, keep=True) as recorder:
        result = run_plan(SharedFactory(InMemoryBackend, "lexical"), _plan(), recorder,
                          budget_s=60, clock=LamportClock(), on_step=on_step, stop=stop)
        history = recorder.history()
    assert result.stopped and not result.budget_exhausted
    assert result.steps_done == stepped
    assert 50 <= result.steps_done < 50 + WORKERS  # each worker finishes the step it began
    assert recorder.outstanding == 0
    final = [e for e in history.entries if e.worker == WORKERS and e.type == "invoke"]
    assert sorted(e.op.entity_id for e in final) == [f"e{n}" for n in range(5)]


def test_without_stop_the_plan_runs_to_its_end():
    with HistoryRecorder(None, keep=False) as recorder:
        result = run_plan(SharedFactory(InMemoryBackend, "lexical"), _plan(), recorder,
                          budget_s=60, clock=LamportClock(), stop=threading.Event())
    assert not result.stopped
    assert result.steps_done == WORKERS * STEPS


def test_a_share_goes_to_steps_and_not_to_opening_the_handles():
    """Handles slow to open (a loaded machine's connections) do not eat the budget: the
    run's steps start once every handle is open, however long that took."""
    shared = SharedFactory(InMemoryBackend, "lexical")

    def slow_factory() -> InMemoryBackend:
        time.sleep(0.1)
        return shared()

    with HistoryRecorder(None, keep=False) as recorder:
        result = run_plan(slow_factory, _plan(), recorder, budget_s=0.2, clock=LamportClock())
    assert result.steps_done > 0
