"""scripts/findings, what `make findings` runs: it reads the commands table, runs each
profile as the findings README says, and saves what docs/findings/data keeps of it; the
table and the saved runs agree."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import memcert

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "findings"
FINDINGS = ROOT / "docs" / "findings"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, check=False, cwd=ROOT, timeout=60)


def rows() -> dict[str, list[dict]]:
    table: dict[str, list[dict]] = {}
    for path in sorted(FINDINGS.glob("commands*.toml")):
        for extra, entries in tomllib.loads(path.read_text("utf-8")).items():
            table.setdefault(extra, []).extend(entries)
    return table


def script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("findings_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader("findings_script", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_dry_run_prints_each_profiles_command_and_runs_nothing():
    done = run("agno", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"+ memcert certify {row['spec']} --seed 1 --budget {row['budget']} --workers 8 "
        f"--level lexical --out {ROOT / 'memcert-out' / 'findings' / row['profile']}"
        for row in rows()["agno"]]


def test_an_unknown_extra_or_profile_is_refused_by_name():
    unknown = run("nosuchframework", "--dry-run")
    assert unknown.returncode == 1
    assert "no [[nosuchframework]] rows in docs/findings/commands*.toml" in unknown.stderr
    profile = run("agno", "--profile", "nosuchprofile", "--dry-run")
    assert profile.returncode == 1
    assert "--profile: agno has no profile 'nosuchprofile'" in profile.stderr


def test_every_row_of_the_table_has_its_saved_run_made_by_that_command():
    for extra, entries in rows().items():
        for row in entries:
            saved = json.loads((FINDINGS / "data" / f"{row['profile']}.json").read_text("utf-8"))
            assert saved["backend"] == row["spec"], (extra, row)
            assert saved["reproduce"] == (
                f"memcert certify {row['spec']} --seed 1 --level lexical "
                f"--budget {row['budget']} --workers 8"), (extra, row)


def test_the_saved_figures_have_the_shape_of_every_saved_run(tmp_path: Path):
    memcert.certify(None, budget_s=3, seed=1, out=tmp_path, stateful_share=0.0)
    figures = script().saved_figures(tmp_path)
    example = json.loads((FINDINGS / "data" / "mem0.json").read_text("utf-8"))
    assert list(figures) == list(example)
    assert list(figures["invariants"]) == list(example["invariants"])
    for name, verdict in figures["invariants"].items():
        assert list(verdict) == list(example["invariants"][name]), name
    results = json.loads((tmp_path / "results.json").read_text("utf-8"))
    assert figures["steps_done"] == sum(s["steps_done"] for s in results["scenarios"]) > 0
