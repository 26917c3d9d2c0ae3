"""memcert nightly: the night's folder, report.html, index.html across nights, and the
report as a browser shows it."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chaos.nightly import NightlyOptions, nightly
from chaos.report import INVARIANTS
from invariants.errors import InvalidArgument
from invariants.verdict import render_explanation
from tests.conftest import required_here, skip_or_fail

REPO = Path(__file__).resolve().parents[2]
NIGHT_1 = datetime(2026, 11, 28, 2, 0, 0, tzinfo=UTC)
NIGHT_2 = datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC)


def options(out: Path, **overrides) -> NightlyOptions:
    return NightlyOptions(**{"out": out, "budget_s": 3.0, "seed": 20261129, **overrides})


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    """A bad night, then a good one, kept in one folder."""
    out = tmp_path_factory.mktemp("nights")
    bad = nightly("chaos.examples:restore_revives", options(out), started=NIGHT_1)
    good = nightly("chaos.examples:in_memory", options(out), started=NIGHT_2)
    return out, bad, good


@pytest.mark.slow
def test_each_night_gets_a_folder_with_the_results_and_a_report(two_nights):
    out, bad, good = two_nights
    assert bad.folder == out / "2026-11-28T020000Z"
    assert good.folder == out / "2026-11-29T020000Z"
    kept = ["history.jsonl", "index.html", "junit.xml", "report.html", "results.json"]
    assert sorted(p.name for p in good.folder.iterdir()) == kept
    assert sorted(p.name for p in bad.folder.iterdir()) == sorted([*kept, "stateful"])
    assert [p.name for p in (bad.folder / "stateful").iterdir()] == ["deletion_monotonicity.py"]
    assert bad.report.verdict == "failed" and bad.report.exit_code == 1
    saved = json.loads((bad.folder / "results.json").read_text())
    assert saved["reproduce"].endswith("--suite nightly")
    assert good.report.invariants["deletion_monotonicity"].violations == 0


@pytest.mark.slow
def test_the_report_is_self_contained_and_shows_what_a_reader_needs(two_nights):
    _, bad, _ = two_nights
    page = (bad.folder / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "<script src" not in page
    assert "chaos.examples:restore_revives — failed" in page
    first = bad.report.checks["deletion_monotonicity"].violations[0]
    assert html.escape(render_explanation(first)) in page
    program = (bad.folder / "stateful" / "deletion_monotonicity.py").read_text()
    assert f"<pre>{html.escape(program)}</pre>" in page
    for scenario in bad.report.scenarios:
        assert f"<h3>{scenario.name}</h3>" in page
    for condition in ("read_after_delete", "read_after_restore", "delete_raced_write"):
        assert f"<td>{condition}</td>" in page
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page, re.S).group(1))
    assert data["marks"], "no violation witness marked on the timeline"
    assert {row["scenario"] for row in data["rows"]} == {
        s.name for s in bad.report.scenarios}
    assert all(len(row["codes"]) == data["bins"] for row in data["rows"])


@pytest.mark.slow
def test_the_index_links_every_night_and_charts_rates_across_them(two_nights):
    out, _, good = two_nights
    top = (out / "index.html").read_text()
    inner = (good.folder / "index.html").read_text()
    assert top.index("2026-11-29T020000Z/report.html") < top.index(
        "2026-11-28T020000Z/report.html"), "newest night first"
    assert 'href="../2026-11-28T020000Z/report.html"' in inner
    assert top.count('class="chart nights"') == len(INVARIANTS)
    assert "2 night(s) kept" in top


@pytest.mark.slow
def test_keep_deletes_the_oldest_nights_only(tmp_path):
    stranger = tmp_path / "notes"
    stranger.mkdir()
    first = nightly("chaos.examples:in_memory", options(tmp_path, budget_s=1.0, keep=1),
                    started=NIGHT_1)
    second = nightly("chaos.examples:in_memory", options(tmp_path, budget_s=1.0, keep=1),
                     started=NIGHT_2)
    assert second.removed == (first.folder,)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "2026-11-29T020000Z", "index.html", "notes"]


def test_keep_must_be_a_count():
    with pytest.raises(InvalidArgument) as error:
        NightlyOptions(keep=-1)
    assert str(error.value) == "keep=-1 must be an int >= 0 (0 keeps every night)."


@pytest.mark.slow
def test_the_command_exits_non_zero_on_a_violation(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "nightly", "chaos.examples:restore_revives",
         "--out", str(tmp_path), "--budget", "2", "--seed", "5", "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "verdict: FAILED" in result.stdout
    assert len(list(tmp_path.glob("*/report.html"))) == 1


# -- the report in a real browser ------------------------------------------------------


def find_chromium() -> str:
    """Debian's chromium; installed with apt-get when missing, where the set-up may."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if required_here() and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env, stdin=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"],
                       check=True, env=env, stdin=subprocess.DEVNULL)
        found = shutil.which("chromium")
        if found:
            return found
    skip_or_fail("chromium is not installed: `apt-get install chromium` (make test does it as "
                 "root)", tests="the report's browser tests")


def chromium(binary: str, page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """Open ``page`` headless, offline, and let its script run."""
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--window-size=1400,2400", *flags, page.as_uri()],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_the_report_renders_in_headless_chromium_without_console_errors(two_nights, tmp_path):
    binary = find_chromium()
    _, bad, _ = two_nights
    page = bad.folder / "report.html"
    dom = chromium(binary, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    canvas = re.search(r'<canvas id="timeline"[^>]*>', dom.stdout).group(0)
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page.read_text(), re.S).group(1))
    assert re.search(r'data-rendered="(\d+)"', canvas).group(1) == str(len(data["rows"]))
    assert re.search(r'data-marks="(\d+)"', canvas).group(1) == str(len(data["marks"]))
    assert data["rows"] and data["marks"]
    assert dom.stdout.count('class="chart bars"') == len(bad.report.scenarios)
    assert dom.stdout.count('class="chart latency"') == len(bad.report.scenarios)
    assert dom.stdout.count("<polyline") >= len(bad.report.scenarios)

    artifacts = Path(os.environ.get("MEMCERT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "nightly-report.png"
    taken = chromium(binary, page, f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    index = chromium(binary, bad.folder / "index.html", "--dump-dom")
    assert [line for line in index.stderr.splitlines() if ":CONSOLE" in line] == []
