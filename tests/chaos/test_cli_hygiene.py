"""The command line's rough edges, smoothed: a bad --out, --version, errors worded by flag
with the subcommand's own help hint and "Did you mean", a factory module that fails on
its own imports, where a run's report went, and a backend after a --scenario list."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

import pytest

from chaos import certify
from chaos.certify import CertifyOptions
from chaos.cli import main
from chaos.cli_parser import STATEFUL_SHARE_MAX, build_parser
from invariants.errors import InvalidArgument

FIX = "give a folder, which is created if missing"


def hint(command: str) -> str:
    return f"(run 'memcert {command} --help' for usage)"


def files_under(root: Path) -> list[Path]:
    return sorted(root.rglob("*"))


# -- --out ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["certify", "nightly", "chaos", "load"])
def test_an_out_that_is_a_file_exits_2_naming_the_flag_and_writes_nothing(
        tmp_path, capsys, command):
    taken = tmp_path / "results.txt"
    taken.write_text("keep me\n")
    assert main([command, "--out", str(taken), "--quiet"] if command != "load"
                else [command, "--out", str(taken)]) == 2
    assert capsys.readouterr().err == (
        f"memcert {command}: --out {taken} is a file, not a folder; {FIX}\n{hint(command)}\n")
    assert taken.read_text() == "keep me\n"
    assert files_under(tmp_path) == [taken]


@pytest.mark.parametrize("command", ["certify", "nightly", "chaos", "load"])
def test_an_out_below_a_file_cannot_be_created(tmp_path, capsys, command):
    taken = tmp_path / "a-file"
    taken.write_text("")
    out = taken / "run"
    assert main([command, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"memcert {command}: --out {out} cannot be created, since {taken} is a file; "
        f"{FIX}\n{hint(command)}\n")
    assert files_under(tmp_path) == [taken]


@pytest.mark.parametrize("command", ["certify", "nightly", "chaos", "load"])
def test_an_out_the_operating_system_will_not_let_us_write_is_refused(
        tmp_path, monkeypatch, capsys, command):
    """A folder the process may not write into is refused as the kernel would refuse it
    (os.access says no here, as it does to root on a read-only mount and to anyone else
    in a folder without write permission), before anything is written."""
    locked = tmp_path / "read-only"
    locked.mkdir()
    real_access = os.access

    def access(path, mode, **kwargs):
        return Path(path) != locked and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    assert main([command, "--out", str(locked / "run")]) == 2
    assert capsys.readouterr().err == (
        f"memcert {command}: --out {locked / 'run'} cannot be written: no permission to write "
        f"in {locked}; {FIX}\n{hint(command)}\n")
    assert files_under(locked) == []


# -- --version --------------------------------------------------------------------------


def test_version_prints_memcerts_installed_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"memcert {metadata.version('memcert')}\n"


# -- usage errors name the flag, with the subcommand's help hint -------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["certify", "--budget", "-5"], "--budget must be a positive number of seconds, not '-5'"),
    (["certify", "--budget", "soon"],
     "--budget must be a positive number of seconds, not 'soon'"),
    (["certify", "--workers", "0"], "--workers must be a whole number >= 1, not '0'"),
    (["certify", "--processes", "-1"], "--processes must be a whole number >= 0, not '-1'"),
    (["certify", "--stateful-share", "0.9"],
     "--stateful-share must be a fraction from 0 (no stateful phase) to 0.8, not '0.9'"),
    (["certify", "--seed", "x"], "--seed must be a whole number, not 'x'"),
    (["certify", "--metrics-port", "70000"],
     "--metrics-port must be a TCP port, 0 to 65535 (0 picks a free one), not '70000'"),
    (["certify", "--pushgateway", "pushgateway:9091"],
     "--pushgateway must be an http(s) URL, e.g. http://127.0.0.1:9091, not "
     "'pushgateway:9091'"),
    (["nightly", "--budget", "0"], "--budget must be a positive number of seconds, not '0'"),
    (["nightly", "--keep", "-1"], "--keep must be a whole number >= 0, not '-1'"),
    (["chaos", "--duration", "inf"],
     "--duration must be a positive number of seconds, not 'inf'"),
    (["chaos", "--workers", "0"], "--workers must be a whole number >= 1, not '0'"),
    (["load", "--users", "0"], "--users must be a whole number >= 1, not '0'"),
    (["load", "--duration", "0.5"], "--duration must be at least 1 second, not '0.5'"),
    (["load", "--spawn-rate", "0"],
     "--spawn-rate must be a positive number of users per second, not '0'"),
    (["serve", "--port", "-1"],
     "--port must be a TCP port, 0 to 65535 (0 picks a free one), not '-1'"),
    (["serve", "--handles", "0"], "--handles must be a whole number >= 1, not '0'"),
])
def test_a_bad_value_is_named_by_its_flag_with_the_subcommands_help(capsys, args, message):
    assert main(args) == 2
    assert capsys.readouterr().err == f"memcert {args[0]}: {message}\n{hint(args[0])}\n"


def test_a_bad_value_from_the_environment_is_named_by_its_flag(monkeypatch, capsys):
    monkeypatch.setenv("MEMCERT_WORKERS", "0")
    assert main(["certify"]) == 2
    assert capsys.readouterr().err == (
        f"memcert certify: --workers must be a whole number >= 1, not '0'\n{hint('certify')}\n")


def test_the_stateful_share_bound_is_certifys_own():
    assert STATEFUL_SHARE_MAX == certify.STATEFUL_SHARE_MAX
    CertifyOptions(stateful_share=STATEFUL_SHARE_MAX)
    with pytest.raises(InvalidArgument):
        CertifyOptions(stateful_share=STATEFUL_SHARE_MAX + 0.01)


@pytest.mark.parametrize(("args", "message"), [
    (["certify", "--budgt", "5"],
     "unrecognized arguments: --budgt. Did you mean --budget?"),
    (["certify", "--fail-fst"], "unrecognized arguments: --fail-fst. Did you mean --fail-fast?"),
    (["chaos", "--duraton=5", "--quiet"],
     "unrecognized arguments: --duraton=5. Did you mean --duration?"),
    (["nightly", "--kep", "3"], "unrecognized arguments: --kep. Did you mean --keep?"),
    (["load", "--usres", "3"], "unrecognized arguments: --usres 3. Did you mean --users?"),
    (["replay", "out", "--verbose"], "unrecognized arguments: --verbose"),
])
def test_an_unknown_flag_gets_did_you_mean_from_its_subcommand(capsys, args, message):
    assert main(args) == 2
    assert capsys.readouterr().err == f"memcert {args[0]}: {message}\n{hint(args[0])}\n"


def test_a_flag_of_another_subcommand_is_not_suggested():
    """``--fail-fast`` is certify's: chaos has nothing like it to offer."""
    with pytest.raises(Exception) as refused:
        build_parser().parse_args(["chaos", "--fail-fast"])
    assert str(refused.value) == (
        f"memcert chaos: unrecognized arguments: --fail-fast\n{hint('chaos')}")


