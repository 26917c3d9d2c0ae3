"""End to end: certify catches every known-bad backend and certifies the correct ones."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

import pytest

from chaos.certify import CertifyOptions, Progress, certify, replay
from chaos.examples import KNOWN_BAD, KNOWN_BAD_CAUSES, in_memory
from chaos.faults import FailBeforeApply, LostAck
from chaos.report import INVARIANTS, render_table
from scenarios import load_suite

INVARIANT_OF = {checker: name for name, checkers in INVARIANTS.items() for checker in checkers}


def options(tmp_path: Path, **overrides) -> CertifyOptions:
    """The quick suite, its plans run whole within the budget (the same coverage every
    time, however loaded the machine), and the chaos phase alone unless a test asks for
    the stateful one: tests/stateful covers the machine on every known-bad backend, and
    the suite's time is shared."""
    return CertifyOptions(**{"budget_s": 60.0, "seed": 20261129, "out": tmp_path / "out",
                             "stateful_share": 0.0, "suite": "quick", **overrides})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KNOWN_BAD))
def test_each_known_bad_backend_fails_the_invariant_it_breaks(tmp_path, name):
    report = certify(name, options(tmp_path))
    assert report.verdict == "failed"
    for checker in KNOWN_BAD[name]:
        assert report.invariants[INVARIANT_OF[checker]].verdict == "fail", (
            f"{name} should fail {checker}: {report.invariants[INVARIANT_OF[checker]]}")
        assert report.checks[checker].violation_count > 0
    for checker, cause in KNOWN_BAD_CAUSES[name].items():
        causes = report.checks[checker].causes
        assert sum(causes.values()) == report.checks[checker].violation_count
        assert max(causes, key=lambda c: causes[c]) == cause, (
            f"{name}: most {checker} violations should be {cause}: {causes}")
        assert cause in render_table(report)
    assert report.exit_code == 1


@pytest.mark.slow
def test_the_reference_store_on_sqlite_is_certified(tmp_path, monkeypatch, sqlite_url):
    monkeypatch.setenv("MEMCERT_DB_URL", sqlite_url)
    report = certify(None, options(tmp_path, stateful_share=0.2, suite="certify"))
    assert {n: v.verdict for n, v in report.invariants.items()} == dict.fromkeys(INVARIANTS,
                                                                               "pass")
    assert sum(c.violation_count for c in report.checks.values()) == 0
    assert report.verdict == "certified"
    assert report.stateful is not None
    assert report.stateful["failed"] == [] and report.stateful["examples"] > 0
    assert not (tmp_path / "out" / "stateful").exists()


@pytest.mark.slow
def test_the_reference_store_on_postgres_is_certified(tmp_path, monkeypatch, fresh_pg_url):
    monkeypatch.setenv("MEMCERT_DB_URL", fresh_pg_url)
    report = certify("reference_store:factory", options(tmp_path))
    assert sum(c.violation_count for c in report.checks.values()) == 0
    assert report.verdict == "certified", report.invariants


def flaky_in_memory():
    """A correct backend whose calls time out at random, before or after applying."""
    rng = random.Random()
    return LostAck(FailBeforeApply(in_memory(), rng, 0.15), rng, 0.15)


@pytest.mark.slow
def test_random_timeouts_before_and_after_applying_are_never_flagged(tmp_path):
    report = certify(flaky_in_memory, options(tmp_path))
    assert not [n for n, v in report.invariants.items() if v.verdict == "fail"], report.invariants
    assert sum(c.violation_count for c in report.checks.values()) == 0


