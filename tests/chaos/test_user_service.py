"""Crash chaos for a user's own HTTP service: memcert starts it, kills and stalls it.

The example service keeps its store in memory and an operation log on disk. Logged
after the answer, it passes every run without a crash and loses acknowledged writes
under crash_restart; logged before, it keeps them through kills and pauses.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from chaos.cli import main
from invariants.errors import InvalidInput
from scenarios import load_suite

SERVICE = f"{shlex.quote(sys.executable)} -m chaos.examples.http_service --port {{port}}"
URL = "http://127.0.0.1:{port}"


def suite(tmp_path: Path, *names: str, table: str = "") -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "suite.toml"
    share = 1 / len(names)
    path.write_text('description = "test"\nbudget_s = 20\n' + table + "".join(
        f'[[scenarios]]\nname = "{name}"\nshare = {share!r}\n' for name in names),
        encoding="utf-8")
    return str(path)


def certify(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out"
    code = main(["certify", *args, "--out", str(out), "--quiet", "--seed", "4",
                 "--level", "surface", "--stateful-share", "0", "--budget", "16"])
    return code, json.loads((out / "results.json").read_text(encoding="utf-8"))


def scenario(saved: dict, name: str) -> dict:
    return next(s for s in saved["scenarios"] if s["name"] == name)


@pytest.mark.slow
def test_a_service_that_logs_after_answering_loses_writes_only_when_killed(tmp_path):
    data = tmp_path / "data"
    # Two seconds between appends, so each kill loses many acknowledged writes and a
    # later read looks for some of them before newer writes supersede them all; at the
    # default 50 ms a run may lose none that is read again.
    code, saved = certify(tmp_path, URL, "--service-cmd",
                          f"{SERVICE} --data {data} --batch-s 2",
                          "--suite", suite(tmp_path, "crash_restart"))
    assert code == 1
    assert saved["invariants"]["durability"]["verdict"] == "fail"
    assert scenario(saved, "crash_restart")["faults_fired"] == {"kill": 2, "restart": 2}
    assert "--service-cmd" in saved["reproduce"]

    calm = tmp_path / "calm"
    code, saved = certify(calm, URL, "--service-cmd",
                          f"{SERVICE} --data {calm / 'data'} --batch-s 0.5",
                          "--suite", suite(calm, "mixed", "pause"))
    assert saved["invariants"]["durability"]["verdict"] == "pass", saved["invariants"]


@pytest.mark.slow
def test_a_service_that_logs_before_answering_keeps_every_ack_through_kills_and_pauses(
        tmp_path):
    data = tmp_path / "data"
    code, saved = certify(tmp_path, URL, "--service-cmd", f"{SERVICE} --data {data} --durable",
                          "--service-health", "http://127.0.0.1:{port}/healthz",
                          "--suite", suite(tmp_path, "crash_restart", "pause"))
    assert saved["invariants"]["durability"]["verdict"] == "pass", saved["invariants"]
    assert saved["invariants"]["causal_monotonicity"]["verdict"] == "pass"
    for condition in ("crash_lost_in_flight", "writes_acked_before_crash",
                      "answered_across_pause"):
        assert saved["coverage"][condition] > 0, condition
    pause = scenario(saved, "pause")
    assert pause["faults_fired"] == {"pause": 2}
    assert [e["do"] for e in pause["nemesis"]] == ["pause", "resume", "pause", "resume", "heal"]
    assert code == 0


@pytest.mark.slow
def test_a_service_table_in_the_suite_starts_it_and_without_one_the_crashes_are_not_run(
        tmp_path):
    data = tmp_path / "data"
    table = f'[service]\ncommand = "{SERVICE} --data {data} --durable"\n'.replace("\\", "\\\\")
    _, saved = certify(tmp_path, URL, "--suite", suite(tmp_path, "crash_restart", table=table))
    assert scenario(saved, "crash_restart")["not_run"] is None
    assert scenario(saved, "crash_restart")["faults_fired"]["kill"] == 2

    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    _, saved = certify(elsewhere, "chaos.examples.passing_dict:passing_dict", "--suite",
                       suite(elsewhere, "mixed", "crash_restart", "pause"))
    for name in ("crash_restart", "pause"):
        assert "needs a backend reached over HTTP" in scenario(saved, name)["not_run"]


def test_a_service_that_exits_says_so_with_its_last_lines(tmp_path, capsys):
    command = f"{shlex.quote(sys.executable)} -c \"print('no such flag --port {{port}}'); " \
              "raise SystemExit(4)\""
    code = main(["certify", URL, "--service-cmd", command, "--out", str(tmp_path / "o"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "exited with code 4" in err and "no such flag --port" in err
    assert not (tmp_path / "o" / "results.json").exists()


def test_a_service_that_never_answers_times_out_naming_the_flag(tmp_path, capsys):
    command = f"{shlex.quote(sys.executable)} -c \"import time; time.sleep(60)\""
    code = main(["certify", URL, "--service-cmd", command, "--service-timeout", "1",
                 "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "did not answer" in err and "--service-timeout" in err


@pytest.mark.parametrize(("argv", "said"), [
    (["certify", URL, "--service-health", "http://127.0.0.1:1/h"],
     "--service-health goes with --service-cmd, which was not given"),
    (["certify", "--serve", "--service-cmd", "x"], "give one of the two"),
    (["certify", "--service-cmd", "x"], "needs the URL your service answers at"),
    (["certify", URL, "--service-cmd", "  "], "--service-cmd is empty"),
    (["certify", URL, "--service-cmd", "x", "--service-timeout", "0"],
     "--service-timeout must be a number of seconds in (0, 600]"),
])
def test_service_flags_are_checked_before_anything_starts(tmp_path, capsys, argv, said):
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("table", "field"), [
    ("[service]\n", "service.command"),
    ('[service]\ncommand = "x"\nhealth_url = "ftp://x"\n', "service.health_url"),
    ('[service]\ncommand = "x"\nstart_timeout_s = 0\n', "service.start_timeout_s"),
    ('[service]\ncommand = "x"\nport = 1\n', "service.port"),
    ('[service]\ncommand = "x \'unclosed"\n', "service.command"),
])
def test_a_bad_service_table_names_its_field(tmp_path, table, field):
    with pytest.raises(InvalidInput) as caught:
        load_suite(suite(tmp_path, "mixed", table=table))
    assert field in str(caught.value)
