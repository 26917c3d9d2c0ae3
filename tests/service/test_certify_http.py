"""``memcert certify http://...`` certifies the reference store served over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .server import ROOT, Served

TOKEN = "certify-over-http-token"


def _certify(url: str, out: Path, *extra: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    """The quick suite, its plans run whole within the budget however loaded the machine,
    so that every coverage condition occurs."""
    environment = {k: v for k, v in os.environ.items() if k != "MEMCERT_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "chaos.cli", "certify", url, "--suite", "quick", "--budget", "40",
         "--stateful-share", "0.1", "--seed", "11",
         "--out", str(out), "--quiet", *extra],
        cwd=ROOT, env={**environment, **(env or {})}, capture_output=True, text=True,
        timeout=120)


def _assert_certified(done: subprocess.CompletedProcess[str], url: str, out: Path) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: CERTIFIED" in done.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["backend"] == url
    assert results["reproduce"].startswith(f"memcert certify {url} --seed 11 ")


def test_certify_over_http_with_a_token(tmp_path: Path):
    with Served.start(str(tmp_path / "store.sqlite3"), token=TOKEN) as served:
        done = _certify(served.url, tmp_path / "out", "--token", TOKEN)
        _assert_certified(done, served.url, tmp_path / "out")
    for kept in (tmp_path / "out").iterdir():
        assert TOKEN not in kept.read_text(), f"the token leaked into {kept.name}"


def test_certify_over_http_on_postgresql(fresh_pg_url: str, tmp_path: Path):
    with Served.start(fresh_pg_url) as served:
        _assert_certified(_certify(served.url, tmp_path / "out"), served.url, tmp_path / "out")