@pytest.mark.slow
def test_results_json_junit_and_replay_agree(tmp_path):
    report = certify("chaos.examples:last_arrival_wins", options(tmp_path))
    out = tmp_path / "out"
    saved = json.loads((out / "results.json").read_text())
    assert {"backend", "seed", "level", "verdict", "invariants"} <= saved.keys()
    assert saved["backend"] == "chaos.examples:last_arrival_wins"
    assert saved["seed"] == 20261129
    assert saved["verdict"] == "failed"
    assert list(saved["invariants"]) == list(INVARIANTS)
    for verdict in saved["invariants"].values():
        assert {"verdict", "violations", "checked", "rate", "examples"} <= verdict.keys()
        assert verdict["verdict"] in ("pass", "fail", "unknown", "skipped")
    causal = saved["invariants"]["causal_monotonicity"]
    assert causal["verdict"] == "fail" and causal["violations"] > 0
    assert causal["examples"][0].startswith(("W1 op ", "W2 op "))
    assert "\nmemcert's reading (ground truth): Let W1 = op " in causal["examples"][0]
    assert list(causal["causes"]) == ["stale_overwrite", "over_merged", "read_order"]
    assert sum(causal["causes"].values()) == causal["violations"]
    assert max(causal["causes"], key=causal["causes"].get) == "stale_overwrite"
    cases = ElementTree.parse(out / "junit.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == list(INVARIANTS)
    again = replay(out)
    assert {n: v.verdict for n, v in again.invariants.items()} == \
        {n: v.verdict for n, v in report.invariants.items()}
    assert again.checks["causal_monotonicity"].violation_count == causal["violations"]


@pytest.mark.slow
def test_worker_processes_certify_the_reference_store(tmp_path, monkeypatch, sqlite_url):
    monkeypatch.setenv("MEMCERT_DB_URL", sqlite_url)
    report = certify(None, options(tmp_path, processes=2, workers=4))
    assert sum(c.violation_count for c in report.checks.values()) == 0
    assert report.verdict == "certified", report.invariants
    assert "--processes 2" in report.command


@pytest.mark.slow
def test_worker_processes_catch_a_stale_overwrite(tmp_path, monkeypatch):
    monkeypatch.setenv("LWW_DB", str(tmp_path / "lww.sqlite3"))
    report = certify("tests.chaos.sqlite_last_write_wins:factory",
                     options(tmp_path, processes=2, workers=4))
    assert report.invariants["causal_monotonicity"].verdict == "fail"
    assert not report.restore_supported


def test_an_in_process_backend_refuses_worker_processes(tmp_path):
    from invariants.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="keeps its store inside one process"):
        certify("chaos.examples:in_memory", options(tmp_path, processes=2))


@pytest.mark.slow
def test_the_stateful_phase_names_itself_and_replay_carries_it(tmp_path):
    out = tmp_path / "out"
    (out / "stateful").mkdir(parents=True)
    (out / "stateful" / "uniqueness.py").write_text("left by an earlier run")
    report = certify("chaos.examples:leaky_namespaces",
                     options(tmp_path, budget_s=10.0, stateful_share=0.4))

    isolation = report.invariants["isolation"]
    assert isolation.verdict == "fail"
    assert isolation.found_by == ("chaos", "stateful")
    program = out / "stateful" / "isolation.py"
    assert isolation.programs == (str(program),)
    assert sorted(p.name for p in (out / "stateful").iterdir()) == ["isolation.py"]
    assert "state.teardown()" in program.read_text()
    assert isolation.examples[-1].startswith("The stateful phase shrank this to ")
    assert all(v.found_by == () for n, v in report.invariants.items() if n != "isolation")
    saved = json.loads((out / "results.json").read_text())
    assert saved["invariants"]["isolation"]["found_by"] == ["chaos", "stateful"]
    assert saved["stateful"]["failed"] == ["isolation"]
    assert "--stateful-share 0.4" in saved["reproduce"]
    again = replay(out)
    assert again.invariants["isolation"].found_by == ("chaos", "stateful")
    assert again.stateful == saved["stateful"]


def test_a_violation_only_the_stateful_phase_found_fails_the_invariant():
    from chaos.report import build_report
    from invariants.verdict import CheckResult, Validity

    checks = {name: CheckResult(name, Validity.VALID, 0, (), (), 10, 0.0, 0, "violations", 10,
                                "reads") for names in INVARIANTS.values() for name in names}
    stateful = {"failures": [{"checkers": ["uniqueness"], "steps": 3,
                              "explanations": ["uniqueness: Let A = op 0 ..."]}],
                "saved": {"uniqueness": "out/stateful/uniqueness.py"},
                "undecided": {"isolation": "no program ran within the budget"}}
    report = build_report(backend="b", seed=1, level="lexical", checks=checks, coverage={},
                          scenarios=[], restore_supported=True, history_entries=0,
                          elapsed_s=0.0, command="memcert certify b", stateful=stateful)

    uniqueness = report.invariants["uniqueness"]
    assert (uniqueness.verdict, uniqueness.found_by) == ("fail", ("stateful",))
    assert uniqueness.programs == ("out/stateful/uniqueness.py",)
    assert uniqueness.examples == (
        "The stateful phase shrank this to 3 step(s):\nuniqueness: Let A = op 0 ...",)
    assert report.verdict == "failed"
    isolation = report.invariants["isolation"]
    assert isolation.verdict == "pass"
    assert isolation.notes == (
        "the stateful phase left isolation undecided: no program ran within the budget",)


