"""memcert nightly: the night's folder, report.html, index.html across nights, and the
report as a browser shows it."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import zstandard

from chaos.certify import replay
from chaos.coverage import measure
from chaos.explain import most_telling
from chaos.nightly import TIMELINE_BINS, NightlyOptions, nightly, render_index, render_report
from chaos.report import INVARIANTS, ScenarioSummary, build_report
from invariants.backend import Ack, Delete, Record, Write
from invariants.causes import FIX_PAGE, FIXES
from invariants.checkers import check_history
from invariants.errors import InvalidArgument
from invariants.history import HistoryRecorder, Read, WriteMeta
from invariants.verdict import render_explanation
from tests.chaos.browser import find_chromium

REPO = Path(__file__).resolve().parents[2]
NIGHT_1 = datetime(2026, 11, 28, 2, 0, 0, tzinfo=UTC)
NIGHT_2 = datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC)


def options(out: Path, **overrides) -> NightlyOptions:
    """The quick suite: its plans take a moment to build and run whole within the
    budget, so each night sees the same causes however loaded the machine."""
    return NightlyOptions(**{"out": out, "suite": "quick", "budget_s": 30.0,
                             "seed": 20261129, **overrides})


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
    kept = ["history.jsonl.zst", "index.html", "junit.xml", "report.html", "results.json"]
    assert sorted(p.name for p in good.folder.iterdir()) == kept
    assert sorted(p.name for p in bad.folder.iterdir()) == sorted([*kept, "stateful"])
    assert [p.name for p in (bad.folder / "stateful").iterdir()] == ["deletion_monotonicity.py"]
    assert bad.report.verdict == "failed" and bad.report.exit_code == 1
    saved = json.loads((bad.folder / "results.json").read_text())
    assert saved["reproduce"].endswith("--suite quick --compress")
    assert good.report.invariants["deletion_monotonicity"].violations == 0


@pytest.mark.slow
def test_the_report_is_self_contained_and_shows_what_a_reader_needs(two_nights):
    _, bad, _ = two_nights
    page = (bad.folder / "report.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "<script src" not in page
    assert "chaos.examples:restore_revives — failed" in page
    kept = bad.report.checks["deletion_monotonicity"].violations
    first = most_telling([v for v in kept if v.cause == kept[0].cause])
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
        s.name for s in bad.report.scenarios if not s.not_run}
    assert all(len(row["codes"]) == data["bins"] for row in data["rows"])


def page_data(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page, re.S).group(1))


@pytest.mark.slow
def test_each_failed_invariant_shows_its_violations_per_cause_with_the_fix(two_nights):
    """The table counts each cause of deletion_monotonicity (0 included); each cause
    found gets its count, its fix paragraph once, the long form's anchor and an example
    of that very cause."""
    _, bad, _ = two_nights
    page = (bad.folder / "report.html").read_text()
    result = bad.report.checks["deletion_monotonicity"]
    found = {cause: n for cause, n in result.causes.items() if n}
    assert found.get("restore_revived", 0) > 0, result.causes
    row = re.search(r'<tr class="fail"><td>deletion_monotonicity</td>.*?</tr>', page).group(0)
    for cause, n in result.causes.items():
        if n:
            assert f'<a href="#cause-{cause}">{cause}</a> {n:,}' in row
            assert f'<h4 id="cause-{cause}">{cause}: {n:,} violation(s), ' in page
            assert page.count(html.escape(FIXES[cause])) == 1
            assert f"<code>{FIX_PAGE}#{cause}</code>" in page
            example = most_telling([v for v in result.violations if v.cause == cause])
            assert html.escape(render_explanation(example)) in page
        else:
            assert f"{cause} 0" in row and f'id="cause-{cause}"' not in page
    assert re.search(r'<tr class="pass"><td>isolation</td>(<td>[^<]*</td>){6}<td></td>', page)
    in_scenarios = re.findall(r"violations \(by cause: ([^)]*)\)", page)
    assert "deletion_monotonicity restore_revived" in " ".join(in_scenarios)


@pytest.mark.slow
def test_the_index_keeps_every_nights_violations_per_cause(two_nights):
    out, bad, good = two_nights
    data = page_data((out / "index.html").read_text())
    assert [n["night"] for n in data["nights"]] == [bad.folder.name, good.folder.name]
    for night, run in zip(data["nights"], (bad, good), strict=True):
        assert night["verdict"] == run.report.verdict
        for name, saved in night["invariants"].items():
            verdict = run.report.invariants[name]
            assert (saved["rate"], saved["rate_numerator"], saved["rate_denominator"]) == (
                verdict.rate, verdict.rate_numerator, verdict.rate_denominator)
            assert saved["violations"] == verdict.violations
            summed: dict[str, int] = {}
            for checker in INVARIANTS[name]:
                for cause, n in run.report.checks[checker].causes.items():
                    summed[cause] = summed.get(cause, 0) + n
            assert saved["causes"] == summed
    assert not any(n for saved in data["nights"][1]["invariants"].values()
                   for n in saved["causes"].values())


def history_sizes(page: str, name: str) -> re.Match[str]:
    found = re.search(rf'<a href="{re.escape(name)}">{re.escape(name)}</a> \(([^)]*)\)', page)
    assert found, f"report.html does not link {name}"
    return found


@pytest.mark.slow
def test_the_night_keeps_its_history_compressed_and_the_report_says_what_it_saves(two_nights):
    out, bad, good = two_nights
    page = (bad.folder / "report.html").read_text()
    history = bad.folder / "history.jsonl.zst"
    assert history.read_bytes()[:4] == zstandard.FRAME_HEADER
    with open(history, "rb") as compressed:
        plain = len(zstandard.ZstdDecompressor().stream_reader(
            compressed, read_across_frames=True).read())
    stored = history.stat().st_size
    assert plain > 5 * stored
    sizes = history_sizes(page, "history.jsonl.zst").group(1)
    assert re.fullmatch(r"[\d.]+ [kMG]?B compressed, [\d.]+ [kMG]?B plain: 1/\d+(\.\d)?", sizes)
    assert sizes.endswith(f"1/{plain / stored:.0f}" if plain / stored >= 10
                          else f"1/{plain / stored:.1f}")
    assert "history.jsonl<" not in page, "the report links the file the night kept"
    witnesses = re.findall(r"<summary>history lines of ops [^<]*</summary><pre>([^<]+)</pre>",
                           page)
    assert witnesses and all(json.loads(html.unescape(line))["index"] >= 0
                             for block in witnesses for line in block.split("\n"))
    on_disk = sum((night.folder / "history.jsonl.zst").stat().st_size for night in (bad, good))
    assert re.search(r"2 night\(s\) kept in this folder; their histories take "
                     r"[\d.]+ [kMG]?B on disk\.", (out / "index.html").read_text())
    assert on_disk > 0
    again = replay(bad.folder)
    assert {n: v.violations for n, v in again.invariants.items()} == {
        n: v.violations for n, v in bad.report.invariants.items()}


@pytest.mark.slow
def test_a_night_may_keep_its_history_plain(tmp_path):
    night = nightly("chaos.examples:in_memory",
                    options(tmp_path, budget_s=1.0, compress=False), started=NIGHT_1)
    assert (night.folder / "history.jsonl").is_file()
    assert not (night.folder / "history.jsonl.zst").exists()
    page = (night.folder / "report.html").read_text()
    assert re.fullmatch(r"[\d.]+ [kMG]?B", history_sizes(page, "history.jsonl").group(1))
    assert page_data(page)["rows"], "the timeline reads the plain history too"


def test_the_index_shows_the_causes_found_under_each_rate_and_keeps_old_nights():
    """A night saved before causes were counted has none; the causes found show in the
    night's last column, by invariant and most first, and in the chart's tooltip."""
    results = {"verdict": "failed", "backend": "b:f", "seed": 3, "elapsed_s": 2.0,
               "invariants": {"uniqueness": {"verdict": "fail", "rate": 0.25,
                                             "rate_numerator": 1, "rate_denominator": 4,
                                             "violations": 5}},
               "checks": {"uniqueness": {"causes": {"race": 1, "alias": 4,
                                                    "not_replaced": 0}}}}
    old = {"verdict": "failed", "backend": "b:f", "seed": 2, "elapsed_s": 2.0,
           "invariants": {"uniqueness": {"verdict": "fail", "rate": 0.5, "checked": 2}}}
    page = render_index([("2026-11-27T020000Z", old), ("2026-11-28T020000Z", results)],
                        prefix="")
    assert '<td class="fail">0.2500</td><td>uniqueness: alias 4, race 1</td></tr>' in page
    assert '<td class="fail">0.5000</td><td></td></tr>' in page
    assert "<title>2026-11-28T020000Z: 0.2500 (alias 4, race 1)</title>" in page
    assert page_data(page)["nights"] == [
        {"night": "2026-11-27T020000Z", "verdict": "failed", "backend": "b:f", "seed": 2,
         "labels": {},
         "invariants": {"uniqueness": {"verdict": "fail", "rate": 0.5, "rate_numerator": 0,
                                       "rate_denominator": 2, "violations": 0,
                                       "causes": {}}}},
        {"night": "2026-11-28T020000Z", "verdict": "failed", "backend": "b:f", "seed": 3,
         "labels": {},
         "invariants": {"uniqueness": {"verdict": "fail", "rate": 0.25, "rate_numerator": 1,
                                       "rate_denominator": 4, "violations": 5,
                                       "causes": {"race": 1, "alias": 4,
                                                  "not_replaced": 0}}}}]


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
         "--out", str(tmp_path), "--budget", "20", "--suite", "quick", "--seed", "5",
         "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "verdict: FAILED" in result.stdout
    assert len(list(tmp_path.glob("*/report.html"))) == 1


# -- the report in a real browser ------------------------------------------------------


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
    assert re.search(r'data-marks="(\d+)"', canvas).group(1) == str(
        sum(mark["count"] for mark in data["marks"])) == str(data["witnesses"])
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


def test_the_timeline_codes_each_outcome_from_a_plain_or_compressed_history(tmp_path):
    """Each operation fills its worker's bins from invocation to completion with its
    outcome: w, r and d acknowledged, x refused (an Ack), e an error, u unknown."""
    ticks = iter(range(0, 200, 10))
    recorder = HistoryRecorder(clock=lambda: next(ticks))
    meta = WriteMeta("f1", "city")
    recorder.ok(recorder.invoke(0, Write("ns", "e", "city", "v1", 1, "op-1"), meta=meta),
                Ack(True))
    recorder.ok(recorder.invoke(0, Read("ns", "e")), [Record("e", "city", "v1", 1, 1)])
    recorder.ok(recorder.invoke(0, Delete("ns", "e", 2, "op-2")), Ack(True))
    recorder.fail(recorder.invoke(1, Write("ns", "f", "city", "v2", 1, "op-3"), meta=meta),
                  Ack(False, reason="stale"))
    recorder.fail(recorder.invoke(1, Read("ns", "f")), "ValueError: refused")
    recorder.info(recorder.invoke(1, Write("ns", "f", "city", "v3", 2, "op-4"), meta=meta),
                  "TimeoutError: no answer")
    history = recorder.history()
    report = build_report(
        backend="timeline", seed=1, level="surface",
        checks=check_history(history, level="surface"), coverage=measure(history),
        scenarios=[ScenarioSummary("only", 6, 6, 0.0, False)], restore_supported=True,
        history_entries=len(history), elapsed_s=0.0, command="memcert certify")

    def band(*ops: tuple[int, int, str]) -> str:
        codes = ["."] * TIMELINE_BINS
        for since, at, code in ops:
            last = min(TIMELINE_BINS - 1, at * TIMELINE_BINS // 110)  # the end is the last bin
            for slot in range(since * TIMELINE_BINS // 110, last + 1):
                codes[slot] = code
        return "".join(codes)

    rows = []
    for name in ("history.jsonl", "history.jsonl.zst"):
        history.write_jsonl(tmp_path / name)
        page = render_report(report, suite="nightly", started=datetime.now(UTC),
                             history=tmp_path / name, workers=2, samples={})
        rows.append(page_data(page)["rows"])
    assert rows[0] == rows[1] == [
        {"worker": 0, "scenario": "only",
         "codes": band((0, 10, "w"), (20, 30, "r"), (40, 50, "d"))},
        {"worker": 1, "scenario": "only",
         "codes": band((60, 70, "x"), (80, 90, "e"), (100, 110, "u"))}]
