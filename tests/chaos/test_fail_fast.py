"""--fail-fast: the first violation counted online ends the run, the saved history is
judged as usual, and nothing that did not run passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.certify import CertifyOptions, certify, replay
from chaos.cli_parser import build_parser
from chaos.examples import in_memory
from chaos.report import INVARIANTS, render_table
from invariants.errors import InvalidArgument
from invariants.history import read_history

STOPPED = "a violation the online checkers counted (--fail-fast)"


def options(tmp_path: Path, **overrides) -> CertifyOptions:
    return CertifyOptions(**{"budget_s": 60.0, "seed": 20261130, "out": tmp_path / "out",
                             "fail_fast": True, "suite": "quick", **overrides})


@pytest.mark.slow
def test_the_first_violation_stops_the_run_and_fails_it(tmp_path):
    report = certify("chaos.examples:last_arrival_wins", options(tmp_path,
                                                                 stateful_share=0.2))
    assert report.verdict == "failed" and report.exit_code == 1
    assert report.invariants["causal_monotonicity"].verdict == "fail"
    assert report.stopped == STOPPED
    first, *rest = report.scenarios
    assert first.stopped and 0 < first.steps_done < first.steps_planned
    assert sum(first.faults_fired.values()) > 0, "the cut scenario's faults are still told"
    assert rest and all(s.stopped and s.steps_done == 0 for s in rest)
    assert report.stateful is None
    # Nothing that did not run passes: the conditions the later scenarios bring never
    # came, so the invariants that need them are unknown.
    assert report.invariants["deletion_monotonicity"].verdict == "unknown"
    assert report.invariants["isolation"].verdict == "unknown"

    out = tmp_path / "out"
    history = read_history(out / "history.jsonl")  # every operation completed
    assert len(history) == report.history_entries
    saved = json.loads((out / "results.json").read_text())
    assert saved["stopped"] == STOPPED
    assert [s["stopped"] for s in saved["scenarios"]] == [True] * len(report.scenarios)
    assert saved["reproduce"].endswith(" --fail-fast")
    assert f"stopped early by {STOPPED}; cut short or not run: {first.name} " \
           f"({first.steps_done:,} of {first.steps_planned:,} steps)" in render_table(report)

    again = replay(out)
    assert again.stopped == STOPPED
    assert {n: v.verdict for n, v in again.invariants.items()} == \
        {n: v.verdict for n, v in report.invariants.items()}


@pytest.mark.slow
def test_workers_in_other_processes_stop_too(tmp_path, monkeypatch):
    """The known-bad backend lives in a SQLite file shared by two worker processes: the
    first violation stops them in the middle of the first scenario, as threads stop."""
    monkeypatch.setenv("LWW_DB", str(tmp_path / "lww.sqlite3"))
    report = certify("tests.chaos.sqlite_last_write_wins:factory",
                     options(tmp_path, processes=2, workers=4, stateful_share=0.0))
    assert report.verdict == "failed"
    assert report.invariants["causal_monotonicity"].verdict == "fail"
    assert report.stopped == STOPPED
    first, *rest = report.scenarios
    assert first.stopped and 0 < first.steps_done < first.steps_planned / 2, \
        f"{first.steps_done} of {first.steps_planned} steps ran"
    assert rest and all(s.steps_done == 0 for s in rest)


@pytest.mark.slow
def test_a_correct_backend_runs_to_the_end(tmp_path):
    report = certify(in_memory, options(tmp_path, stateful_share=0.0))
    assert report.verdict == "certified", report.invariants
    assert report.stopped == ""
    assert not any(s.stopped for s in report.scenarios)
    assert all(s.steps_done == s.steps_planned for s in report.scenarios if not s.not_run)
    assert {s.name for s in report.scenarios if s.not_run} == {
        "process_writes", "crash_worker", "crash_restart", "pause"}
    assert {n: v.verdict for n, v in report.invariants.items()} == dict.fromkeys(INVARIANTS,
                                                                               "pass")
    assert "stopped early" not in render_table(report)


@pytest.mark.parametrize(("env", "argv", "expected"), [
    (None, [], False),
    (None, ["--fail-fast"], True),
    ("1", [], True),
    ("0", [], False),
])
def test_fail_fast_comes_from_the_flag_or_the_environment(monkeypatch, env, argv, expected):
    if env is None:
        monkeypatch.delenv("MEMCERT_FAIL_FAST", raising=False)
    else:
        monkeypatch.setenv("MEMCERT_FAIL_FAST", env)
    assert build_parser().parse_args(["certify", *argv]).fail_fast is expected


def test_fail_fast_must_be_a_bool(tmp_path):
    with pytest.raises(InvalidArgument) as refused:
        CertifyOptions(fail_fast="yes", out=tmp_path / "out")
    assert str(refused.value) == "fail_fast='yes' must be True or False."
