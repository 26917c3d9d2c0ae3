"""The process phase and crash_worker: worker processes that share a store, and kills.

Each known-bad store here is right under threads, so only worker processes or a kill
can show its bug: the tests run it both ways, on the same seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.certify import CertifyOptions, certify
from chaos.report import render_table
from chaos.sharing import not_shared
from invariants.errors import InvalidInput
from scenarios import load_scenario, load_suite

SEED = 20261202


def suite(tmp_path: Path, *names: str) -> str:
    """A suite file of ``names``, sharing the budget equally."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "suite.toml"
    share = 1 / len(names)
    path.write_text('description = "test"\nbudget_s = 30\n' + "".join(
        f'[[scenarios]]\nname = "{name}"\nshare = {share!r}\n' for name in names),
        encoding="utf-8")
    return str(path)


def run(tmp_path: Path, backend: str | None, *names: str, **overrides: object):
    options = CertifyOptions(**{"budget_s": 24.0, "seed": SEED, "out": tmp_path / "out",
                                "stateful_share": 0.0, "suite": suite(tmp_path, *names),
                                **overrides})
    return certify(backend, options)


@pytest.fixture
def shared_file(tmp_path, monkeypatch):
    """The example stores' SQLite file, in this test's folder."""
    monkeypatch.setenv("MEMCERT_EXAMPLE_SQLITE", str(tmp_path / "example.sqlite3"))


def verdicts(report) -> dict[str, str]:
    return {name: result.verdict for name, result in report.invariants.items()}


def scenario(report, name: str):
    return next(s for s in report.scenarios if s.name == name)


# The probe


def test_the_probe_sees_the_reference_store_shared(monkeypatch, sqlite_url):
    monkeypatch.setenv("MEMCERT_DB_URL", sqlite_url)
    assert not_shared("reference_store:factory") == ""


def test_the_probe_sees_an_undeclared_in_process_store_is_not_shared():
    reason = not_shared("tests.chaos.process_backends:unshared")
    assert "was not visible here" in reason and "not shared across processes" in reason


def test_the_probe_believes_a_store_that_says_it_lives_in_one_process():
    assert "shares_across_processes = False" in not_shared("chaos.examples.passing_dict:"
                                                           "passing_dict")


def test_the_probe_needs_a_spec_and_says_why_an_http_backend_needs_none():
    assert "callable" in not_shared(None)
    assert "HTTP" in not_shared("http://127.0.0.1:1", http=True)
    assert "could not import" in not_shared("no_such_module_here:factory")


# The process phase


@pytest.mark.slow
def test_a_process_local_lock_passes_with_threads_and_fails_with_processes(tmp_path,
                                                                           shared_file):
    threads = run(tmp_path / "t", "chaos.examples.sqlite_file:process_local_lock",
                  "concurrent_writes", "process_writes", processes=0)
    assert scenario(threads, "process_writes").not_run == "turned off with --processes 0"
    assert verdicts(threads)["uniqueness"] == "pass"
    assert verdicts(threads)["causal_monotonicity"] == "pass"
    assert "--processes 0" in threads.command

    both = run(tmp_path / "p", "chaos.examples.sqlite_file:process_local_lock",
               "concurrent_writes", "process_writes")
    assert scenario(both, "process_writes").steps_done > 0
    broken = [n for n in ("uniqueness", "causal_monotonicity") if verdicts(both)[n] == "fail"]
    assert broken, verdicts(both)
    assert both.verdict == "failed"


@pytest.mark.slow
def test_a_transaction_per_decision_passes_the_process_phase(tmp_path, shared_file):
    report = run(tmp_path, "chaos.examples.sqlite_file:transactional", "process_writes")
    assert scenario(report, "process_writes").steps_done > 0
    for name in ("uniqueness", "causal_monotonicity", "durability"):
        assert verdicts(report)[name] == "pass", report.invariants[name]


@pytest.mark.slow
def test_an_unshared_store_leaves_the_process_phase_not_run_never_passed(tmp_path):
    report = run(tmp_path, "chaos.examples.passing_dict:passing_dict", "process_writes",
                 level="surface")
    reason = scenario(report, "process_writes").not_run
    assert "shares_across_processes = False" in reason
    saved = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert saved["scenarios"][0]["not_run"] == reason
    assert report.verdict == "unknown"
    assert "scenario process_writes not run:" in render_table(report)


