"""Helpers shared by the agent frameworks' smoke tests and their reproducers' tests.

These tests run under each framework's own venv (`make test-frameworks`), which has the
framework's extra and the test runner but not the `test` extra, so `--confcutdir` keeps
tests/conftest.py (PostgreSQL fixtures) out. A missing framework package fails the
import of its test module: these venvs exist to have it, so it is never skipped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPRO = Path(__file__).resolve().parents[2] / "docs" / "findings" / "repro"


def run_reproducer(name: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run docs/findings/repro/<name>.py as a maintainer would: its own process, with
    this venv's interpreter and nothing of memcert on the path."""
    return subprocess.run([sys.executable, str(REPRO / f"{name}.py")], capture_output=True,
                          text=True, timeout=timeout_s, check=False, cwd=REPRO)


def assert_still_fails(name: str, *shown: str) -> str:
    """The reproducer still shows its failure on the pinned version: it exits 1, and
    prints each of ``shown``. Returns its output, for more specific checks."""
    run = run_reproducer(name)
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr)
    for line in shown:
        assert line in run.stdout, (line, run.stdout)
    return run.stdout