def test_a_bad_choice_shows_the_subcommands_help(capsys):
    assert main(["certify", "--level", "loose"]) == 2
    assert capsys.readouterr().err.endswith(f"\n{hint('certify')}\n")


# -- a factory module that fails on its own imports --------------------------------------


@pytest.fixture
def broken_module(tmp_path, monkeypatch):
    """A backend module in the working directory whose first line imports a dependency
    that is not installed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "store_needing_a_driver.py").write_text(
        "import memcert_no_such_driver\n\n\ndef factory():\n    return None\n")
    return tmp_path / "store_needing_a_driver.py"


def test_an_import_error_inside_the_factory_module_is_shown_as_it_is(broken_module, capsys):
    assert main(["certify", "store_needing_a_driver:factory", "--out", "out", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "memcert: backend 'store_needing_a_driver:factory': importing 'store_needing_a_driver' "
        f"failed in {broken_module}, line 1: ModuleNotFoundError: No module named "
        "'memcert_no_such_driver'\n")
    assert "Install the package" not in err


@pytest.mark.parametrize("command", ["certify", "nightly", "chaos"])
def test_debug_shows_the_full_traceback(broken_module, capsys, command):
    assert main([command, "store_needing_a_driver:factory", "--out", "out", "--quiet",
                 "--debug"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert f'File "{broken_module}", line 1, in <module>\n    import memcert_no_such_driver' in err
    assert err.splitlines()[-1] == (
        "memcert: backend 'store_needing_a_driver:factory': importing 'store_needing_a_driver' "
        f"failed in {broken_module}, line 1: ModuleNotFoundError: No module named "
        "'memcert_no_such_driver'")


def test_a_missing_module_inside_an_existing_package_keeps_the_install_advice(capsys):
    assert main(["certify", "chaos.no_such_module:factory", "--out", "out", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "memcert: backend 'chaos.no_such_module:factory': cannot import "
        "'chaos.no_such_module' (No module named 'chaos.no_such_module'). Install the package "
        "or run memcert from the folder that contains it.\n")


# -- a backend after a --scenario list -------------------------------------------------


@pytest.mark.parametrize(("args", "backend", "scenarios"), [
    (["--scenario", "mixed", "pkg.store:factory"], "pkg.store:factory", ["mixed"]),
    (["--scenario", "mixed", "delete_then_write", "http://127.0.0.1:8765"],
     "http://127.0.0.1:8765", ["mixed", "delete_then_write"]),
    (["pkg.store:factory", "--scenario", "mixed", "scenarios/mine.toml"],
     "pkg.store:factory", ["mixed", "scenarios/mine.toml"]),
    (["--scenario", "mixed", "pkg:factory", "--scenario", "partition"], "pkg:factory",
     ["mixed", "partition"]),
])
def test_a_backend_can_follow_the_scenario_list(args, backend, scenarios):
    parsed = build_parser().parse_args(["chaos", *args])
    assert (parsed.backend, parsed.scenario) == (backend, scenarios)


@pytest.mark.parametrize(("args", "message"), [
    (["a:factory", "--scenario", "mixed", "b:factory"],
     "one backend at most, but 'a:factory', 'b:factory' were given"),
    (["--scenario", "mixed", "a:factory", "b:factory"],
     "one backend at most, but 'a:factory', 'b:factory' were given"),
    (["--scenario", "a:factory"], "--scenario needs at least one scenario name"),
])
def test_two_backends_or_no_scenario_is_a_usage_error(capsys, args, message):
    assert main(["chaos", *args]) == 2
    assert capsys.readouterr().err == f"memcert chaos: {message}\n{hint('chaos')}\n"


# -- where the report went --------------------------------------------------------------


@pytest.mark.slow
def test_chaos_runs_the_backend_after_the_scenario_list_and_prints_where_it_saved(
        tmp_path, capsys):
    out = tmp_path / "chaos"
    code = main(["chaos", "--scenario", "delete_then_write", "chaos.examples:restore_revives",
                 "--duration", "2", "--seed", "3", "--out", str(out), "--quiet"])
    assert code == 1
    assert json.loads((out / "results.json").read_text())["backend"] == (
        "chaos.examples:restore_revives")
    printed = capsys.readouterr().out
    assert printed.endswith(f"\noutput: {out.resolve().as_uri()}\n")


@pytest.mark.slow
def test_nightly_prints_its_reports_path(tmp_path, capsys):
    code = main(["nightly", "chaos.examples:in_memory", "--suite", "quick", "--out",
                 str(tmp_path), "--budget", "3",
                 "--stateful-share", "0", "--seed", "5", "--quiet"])
    assert code in (0, 3)
    (night,) = [path.parent for path in tmp_path.glob("*/report.html")]
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2:] == [f"report: {(night / 'report.html').as_uri()}",
                            f"index: {(tmp_path / 'index.html').as_uri()}"]


@pytest.mark.slow
def test_certify_prints_its_folder(tmp_path, capsys):
    out = tmp_path / "run"
    main(["certify", "chaos.examples:in_memory", "--out", str(out), "--budget", "3",
          "--stateful-share", "0", "--seed", "5", "--quiet"])
    assert capsys.readouterr().out.endswith(f"\noutput: {out.resolve().as_uri()}\n")
