"""The memcert command as a user meets it: exit codes, messages, files, replay."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chaos.cli import main


def memcert(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_help_teaches_the_commands_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "certify" in out and "replay" in out
    assert "Exit codes: 0 certified, 1 failed, 2 usage error, 3 unknown." in out


def test_a_mistyped_command_gets_did_you_mean(capsys):
    assert main(["certfy"]) == 2
    err = capsys.readouterr().err
    assert "Did you mean 'certify'?" in err


@pytest.mark.parametrize(("spec", "message"), [
    ("nodots", "memcert: backend 'nodots' is not of the form package.module:callable; "
               "for example reference_store:factory"),
    ("no_such_pkg.mod:factory", "memcert: backend 'no_such_pkg.mod:factory': cannot import "
                                "'no_such_pkg.mod' (No module named 'no_such_pkg'). Install "
                                "the package or run memcert from the folder that contains it."),
    ("chaos.examples:nope", None),
    ("chaos.examples:KNOWN_BAD", "memcert: backend 'chaos.examples:KNOWN_BAD' names a "
                                 "mappingproxy, not a callable"),
])
def test_a_broken_factory_is_a_usage_error_without_a_traceback(tmp_path, capsys, spec,
                                                                message):
    assert main(["certify", spec, "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if message is not None:
        assert err.strip() == message
    else:
        assert err.startswith("memcert: backend 'chaos.examples:nope': module "
                              "'chaos.examples' has no attribute 'nope'; it has ")


def raising_factory():
    raise RuntimeError("database is down")


def test_a_factory_that_raises_is_named(tmp_path, capsys):
    code = main(["certify", "tests.chaos.test_cli:raising_factory", "--out", str(tmp_path),
                 "--quiet"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "memcert: backend 'tests.chaos.test_cli:raising_factory': calling the factory raised "
        "RuntimeError: database is down")


class _BlindBackend:
    """Writes work, reads always fail: nothing can be checked, so nothing may pass."""

    def __init__(self):
        from chaos.examples import in_memory
        self._inner = in_memory()

    def write(self, op):
        return self._inner.write(op)

    def delete(self, op):
        return self._inner.delete(op)

    def restore(self, op):
        return self._inner.restore(op)

    def read(self, namespace, entity_id):
        raise ConnectionError("read path is down")

    def reset(self):
        self._inner.reset()

    def close(self):
        self._inner.close()


@pytest.mark.slow
def test_nothing_checked_is_unknown_with_exit_code_3(tmp_path, capsys):
    code = main(["certify", "tests.chaos.test_cli:_BlindBackend", "--out", str(tmp_path),
                 "--quiet", "--seed", "5", "--budget", "20", "--suite", "quick"])
    assert code == 3
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["verdict"] == "unknown"
    assert {v["verdict"] for v in saved["invariants"].values()} == {"unknown"}
    assert "verdict: UNKNOWN" in capsys.readouterr().out


@pytest.mark.slow
def test_certify_then_replay_from_the_command_line(tmp_path):
    failed = memcert("certify", "chaos.examples:restore_revives", "--seed", "11", "--out",
                     str(tmp_path), "--quiet", "--suite", "quick", "--budget", "30")
    assert failed.returncode == 1, failed.stderr
    assert "deletion_monotonicity   FAIL" in failed.stdout
    assert "reproduce: memcert certify chaos.examples:restore_revives --seed 11" in failed.stdout
    replayed = memcert("replay", str(tmp_path))
    assert replayed.returncode == 1
    assert "deletion_monotonicity   FAIL" in replayed.stdout


def test_replay_of_a_folder_without_a_run_is_a_usage_error(tmp_path, capsys):
    assert main(["replay", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"memcert replay: {tmp_path} holds no history.jsonl (or history.jsonl.zst) and "
        "results.json; pass the --out folder of a memcert certify run")


def test_the_same_seed_gives_the_same_plan():
    from scenarios import load_suite

    suite = load_suite("certify")
    first = suite.plans(seed=42, workers=4, level="lexical")
    again = suite.plans(seed=42, workers=4, level="lexical")
    other = suite.plans(seed=43, workers=4, level="lexical")
    assert first == again
    assert first != other
