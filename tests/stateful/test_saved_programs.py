"""The programs a failing ``memcert certify`` saves under ``stateful/``: one per invariant
broken, each judged by its own checker, printing every operation as the backend received
it, and runnable from any folder, as a person handed the report folder would run them.

The backend is a known-bad one behind a module that only its own folder can import, and
the saved programs are run in another folder, in a fresh interpreter.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from chaos.examples import KNOWN_BAD, InMemoryBackend, SharedFactory
from invariants.backend import Record
from invariants.checkers import CHECKER_NAMES
from invariants.stateful import VIOLATED, run_stateful_phase

from .support import isolated_env, untimed

pytestmark = pytest.mark.slow

SPEC = "shop_store:factory"
BROKEN = KNOWN_BAD["chaos.examples:raw_attribute_keys"]
"""What the store breaks: it files records under the attribute name as written."""

_STEP_LINE = re.compile(r".*  # step (\d+)$")
_CITED = re.compile(r"\bop (\d+)\b|\bindex (\d+)\b")
_WRITE = re.compile(r"op (\d+): write \S+ ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
"""A write as explanations and the echo show it: its op number and attribute as sent."""


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One failing certification, run as a user runs it: from the store's own folder."""
    store = tmp_path_factory.mktemp("store")
    (store / "shop_store.py").write_text(
        '"""A store that keeps attribute names as written."""\n\n'
        "from chaos.examples import raw_attribute_keys as factory\n\n"
        '__all__ = ["factory"]\n',
        encoding="utf-8")
    out = tmp_path_factory.mktemp("report") / "out"
    ran = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "certify", SPEC, "--budget", "8", "--seed", "7",
         "--workers", "2", "--stateful-share", "0.8", "--out", str(out)],
        capture_output=True, text=True, cwd=store, env=isolated_env(), check=False)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def _run_elsewhere(program: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                          cwd=folder, env=isolated_env(), check=False)


def test_one_program_is_saved_per_invariant_broken_and_names_only_it(certified):
    out, results = certified
    saved = results["stateful"]["saved"]

    assert "uniqueness" in saved
    assert set(saved) <= set(BROKEN)
    assert sorted(p.name for p in (out / "stateful").iterdir()) == sorted(
        f"{checker}.py" for checker in saved)
    for checker, path in saved.items():
        program = Path(path).read_text(encoding="utf-8")
        others = [name for name in CHECKER_NAMES if name != checker]
        assert program.splitlines()[:2] == [
            f"# memcert: the shortest program found that breaks {checker}", f"# on {SPEC}."]
        assert (f"    {SPEC!r},\n    level='lexical',\n    checkers=({checker!r},),\n"
                "    echo=True,\n)\n") in program
        assert not [name for name in others if name in program], program


def test_a_saved_program_runs_from_another_folder_and_raises_at_its_violating_step(
        certified, tmp_path):
    _, results = certified
    for checker, path in results["stateful"]["saved"].items():
        program = Path(path)
        ran = _run_elsewhere(program, tmp_path)

        assert ran.returncode == 1, ran.stderr
        assert "ModuleNotFoundError" not in ran.stderr
        last_step = [int(m.group(1)) for line in program.read_text().splitlines()
                     if (m := _STEP_LINE.match(line))][-1]
        shows = f"step {last_step} shows a violation of {checker}:"
        assert shows in ran.stdout.splitlines(), ran.stdout
        steps = [int(line.split()[1]) for line in ran.stdout.splitlines()
                 if line.startswith("step ") and not line.startswith(shows)]
        assert steps == list(range(1, last_step + 1))
        assert re.search(rf"  # step {last_step}\n", ran.stderr), ran.stderr
        assert f"\ninvariants.stateful.{VIOLATED[checker].__name__}: {checker}: " in ran.stderr


def test_the_printed_steps_show_each_write_as_sent_and_their_numbers_match_the_explanation(
        certified, tmp_path):
    _, results = certified
    for checker, path in results["stateful"]["saved"].items():
        program = Path(path)
        failure = next(f for f in results["stateful"]["failures"]
                       if f["program"] == program.read_text(encoding="utf-8"))
        ran = _run_elsewhere(program, tmp_path)
        steps, _, printed = ran.stdout.partition(f"a violation of {checker}:\n")

        (saved,) = failure["explanations"]
        saved = saved.removeprefix(f"{checker}: ")
        printed = " ".join(printed.split())
        assert untimed(printed) == untimed(" ".join(saved.split()))
        cited = {int(a or b) for a, b in _CITED.findall(saved)}
        assert cited == {int(a or b) for a, b in _CITED.findall(printed)}
        echoed = {int(n) for n in re.findall(r"^  op (\d+): ", steps, re.MULTILINE)}
        assert {int(n) for n in re.findall(r"\bop (\d+)\b", saved)} <= echoed

        sent = dict(_WRITE.findall(" ".join(steps.split("\n       "))))
        attributes = dict(_WRITE.findall(saved))
        assert attributes and attributes.items() <= sent.items(), (attributes, sent)

        (read,) = re.findall(r"^R op (\d+): read ", saved, re.MULTILINE)
        returned = re.findall(r"^ +(\[\d+\] .*)$", saved.split(f"R op {read}: ")[1],
                              re.MULTILINE)
        echoed_read = steps.split(f"\n  op {read}: read ")[1].split("\n  op ")[0]
        assert returned == re.findall(r"^ +(\[\d+\] .*)$", echoed_read, re.MULTILINE)
        if checker == "uniqueness":  # the two facts are served under two spellings
            values = set(re.findall(r"^W\d+ op \d+: write \S+ '[^']*' = (\".*\") causal_seq ",
                                    saved, re.MULTILINE))
            spellings = {attribute for attribute, value in
                         (re.match(r"\[\d+\] '([^']*)' = (\".*\") causal_seq ", r).groups()
                          for r in returned) if value in values}
            assert len(values) == 2 and len(spellings) == 2, (values, returned)


class Mangles(InMemoryBackend):
    """Serves every record with a character added: a value no write made (phantom), and
    the written one never served (durability), both shown by the first read."""

    def _serve(self, namespace: str, entity_id: str) -> list[Record]:
        return [replace(r, value=f"{r.value}!") for r in super()._serve(namespace, entity_id)]


mangles = SharedFactory(Mangles)


def test_a_step_that_breaks_two_invariants_saves_a_program_for_each(tmp_path, capsys):
    outcome = run_stateful_phase(f"{__name__}:mangles", budget_s=3, seed=1, level="lexical",
                                 out=tmp_path)

    assert outcome.failed == ("durability", "phantom")
    assert [f.checkers for f in outcome.failures] == [("durability",), ("phantom",)]
    assert outcome.saved == {name: tmp_path / "stateful" / f"{name}.py"
                             for name in outcome.failed}
    for checker, path in outcome.saved.items():
        program = path.read_text(encoding="utf-8")
        (failure,) = [f for f in outcome.failures if f.checkers == (checker,)]
        assert program == failure.program
        assert f"    checkers=({checker!r},),\n" in program
        assert not [name for name in CHECKER_NAMES if name != checker and name in program]
        with pytest.raises(VIOLATED[checker]) as raised:
            exec(compile(program, str(path), "exec"), {})
        assert raised.value.checkers == (checker,)
        assert untimed(raised.value.explanations) == untimed(failure.explanations)
        assert f"step 4 shows a violation of {checker}:\n" in capsys.readouterr().out
