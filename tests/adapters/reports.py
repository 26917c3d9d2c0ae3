"""What a certification of a third-party backend must leave behind, whatever its verdict.

The third-party stores are not asserted to pass: their verdicts are findings, published
in docs/findings/. What is asserted is the harness's side: every invariant has a
recorded verdict with evidence, the missing restore is reported as such, the history
is the seeded plan step by step, and re-checking the saved history reaches the same
verdicts.
"""

from __future__ import annotations

import json
from pathlib import Path

import memcert
from chaos.certify import replay
from chaos.report import INVARIANTS
from invariants.history import read_history
from scenarios import load_suite

SMOKE = Path(__file__).with_name("smoke.toml")
"""A suite of small plans, so that the checks each invariant needs are reached by the
plan rather than by the machine's speed: a short time budget on the certify suite ended
some runs on a slow backend before any delete."""
BUDGET_S = 40.0
"""A ceiling: on a store that answers in milliseconds every plan runs whole well within it."""
RECORDED_BUDGET_S = 8.0
"""For the backends that wait on a model at every operation, whose tests ask only for a
recorded report (:func:`assert_recorded`): the ceiling would be spent whole on them."""
SEED = 20261130
VERDICTS = {"pass", "fail", "unknown", "skipped"}
NO_RESTORE_NOTE = "restore is not implemented by this backend: restore checks skipped"


def certify_briefly(spec: str, out: Path, budget_s: float = BUDGET_S) -> dict:
    """Run the chaos phase of the smoke suite on ``spec``; return results.json.

    The stateful phase is left out, as in tests/chaos: tests/stateful covers it, and its
    search on a failing backend would take the rest of this suite's time.
    """
    memcert.certify(spec, budget_s=budget_s, seed=SEED, out=out, stateful_share=0.0,
                    suite=str(SMOKE))
    saved: dict = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return saved


def assert_one_example_per_cause(name: str, verdict: dict) -> None:
    """The chaos history's examples: one per cause found, every violation counted under
    a cause of this invariant's checkers."""
    chaos = [e for e in verdict["examples"] if not e.startswith("The stateful phase")]
    found = [c for c, n in verdict["causes"].items() if n]
    assert len(chaos) == len(found), (name, verdict)
    assert sum(verdict["causes"].values()) == verdict["violations"], (name, verdict)


def assert_complete(saved: dict, spec: str, out: Path) -> None:
    """Every invariant has a verdict backed by checks, a missing restore is reported
    whether or not the run reached a restore, and the report names its run."""
    assert saved["backend"] == spec
    assert saved["seed"] == SEED
    assert saved["verdict"] in {"certified", "failed", "unknown"}
    assert set(saved["invariants"]) == set(INVARIANTS)
    for name, verdict in saved["invariants"].items():
        assert verdict["verdict"] in VERDICTS, (name, verdict["verdict"])
        assert verdict["checked"] > 0, f"{name} was never exercised: {verdict}"
        assert_one_example_per_cause(name, verdict)
    restores = assert_restores_refused(out)
    # Restore is probed before the run, so a short run that never reached a restore
    # still knows the backend has none.
    assert not restores or saved["restore_supported"] is False
    notes = saved["invariants"]["deletion_monotonicity"]["notes"]
    assert (NO_RESTORE_NOTE in notes) is (not saved["restore_supported"])
    assert saved["reproduce"].startswith(f"memcert certify {spec} --seed {SEED} ")


def assert_recorded(saved: dict, spec: str) -> None:
    """Every invariant has a recorded verdict, one the short run could not exercise says
    unknown and why, never pass, and the report names its run: what
    :func:`assert_complete` asks of a backend too slow to exercise everything in a few
    seconds."""
    assert (saved["backend"], saved["seed"]) == (spec, SEED)
    assert saved["verdict"] in {"certified", "failed", "unknown"}
    assert set(saved["invariants"]) == set(INVARIANTS)
    for name, verdict in saved["invariants"].items():
        assert verdict["verdict"] in VERDICTS, (name, verdict["verdict"])
        assert_one_example_per_cause(name, verdict)
        if verdict["checked"] == 0:
            assert verdict["verdict"] == "unknown" and verdict["notes"], (name, verdict)
    assert saved["reproduce"].startswith(f"memcert certify {spec} --seed {SEED} ")


def assert_restores_refused(out: Path) -> list:
    """Every restore the run sent was refused as unsupported; returns their completions."""
    restores = [e for e in read_history(out / "history.jsonl")
                if e.f == "restore" and e.type != "invoke"]
    assert all(e.type == "fail" and e.result.startswith("unsupported: NotImplementedError: ")
               for e in restores), restores[:3]
    return restores


def assert_reproducible(saved: dict, out: Path) -> None:
    """The history is the plan the seed makes, step by step, as far as the budget went;
    and the saved history alone yields the same verdicts."""
    history = read_history(out / "history.jsonl")
    invoked: dict[int, list] = {}
    for entry in history:
        if entry.type == "invoke":
            invoked.setdefault(entry.worker, []).append(entry)
    plans = load_suite(SMOKE).plans(seed=SEED, workers=8, level=saved["level"])
    assert [s["steps_planned"] for s in saved["scenarios"]] == [p.size for p in plans]
    first = 0
    for plan, summary in zip(plans, saved["scenarios"], strict=True):
        done = 0
        for k, steps in enumerate(plan.workers):
            entries = invoked.get(first + k, [])
            assert len(entries) <= len(steps)
            for step, entry in zip(steps, entries, strict=False):
                assert (entry.f, entry.op.namespace, entry.op.entity_id) == (
                    step.kind, step.namespace, step.entity_id), (plan.scenario, k, entry)
                if step.kind == "write":
                    assert (entry.op.attribute, entry.op.value) == (step.attribute, step.value)
            done += len(entries)
        assert done == summary["steps_done"], plan.scenario
        first += len(plan.workers) + 1
    again = replay(out)
    assert {n: v.verdict for n, v in again.invariants.items()} == {
        n: v["verdict"] for n, v in saved["invariants"].items()}
    assert {n: v.violations for n, v in again.invariants.items()} == {
        n: v["violations"] for n, v in saved["invariants"].items()}
