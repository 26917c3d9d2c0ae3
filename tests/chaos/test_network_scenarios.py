"""The network and crash scenarios: faults on the wire, a cut-off group and a killed
service, each proven to have fired, against a real served store; and "not run", never a
verdict, for a backend they cannot reach that way."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from chaos.certify import CertifyOptions, certify, replay
from chaos.cli import main
from chaos.coverage import measure
from chaos.report import INVARIANTS, render_table
from chaos.service import ManagedService, managed_service
from invariants.adapters.http import HttpFactory
from invariants.backend import Ack, Record, Write
from invariants.history import HistoryRecorder, Read, WriteMeta, read_history

NOT_HTTP = ("needs a backend reached over HTTP, the faults sitting between the workers and "
            "the service: a service's URL, or --serve for the reference store")
NOT_MANAGED = ("needs a service memcert starts itself and can signal (SIGSTOP, SIGKILL, "
               "restart): let memcert run the reference store (memcert certify --serve "
               "[--db URL]), or give the command that starts yours (memcert certify "
               "http://127.0.0.1:{port} --service-cmd 'CMD ... {port} ...')")


def options(tmp_path: Path, **overrides: object) -> CertifyOptions:
    return CertifyOptions(**{"budget_s": 40.0, "seed": 20261130, "out": tmp_path / "out",
                             "suite": "network", "stateful_share": 0.0, **overrides})


def suite_of(tmp_path: Path, *names: str) -> str:
    """A suite file running the named scenarios with equal shares."""
    path = tmp_path / "only.toml"
    share = 1 / len(names)
    path.write_text('description = "d"\nbudget_s = 20\n' + "".join(
        f'[[scenarios]]\nname = "{name}"\nshare = {share!r}\n' for name in names))
    return str(path)


@pytest.mark.slow
def test_the_network_suite_certifies_a_served_store_and_every_fault_fired(tmp_path):
    with managed_service(str(tmp_path / "store.sqlite3")) as served:
        report = certify(served, options(tmp_path))
    assert sum(check.violation_count for check in report.checks.values()) == 0
    assert report.verdict == "certified", render_table(report)
    for condition in ("network_fault_during_ops", "partition_cut_ops", "crash_lost_in_flight",
                      "writes_acked_before_crash", "answered_across_pause"):
        assert report.coverage[condition] > 0, condition
    scenarios = {s.name: s for s in report.scenarios}
    assert all(not s.not_run for s in scenarios.values())
    wire = scenarios["network_faults"].faults_fired
    assert wire["clients/sliced_requests"] > 0
    assert wire["clients/lost_answers"] + wire["clients/black_hole"] > 0
    crash = scenarios["crash_restart"]
    assert (crash.faults_fired["kill"], crash.faults_fired["restart"]) == (2, 2)
    assert min(cut_short_by_each_kill(tmp_path / "out", crash.nemesis)) > 0
    assert [e["do"] for e in crash.nemesis] == ["kill", "restart", "kill", "restart", "heal"]
    pause = scenarios["pause"]
    assert pause.faults_fired == {"pause": 2}
    assert [e["do"] for e in pause.nemesis] == ["pause", "resume", "pause", "resume", "heal"]
    cut = [e for e in scenarios["partition"].nemesis if e["do"] == "partition"]
    # Worker k of a plan is in group k % 2; the partition plan's first worker id is 9.
    assert [e["groups"] for e in cut] == [["b"], ["a"]]
    assert cut[0]["workers"] == [10, 12, 14, 16]
    assert report.backend == served.url

    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [s["not_run"] for s in saved["scenarios"]] == [None, None, None, None]
    again = replay(tmp_path / "out")
    assert again.coverage == report.coverage
    assert again.verdict == "certified"


@pytest.mark.slow
def test_a_service_that_loses_acknowledged_writes_in_a_crash_fails_durability(tmp_path, capsys):
    """The reference store on an in-memory database: it acknowledges writes that a
    SIGKILL then wipes, as a store that acks before it commits would."""
    code = main(["certify", "--serve", "--db", ":memory:", "--suite",
                 suite_of(tmp_path, "crash_restart"), "--budget", "20", "--workers", "4",
                 "--seed", "3", "--stateful-share", "0", "--quiet", "--out",
                 str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 1, printed
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    durability = saved["invariants"]["durability"]
    assert durability["verdict"] == "fail"
    assert "returned no record for slot" in durability["examples"][0]
    assert saved["coverage"]["writes_acked_before_crash"] > 0
    assert saved["scenarios"][0]["faults_fired"] == {"kill": 2, "restart": 2}
    assert saved["reproduce"].startswith("memcert certify --serve --db :memory: --seed 3 ")
    assert "reproduce: memcert certify --serve --db :memory: --seed 3 " in printed


def test_an_in_process_backend_runs_none_of_the_network_suite_and_says_why(tmp_path):
    report = certify("chaos.examples:in_memory", options(tmp_path))
    assert [(s.name, s.not_run, s.steps_done) for s in report.scenarios] == [
        ("network_faults", NOT_HTTP, 0), ("partition", NOT_HTTP, 0),
        ("crash_restart", NOT_HTTP, 0), ("pause", NOT_HTTP, 0)]
    # Nothing ran, so nothing passed; and nothing is unknown for want of a condition.
    assert {v.verdict for v in report.invariants.values()} == {"unknown"}
    assert all(not v.missing_conditions for v in report.invariants.values())
    assert report.history_entries == 0
    assert (f"scenarios network_faults, partition, crash_restart, pause not run: {NOT_HTTP}"
            in " ".join(render_table(report).split()))


def test_a_service_memcert_does_not_run_cannot_be_crashed(tmp_path):
    with ManagedService.start(str(tmp_path / "store.sqlite3")) as service:
        report = certify(HttpFactory(service.url), options(
            tmp_path, suite=suite_of(tmp_path, "crash_restart")))
    assert [(s.name, s.not_run) for s in report.scenarios] == [("crash_restart", NOT_MANAGED)]
    assert set(report.invariants) == set(INVARIANTS)
    assert all(v.verdict == "unknown" for v in report.invariants.values())


def test_serve_takes_no_backend_and_db_needs_serve(capsys):
    assert main(["certify", "--db", "x.sqlite3"]) == 2
    assert capsys.readouterr().err == (
        "memcert certify: --db names the database of the service --serve starts; add "
        "--serve (the in-process reference store reads MEMCERT_DB_URL)\n")
    assert main(["certify", "--serve", "mypkg:factory"]) == 2
    assert capsys.readouterr().err == (
        "memcert certify: --serve certifies the reference store served by memcert, so it "
        "takes no backend, but 'mypkg:factory' was given; to certify your own service, give "
        "its URL instead\n")


def test_each_condition_counts_only_what_the_fault_it_names_could_explain():
    recorder = HistoryRecorder(keep=True)
    a, b = 0, 1
    meta = WriteMeta("f1", "city")

    def write(worker: int, value: str) -> Write:
        return Write("ns", f"e{worker}", "city", value, 1, f"op-{value}")

    events = []

    def note(do: str, workers: list[int], **extra: object) -> None:
        events.append({"do": do, "begin": len(recorder), "end": len(recorder),
                       "workers": workers, **extra})

    recorder.info(recorder.invoke(b, write(b, "v1"), meta=meta), "OutcomeUnknown: before")
    note("add_toxic", [a], toxic={"name": "lag"})
    recorder.info(recorder.invoke(a, write(a, "v2"), meta=meta), "OutcomeUnknown: on a")
    recorder.info(recorder.invoke(b, write(b, "v3"), meta=meta), "OutcomeUnknown: b spared")
    note("remove_toxic", [a], name="lag")
    note("partition", [b], groups=["b"])
    recorder.fail(recorder.invoke(b, Read("ns", "e1")), "OutcomeUnknown: refused")
    recorder.ok(recorder.invoke(a, Read("ns", "e0")), [])
    note("heal", [a, b])
    recorder.info(recorder.invoke(b, write(b, "v4"), meta=meta), "OutcomeUnknown: after")
    recorder.ok(recorder.invoke(a, write(a, "v5"), meta=meta), Ack(True, 1))
    flying = recorder.invoke(b, write(b, "v6"), meta=meta)
    note("kill", [a, b])
    recorder.info(flying, "OutcomeUnknown: reset")
    note("restart", [a, b])
    recorder.ok(recorder.invoke(a, Read("ns", "e0")),
                [Record("e0", "city", "v5", 1, 1)])

    counts = measure(recorder.history(), events)
    assert {name: counts[name] for name in ("network_fault_during_ops", "partition_cut_ops",
                                            "crash_lost_in_flight",
                                            "writes_acked_before_crash")} == {
        "network_fault_during_ops": 1, "partition_cut_ops": 1, "crash_lost_in_flight": 1,
        "writes_acked_before_crash": 1}
    assert measure(recorder.history())["partition_cut_ops"] == 0


def cut_short_by_each_kill(out: Path, nemesis: Sequence[Mapping[str, Any]]) -> list[int]:
    """How many operations each kill of a run cut short, from its history."""
    history = read_history(out / "history.jsonl")
    crashes = [(kill, restart) for kill, restart in itertools.pairwise(nemesis)
               if kill["do"] == "kill" and restart["do"] == "restart"]
    return [measure(history, list(crash))["crash_lost_in_flight"] for crash in crashes]


@pytest.mark.slow
def test_crash_restart_on_postgres_loses_no_acknowledged_write(tmp_path, fresh_pg_url):
    """Durability needs an operation in flight at a kill. Killing as soon as one was
    outstanding left none cut short by either kill once, under a loaded CI run
    (durability unknown); the service is now frozen first, and killed once a request
    it cannot answer is on its way, so every kill cuts one short."""
    with managed_service(fresh_pg_url) as served:
        report = certify(served, options(tmp_path, suite=suite_of(tmp_path, "crash_restart"),
                                         workers=8))
    assert report.invariants["durability"].verdict == "pass"
    assert report.verdict == "certified", render_table(report)
    assert report.coverage["writes_acked_before_crash"] > 0
    assert report.scenarios[0].faults_fired == {"kill": 2, "restart": 2}
    cut = cut_short_by_each_kill(tmp_path / "out", report.scenarios[0].nemesis)
    assert len(cut) == 2 and min(cut) > 0, cut
    assert report.command.startswith(f"memcert certify --serve --db {fresh_pg_url} --seed ")


@pytest.mark.parametrize(("given", "shown"), [
    ("postgresql://memcert:s3cret@db:5432/mem", "postgresql://memcert:***@db:5432/mem"),
    ("postgresql://memcert@db/mem", "postgresql://memcert@db/mem"),
    ("/var/lib/memcert/store.sqlite3", "/var/lib/memcert/store.sqlite3"),
])
def test_the_reproduce_command_never_shows_a_database_password(given, shown):
    from chaos.service import _without_password

    assert _without_password(given) == shown


@pytest.mark.slow
def test_chaos_rounds_keep_what_the_nemesis_did(tmp_path):
    from chaos.chaos_run import ChaosOptions, run_chaos

    with managed_service(str(tmp_path / "store.sqlite3")) as served:
        report = run_chaos(served, ChaosOptions(
            duration_s=12.0, scenarios=("partition",), seed=20261130, out=tmp_path / "out"))
    partition = {s.name: s for s in report.scenarios}["partition"]
    assert not partition.not_run
    assert [e for e in partition.nemesis if e["do"] == "partition"]
    assert report.coverage["partition_cut_ops"] > 0
    assert report.invariants["durability"].verdict == "pass", render_table(report)
