"""The budget goes to the scenarios that can run.

A scenario that cannot run against the backend at hand (a process scenario on a store
that worker processes do not share, a crash scenario without a service to signal) is
found before the run, and its share is spread over the others in proportion: otherwise a
short run of an in-process backend would leave part of its budget unspent and its
invariants undecided.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.certify import CHECK_RESERVE, CertifyOptions, certify
from chaos.chaos_run import ChaosOptions, run_chaos
from chaos.execute import Runnability
from invariants.factory import load_factory
from scenarios import load_scenario

SEED = 20261203
BACKEND = "chaos.examples.passing_dict:passing_dict"
"""A store that says it lives in one process: the process scenarios cannot run on it."""


def suite(tmp_path: Path, shares: dict[str, float]) -> str:
    path = tmp_path / "suite.toml"
    path.write_text('description = "test"\nbudget_s = 30\n' + "".join(
        f'[[scenarios]]\nname = "{name}"\nshare = {share!r}\n'
        for name, share in shares.items()), encoding="utf-8")
    return str(path)


SHARES = {"concurrent_writes": 0.3, "process_writes": 0.4, "delete_then_write": 0.1,
          "crash_restart": 0.2}


def test_runnability_says_which_scenarios_run_against_a_backend():
    ask = Runnability(load_factory(BACKEND), factory_spec=BACKEND, process_phase=True)
    assert ask.reason(load_scenario("concurrent_writes")) == ""
    assert "shares_across_processes = False" in ask.reason(load_scenario("process_writes"))
    assert "HTTP" in ask.reason(load_scenario("crash_restart"))
    off = Runnability(load_factory(BACKEND), factory_spec=BACKEND, process_phase=False)
    assert off.reason(load_scenario("crash_worker")) == "turned off with --processes 0"


@pytest.mark.slow
def test_certify_spreads_the_shares_of_scenarios_not_run_over_the_others(tmp_path):
    budget = 4.0
    report = certify(BACKEND, CertifyOptions(budget_s=budget, seed=SEED, out=tmp_path / "out",
                                             stateful_share=0.0, level="surface",
                                             suite=suite(tmp_path, SHARES)))
    given = {s.name: s.budget_s for s in report.scenarios}
    assert given["process_writes"] == given["crash_restart"] == 0.0
    run_budget = budget * (1 - CHECK_RESERVE)
    assert given["concurrent_writes"] == pytest.approx(run_budget * 0.75)
    assert given["delete_then_write"] == pytest.approx(run_budget * 0.25)
    saved = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert {s["name"]: s["budget_s"] for s in saved["scenarios"]} == {
        name: round(value, 3) for name, value in given.items() if value is not None}
    assert all(s["not_run"] for s in saved["scenarios"] if s["budget_s"] == 0)


@pytest.mark.slow
def test_a_chaos_round_gives_no_share_to_scenarios_that_cannot_run(tmp_path):
    duration = 3.0
    report = run_chaos(BACKEND, ChaosOptions(duration_s=duration, seed=SEED,
                                             out=tmp_path / "out", level="surface",
                                             suite=suite(tmp_path, SHARES)))
    given = {s.name: s.budget_s for s in report.scenarios}
    assert given["process_writes"] == given["crash_restart"] == 0.0
    assert all(s.not_run for s in report.scenarios if s.budget_s == 0)
    # The first scenario of the first round is given three quarters of the round, the
    # whole duration less what it took to start: not the 0.3 its share alone would be.
    first_round = json.loads((tmp_path / "out" / "rounds.jsonl").read_text(
        encoding="utf-8").splitlines()[0])
    assert first_round["scenario"] == "concurrent_writes"
    assert given["concurrent_writes"] is not None
    assert given["concurrent_writes"] >= 0.6 * duration