# crash_worker


@pytest.mark.slow
def test_write_behind_passes_with_threads_and_loses_writes_when_a_worker_is_killed(
        tmp_path, shared_file):
    threads = run(tmp_path / "t", "chaos.examples.sqlite_file:write_behind", "mixed",
                  processes=0)
    assert verdicts(threads)["durability"] == "pass"

    killed = run(tmp_path / "k", "chaos.examples.sqlite_file:write_behind", "crash_worker")
    assert verdicts(killed)["durability"] == "fail"
    assert killed.checks["durability"].causes["never_visible"] + killed.checks[
        "durability"].causes["lost_update"] + killed.checks["durability"].causes[
        "visible_late"] > 0


@pytest.mark.slow
def test_crash_worker_kills_mid_operation_and_a_transactional_store_keeps_every_ack(
        tmp_path, shared_file):
    report = run(tmp_path, "chaos.examples.sqlite_file:transactional", "crash_worker")
    crash = scenario(report, "crash_worker")
    kills = [e for e in crash.nemesis if e["do"] == "kill"]
    restarts = [e for e in crash.nemesis if e["do"] == "restart"]
    assert len(kills) == len(restarts) == 2
    assert all(e["workers"] for e in kills)
    assert crash.faults_fired["kill"] == 2
    assert report.coverage["crash_lost_in_flight"] >= 1
    assert report.coverage["writes_acked_before_crash"] >= 1
    assert verdicts(report)["durability"] == "pass"
    assert verdicts(report)["causal_monotonicity"] == "pass"
    history = (tmp_path / "out" / "history.jsonl").read_text(encoding="utf-8")
    assert "worker process killed with SIGKILL" in history


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_the_reference_store_keeps_every_invariant_in_worker_processes_and_kills(
        tmp_path, monkeypatch, database, request):
    url = request.getfixturevalue("sqlite_url" if database == "sqlite" else "fresh_pg_url")
    monkeypatch.setenv("MEMCERT_DB_URL", url)
    report = run(tmp_path, None, "process_writes", "crash_worker")
    assert all(scenario(report, n).steps_done > 0 for n in ("process_writes", "crash_worker"))
    for name in ("uniqueness", "causal_monotonicity", "durability"):
        assert verdicts(report)[name] == "pass", report.invariants[name]


# The scenario files


def test_the_shipped_process_scenarios_and_the_default_suite():
    assert load_scenario("process_writes").processes.count == 2
    crash = load_scenario("crash_worker")
    assert crash.processes.kill_at == (0.3, 0.6) and crash.tag == "cwk"
    names = [entry.scenario.name for entry in load_suite("certify").entries]
    assert {"process_writes", "crash_worker", "crash_restart"} <= set(names)


@pytest.mark.parametrize(("table", "field"), [
    ("[processes]\ncount = 1\n", "processes.count"),
    ("[processes]\nkill_at = [0.6, 0.3]\n", "processes.kill_at"),
    ("[processes]\nkill_at = [1.5]\n", "processes.kill_at"),
    ("[processes]\nevery = 2\n", "processes.every"),
    ('tag = "CW"\n', "tag"),
])
def test_a_bad_processes_table_or_tag_names_its_field(tmp_path, table, field):
    path = tmp_path / "mine.toml"
    path.write_text('description = "x"\ngenerator = "scenarios.generators:mixed"\n' + table,
                    encoding="utf-8")
    with pytest.raises(InvalidInput) as caught:
        load_scenario(path)
    assert field in str(caught.value)


def test_two_scenarios_with_one_tag_are_refused_with_the_way_out(tmp_path):
    for name in ("cache_warm", "cold_write"):
        (tmp_path / f"{name}.toml").write_text(
            'description = "x"\ngenerator = "scenarios.generators:mixed"\n', encoding="utf-8")
    (tmp_path / "s.toml").write_text(
        'description = "x"\nbudget_s = 10\n[[scenarios]]\nname = "cache_warm.toml"\n'
        'share = 0.5\n[[scenarios]]\nname = "cold_write.toml"\nshare = 0.5\n',
        encoding="utf-8")
    with pytest.raises(InvalidInput, match="tag field of its own"):
        load_suite(tmp_path / "s.toml")