def test_the_stateful_share_must_leave_the_chaos_phase_some_budget(tmp_path):
    from invariants.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as raised:
        options(tmp_path, stateful_share=0.9)
    assert str(raised.value) == (
        "stateful_share=0.9 must be between 0 (no stateful phase) and 0.80, so the chaos "
        "scenarios keep some budget; the default is 0.2.")


def one_scenario_suite(tmp_path: Path, name: str) -> str:
    path = tmp_path / "one.toml"
    path.write_text(f'description = "Only {name}."\nbudget_s = 10\n\n'
                    f'[[scenarios]]\nname = "{name}"\nshare = 1.0\n')
    return str(path)


def test_a_backend_without_restore_is_known_even_when_no_restore_was_sent(tmp_path):
    suite = one_scenario_suite(tmp_path, "concurrent_writes")
    report = certify("chaos.examples:no_restore", options(tmp_path, budget_s=5.0, suite=suite))

    assert report.restore_supported is False
    assert "restore is not implemented by this backend: restore checks skipped" in (
        report.invariants["deletion_monotonicity"].notes)


def test_a_scenario_that_ran_no_step_says_so_in_the_table(tmp_path):
    from chaos.report import render_table

    suite = one_scenario_suite(tmp_path, "concurrent_writes")
    report = certify("chaos.examples:in_memory", options(tmp_path, budget_s=5.0, suite=suite))
    starved = replace(report, scenarios=tuple(
        replace(s, steps_done=0, elapsed_s=0.04) for s in report.scenarios))

    assert render_table(starved).splitlines()[:1] == [
        "memcert certify chaos.examples:in_memory  (seed 20261129, level lexical)"]
    assert (f"scenario concurrent_writes ran none of its {report.scenarios[0].steps_planned:,} "
            "steps in its 0.0 s share of the budget; give the run a larger --budget (worker "
            "processes take seconds to start)") in render_table(starved)
    assert "ran none of its" not in render_table(report)


class _Watched(Progress):
    """What a progress display is told, kept."""

    def __init__(self) -> None:
        self.total = 0
        self.scenarios: list[str] = []
        self.counts: list[int] = []
        self.finished = False

    def start(self, total_steps: int, budget_s: float) -> None:
        self.total = total_steps

    def scenario(self, name: str) -> None:
        self.scenarios.append(name)

    def not_run(self, name: str, steps: int) -> None:
        self.total -= steps

    def step(self, violations: int) -> None:
        self.counts.append(violations)

    def finish(self) -> None:
        self.finished = True


@pytest.mark.slow
def test_the_progress_display_sees_every_step_and_the_violations_as_they_are_counted(
        tmp_path):
    watched = _Watched()
    report = certify("chaos.examples:last_arrival_wins", options(tmp_path), progress=watched)
    assert watched.finished
    assert watched.scenarios == [s.name for s in report.scenarios]
    assert len(watched.counts) == sum(s.steps_done for s in report.scenarios) == watched.total
    assert watched.counts == sorted(watched.counts), "the count never goes down"
    assert 0 < watched.counts[-1] <= sum(c.violation_count for c in report.checks.values())


@pytest.mark.slow
def test_the_progress_display_sees_the_steps_of_workers_in_other_processes(
        tmp_path, monkeypatch):
    monkeypatch.setenv("LWW_DB", str(tmp_path / "lww.sqlite3"))
    watched = _Watched()
    report = certify("tests.chaos.sqlite_last_write_wins:factory",
                     options(tmp_path, processes=2, workers=4, budget_s=30.0), progress=watched)
    assert len(watched.counts) == sum(s.steps_done for s in report.scenarios) > 0
    assert watched.counts == sorted(watched.counts)
    assert watched.counts[-1] > 0, "the violations are counted as the run goes"


@pytest.mark.slow
def test_the_quick_suite_runs_its_plans_whole_and_meets_every_condition(tmp_path):
    report = certify("chaos.examples:in_memory", options(tmp_path))
    ran = [s for s in report.scenarios if not s.not_run]
    assert [s.name for s in ran] == ["out_of_order_causal", "value_diversity",
                                     "concurrent_writes", "delete_then_write",
                                     "paraphrase_flood", "mixed"]
    assert all(s.steps_done == s.steps_planned and not s.budget_exhausted for s in ran), [
        (s.name, s.steps_done, s.steps_planned) for s in ran]
    assert report.verdict == "certified", report.invariants
    full = {e.scenario.name: e for e in load_suite("certify").entries}
    for entry in load_suite("quick").entries:
        assert entry.scale < full[entry.scenario.name].scale
