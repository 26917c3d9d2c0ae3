"""``memcert chaos`` as a platform team meets it: rounds until stopped, a verdict after.

The stop tests send real signals to a real ``memcert chaos`` process, and the metrics
test scrapes its real /metrics endpoint while it runs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import zstandard
from prometheus_client.parser import text_string_to_metric_families

from chaos.chaos_run import ChaosOptions, round_seed
from chaos.cli import main
from chaos.examples import KNOWN_BAD, InMemoryBackend, SharedFactory
from chaos.report import INVARIANTS
from invariants.errors import InvalidArgument
from invariants.history import read_history

SEED = "20261129"
INVARIANT_OF = {checker: name for name, checkers in INVARIANTS.items() for checker in checkers}


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "chaos.cli", "chaos", *args],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, what: str, process: subprocess.Popen[str], timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"memcert chaos ended ({process.returncode}) before {what}: "
                        f"{process.communicate()}")
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"no {what} within {timeout_s} s: {process.communicate()}")


def rounds(out: Path) -> list[dict]:
    path = out / "rounds.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


@pytest.mark.slow
def test_a_short_run_of_the_reference_store_is_certified(tmp_path, monkeypatch, sqlite_url,
                                                         capsys):
    monkeypatch.setenv("MEMCERT_DB_URL", sqlite_url)
    out = tmp_path / "out"
    # Long enough for every in-process scenario's conditions on a loaded 2-core machine: a
    # round too short leaves an invariant unknown (exit 3), which is not what this tests;
    # the worker-process scenarios need more than six seconds, and tests of their own.
    assert main(["chaos", "--duration", "6", "--seed", SEED, "--processes", "0", "--out",
                 str(out), "--quiet"]) == 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["verdict"] == "certified"
    assert saved["reproduce"] == (f"memcert chaos --seed {SEED} --duration 6 --level lexical "
                                  "--workers 8 --processes 0")
    assert [s["name"] for s in saved["scenarios"]] == [
        "out_of_order_causal", "value_diversity", "concurrent_writes", "delete_then_write",
        "paraphrase_flood", "mixed", "process_writes", "crash_worker", "crash_restart",
        "pause"]
    assert {s["name"] for s in saved["scenarios"] if s["not_run"]} == {
        "process_writes", "crash_worker", "crash_restart", "pause"}
    first = rounds(out)[0]
    assert (first["round"], first["seed"], first["namespace_suffix"]) == (0, int(SEED), "")
    assert (out / "junit.xml").is_file()
    assert "verdict: CERTIFIED" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "scenarios"), [
    # The scenario that deletes and restores: three seconds of the whole default suite
    # (ten scenarios) may not reach a restore.
    ("chaos.examples:restore_revives", ("--scenario", "delete_then_write")),
    ("chaos.examples:racy_upsert", ("--scenario", "concurrent_writes")),
])
def test_a_known_bad_backend_fails_the_invariant_it_breaks(tmp_path, capsys, backend,
                                                          scenarios):
    out = tmp_path / "out"
    code = main(["chaos", backend, *scenarios, "--duration", "3", "--seed", SEED,
                 "--out", str(out), "--quiet"])
    assert code == 1
    saved = json.loads((out / "results.json").read_text())
    for checker in KNOWN_BAD[backend]:
        assert saved["invariants"][INVARIANT_OF[checker]]["verdict"] == "fail"
        assert saved["checks"][checker]["violation_count"] > 0
    printed = capsys.readouterr().out
    assert "verdict: FAILED" in printed
    assert f"reproduce: memcert chaos {backend} --seed {SEED} --duration 3" in printed


@pytest.mark.slow
def test_sigterm_ends_the_run_with_a_verdict_and_a_complete_history(tmp_path):
    out = tmp_path / "out"
    process = start("chaos.examples:in_memory", "--seed", SEED, "--out", str(out), "--quiet",
                    cwd=tmp_path)
    # Into the second round: round 0 ran every scenario whole, so the verdict can be
    # decided whatever the stop cuts short.
    wait_for(lambda: any(r["round"] == 1 for r in rounds(out)), "a second round", process)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    assert "memcert: SIGTERM: stopping after the operations in flight" in stderr
    assert "verdict: CERTIFIED" in stdout
    saved = json.loads((out / "results.json").read_text())
    assert saved["verdict"] == "certified"
    assert not (out / "history.jsonl").exists(), "memcert chaos records compressed"
    history = read_history(out / "history.jsonl.zst")  # refuses an op without its completion
    with open(out / "history.jsonl.zst", "rb") as compressed:
        plain = zstandard.ZstdDecompressor().stream_reader(compressed, read_across_frames=True)
        lines = plain.read().count(b"\n")
    assert saved["history_entries"] == len(history) == lines
    ran = rounds(out)
    assert ran[-1]["end_entry"] == lines
    assert [r["first_entry"] for r in ran[1:]] == [r["end_entry"] for r in ran[:-1]]
    assert ran[-1]["round"] >= 1 and ran[-1]["seed"] == round_seed(int(SEED), ran[-1]["round"])


def scrape(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples if sample.name == name)


@pytest.mark.slow
def test_violation_counters_move_on_metrics_while_the_run_goes_on(tmp_path):
    out = tmp_path / "out"
    process = start("chaos.examples:restore_revives", "--metrics-port", "0", "--seed", SEED,
                    "--out", str(out), "--quiet", cwd=tmp_path)
    banner = process.stderr.readline() if process.stderr else ""
    assert banner.startswith("memcert: serving metrics at http://127.0.0.1:"), banner
    url = banner.split(" at ")[1].strip()
    first = wait_for(lambda: scrape(url, "memcert_resurrections_total"),
                     "a resurrection on /metrics", process)
    later = wait_for(lambda: (seen := scrape(url, "memcert_resurrections_total")) > first
                     and seen, "the resurrection counter moving", process)
    assert process.poll() is None and later > first > 0
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "deletion_monotonicity   FAIL" in stdout
    saved = json.loads((out / "results.json").read_text())
    assert saved["checks"]["deletion_monotonicity"]["violation_count"] >= later


def test_rounds_after_the_first_get_seeds_of_their_own():
    seeds = [round_seed(7, number) for number in range(50)]
    assert seeds[0] == 7
    assert len(set(seeds)) == 50
    assert seeds == [round_seed(7, number) for number in range(50)]


@pytest.mark.parametrize(("options", "message"), [
    ({"duration_s": 0}, "duration_s=0 must be a positive number of seconds, or None to run "
                        "until stopped."),
    ({"scenarios": "mixed"}, "scenarios='mixed' is a string; pass a tuple of names, e.g. "
                             "('mixed',)."),
    ({"scenarios": ("mixed", "mixed")}, "scenarios=('mixed', 'mixed') names a scenario "
                                        "twice; name each once."),
    ({"workers": 0}, "workers=0 must be an int >= 1."),
])
def test_bad_options_say_what_to_pass(options, message):
    with pytest.raises(InvalidArgument) as raised:
        ChaosOptions(**options)
    assert str(raised.value) == message


def test_an_unknown_scenario_is_a_usage_error(tmp_path, capsys):
    assert main(["chaos", "--scenario", "mixd", "--out", str(tmp_path), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(
        "memcert: scenario='mixd' (type str) is not a known scenario. Did you mean 'mixed'?")


def test_scenario_and_suite_do_not_mix(capsys):
    assert main(["chaos", "--scenario", "mixed", "--suite", "nightly"]) == 2
    assert "argument --suite: not allowed with argument --scenario" in capsys.readouterr().err


def test_help_teaches_by_example(capsys):
    with pytest.raises(SystemExit):
        main(["chaos", "--help"])
    text = capsys.readouterr().out
    assert "memcert chaos mypkg.store:factory --metrics-port 9464   # until Ctrl-C" in text
    for env in ("MEMCERT_CHAOS_DURATION", "MEMCERT_CHAOS_SCENARIOS", "MEMCERT_CHAOS_SUITE",
                "MEMCERT_SEED", "MEMCERT_LEVEL", "MEMCERT_WORKERS", "MEMCERT_PROCESSES",
                "MEMCERT_CHAOS_OUT", "MEMCERT_QUIET", "MEMCERT_METRICS_PORT",
                "MEMCERT_PUSHGATEWAY", "MEMCERT_TOKEN"):
        assert env in text


def test_scenarios_from_the_environment_give_way_to_a_suite_on_the_command_line(
        monkeypatch):
    from chaos.cli_parser import build_parser

    monkeypatch.setenv("MEMCERT_CHAOS_SCENARIOS", "mixed, concurrent_writes")
    assert build_parser().parse_args(["chaos"]).scenario == ["mixed", "concurrent_writes"]
    given = build_parser().parse_args(["chaos", "--scenario", "a", "b", "--scenario", "c"])
    assert given.scenario == ["a", "b", "c"]
    suite = build_parser().parse_args(["chaos", "--suite", "nightly"])
    assert (suite.scenario, suite.suite) == (None, "nightly")


def test_every_option_is_documented_in_docs_chaos_md():
    import argparse

    from chaos.cli_parser import build_parser

    text = (Path(__file__).resolve().parents[2] / "docs" / "chaos.md").read_text()
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    options = [flag for action in commands.choices["chaos"]._actions
               for flag in action.option_strings if flag.startswith("--") and flag != "--help"]
    assert len(options) == 15
    assert [flag for flag in options if f"`{flag}" not in text] == []


class _SlowReads(InMemoryBackend):
    """Reads take 20 ms, so each scenario's final reads, which come after its share of
    the round, overrun it by far."""

    def read(self, namespace, entity_id):
        time.sleep(0.02)
        return super().read(namespace, entity_id)


slow_reads = SharedFactory(_SlowReads)


@pytest.mark.slow
def test_a_short_first_round_still_runs_every_scenario(tmp_path):
    out = tmp_path / "out"
    main(["chaos", "tests.chaos.test_chaos_command:slow_reads", "--duration", "1", "--seed",
          SEED, "--out", str(out), "--quiet"])
    first = [r for r in rounds(out) if r["round"] == 0]
    assert [r["scenario"] for r in first] == [
        "out_of_order_causal", "value_diversity", "concurrent_writes", "delete_then_write",
        "paraphrase_flood", "mixed", "process_writes", "crash_worker", "crash_restart",
        "pause"]
    # The last four need a store shared across processes, or a service memcert runs.
    assert all(r["steps_done"] > 0 for r in first[:6]), first
