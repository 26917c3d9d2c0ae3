"""Two real nights, the second with a changed label and a new cause: what the morning's
pages say about them, and how they fare in headless Chromium at 1280 px (overflow,
console errors, axe-core's accessibility rules)."""

from __future__ import annotations

import html
import json
import os
import re
import urllib.request
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chaos.metrics import MetricsOptions
from chaos.nightly import NightlyOptions, nightly, render_index, render_report
from chaos.report import PHASES
from invariants.checkers import check_history
from invariants.history import HistoryStream
from invariants.verdict import Violation
from tests.chaos.browser import browser
from tests.conftest import skip_or_fail

NIGHT_1 = datetime(2026, 11, 28, 2, 0, 0, tzinfo=UTC)
NIGHT_2 = datetime(2026, 11, 29, 2, 0, 0, tzinfo=UTC)
WIDTH = 1280
BLOCKING = ("serious", "critical")


def pushgateway() -> str:
    url = os.environ.get("MEMCERT_PUSHGATEWAY_URL")
    if not url:
        skip_or_fail("no Pushgateway: run under scripts/throwaway-prometheus (make test does)",
                     tests="the nightly labels' push")
    return url


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """A good night at commit aaa111, then a bad one at bbb222, both pushed."""
    out = tmp_path_factory.mktemp("labelled")
    job = f"memcert-labels-{uuid.uuid4().hex[:8]}"
    gateway = pushgateway()
    runs = []
    for factory, started, commit in (("chaos.examples:in_memory", NIGHT_1, "aaa111"),
                                     ("chaos.examples:restore_revives", NIGHT_2, "bbb222")):
        runs.append(nightly(
            factory, NightlyOptions(out=out, suite="quick", budget_s=30.0, seed=20261129,
                                    labels={"commit": commit}),
            metrics=MetricsOptions(pushgateway=gateway, job=job), started=started))
    return out, job, runs[0], runs[1]


def page_data(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                page, re.S).group(1))


@pytest.mark.slow
def test_each_night_keeps_its_labels_and_the_time_of_each_phase(nights):
    _, _, good, bad = nights
    for run, commit in ((good, "aaa111"), (bad, "bbb222")):
        saved = json.loads((run.folder / "results.json").read_text())
        assert saved["labels"]["commit"] == commit
        assert saved["labels"]["memcert_version"] == saved["labels"]["backend_package_version"]
        assert saved["labels"]["backend_package"] == "memcert"
        assert saved["budget_s"] == 30.0
        assert list(saved["phases"]) == list(PHASES)
        assert all(seconds >= 0 for seconds in saved["phases"].values())
        assert saved["phases"]["scenarios"] > 0 and saved["phases"]["checking"] > 0
        assert sum(saved["phases"].values()) <= saved["elapsed_s"] + saved["phases"]["report"]


@pytest.mark.slow
def test_the_labels_are_labels_of_the_pushed_run_info(nights):
    _, job, _, bad = nights
    with urllib.request.urlopen(f"{pushgateway()}/api/v1/metrics", timeout=10) as answer:
        groups = json.load(answer)["data"]
    [group] = [g for g in groups if g["labels"].get("job") == job
               and g["labels"].get("backend") == bad.report.backend]
    [info] = group["memcert_run_info"]["metrics"]
    assert info["labels"]["label_commit"] == "bbb222"
    assert info["labels"]["label_memcert_version"] == bad.report.labels["memcert_version"]
    assert info["labels"]["backend"] == bad.report.backend


@pytest.mark.slow
def test_the_index_opens_with_what_changed_since_the_previous_night(nights):
    out, _, good, bad = nights
    page = (out / "index.html").read_text()
    assert page.index('<section id="since"') < page.index("<h2>Rates across nights</h2>")
    since = page[page.index('<section id="since"'):page.index("</section>")]
    assert f"{bad.folder.name}/report.html" in since and f"{good.folder.name}/report.html" in since
    assert "<b>deletion_monotonicity</b>: verdict <b>pass</b> → <b>fail</b>" in since
    assert "<b>overall</b>: verdict <b>certified</b> → <b>failed</b>" in since
    found = bad.report.invariants["deletion_monotonicity"].causes["restore_revived"]
    assert (f'new cause: <b>deletion_monotonicity</b> <a href="{bad.folder.name}/report.html'
            f'#cause-restore_revived">restore_revived</a> ({found:,} violation(s))') in since
    assert "rate rose: <b>deletion_monotonicity</b>" in since
    assert "label <code>commit</code>: aaa111 → bbb222" in since
    data = page_data(page)
    assert data["since"]["labels"] == [["commit", "aaa111", "bbb222"]]
    assert [n["labels"]["commit"] for n in data["nights"]] == ["aaa111", "bbb222"]
    assert "<code>commit=bbb222</code>" in page
    inner = (bad.folder / "index.html").read_text()
    assert f'href="../{bad.folder.name}/report.html#cause-restore_revived"' in inner


@pytest.mark.slow
def test_the_trend_charts_have_a_dated_axis_and_a_point_per_night_in_its_verdict(nights):
    out, _, _, _ = nights
    page = (out / "index.html").read_text()
    charts = re.findall(r'<svg class="chart nights".*?</svg>', page, re.S)
    assert len(charts) == 6
    for chart in charts:
        assert ">Nov 28</text>" in chart and ">Nov 29</text>" in chart
        assert "night (UTC date it began)" in chart and "failed checks per check" in chart
        assert chart.count("<circle") == 2
    [deletion] = [c for c in charts if ">deletion_monotonicity</text>" in c]
    fills = re.findall(r'<circle [^>]*fill="(#[0-9a-f]+)"', deletion)
    assert fills == ["#31a354", "#d62728"], "pass then fail"
    assert re.search(r"<title>2026-11-29T020000Z: 0\.\d{4} \(restore_revived [\d,]+[^)]*\)\n"
                     r"labels: [^<]*commit=bbb222[^<]*</title>", html.unescape(deletion))


@pytest.mark.slow
def test_the_report_names_the_command_that_ran_its_labels_and_its_time(nights):
    _, _, _, bad = nights
    page = (bad.folder / "report.html").read_text()
    ran = re.search(r"<p>Ran: <code>([^<]*)</code></p>", page).group(1)
    assert ran.startswith("memcert nightly chaos.examples:restore_revives --suite quick ")
    assert f"--seed {bad.report.seed}" in ran and ran.endswith("--label commit=bbb222")
    assert "<p>Reproduce: <code>memcert certify chaos.examples:restore_revives" in page
    assert '<p class="labels">Labels: <code>memcert_version=' in page
    assert "<code>commit=bbb222</code>" in page
    took = re.search(r"took ([\d.]+) s of a 30 s budget \(([^)]*)\)", page)
    assert took, "the header compares the time with the budget"


@pytest.mark.slow
def test_an_overrun_past_a_tenth_says_which_phases_took_the_time(nights):
    _, _, _, bad = nights
    history = bad.folder / "history.jsonl.zst"
    slow = replace(bad.report, elapsed_s=5.0, budget_s=3.0, phases={
        "setup": 0.1, "scenarios": 1.9, "final_reads": 0.3, "stateful": 0.6,
        "checking": 2.1, "report": 0.2})
    page = render_report(slow, suite="nightly", started=NIGHT_2, history=history, workers=8,
                         samples={})
    note = re.search(r'<div class="overrun">(.*?)</div>', page, re.S).group(1)
    assert "Over budget by 2.2 s (1.73× the budget)" in note
    assert ("Here: final reads (0.30 s) and checking the history (2.1 s) took 2.4 s against "
            "the 0.45 s reserved; writing report.html (it reads the history twice for the "
            "timeline) took 0.20 s against no share of the budget; checking the "
            "backend") in html.unescape(note)
    assert "<tr><td>checking</td><td>2.10 s</td>" in note
    on_time = replace(slow, elapsed_s=3.1, phases={"scenarios": 2.0, "checking": 0.3,
                                                   "report": 0.1})
    page = render_report(on_time, suite="nightly", started=NIGHT_2, history=history,
                         workers=8, samples={})
    assert 'class="overrun"' not in page and "took 3.2 s of a 3 s budget (1.07× the budget)" in page


@pytest.mark.slow
def test_every_violations_witnesses_are_marked_not_only_the_shown_examples(nights):
    _, _, _, bad = nights
    page = (bad.folder / "report.html").read_text()
    data = page_data(page)
    found: set[int] = set()

    def witness(violation: Violation) -> None:
        found.update(violation.witnesses)

    check_history(HistoryStream(bad.folder / "history.jsonl.zst"), level=bad.report.level,
                  on_violation=witness)
    assert data["witnesses"] == len(found)
    assert sum(mark["count"] for mark in data["marks"]) == len(found)
    shown = {int(op) for ops in re.findall(r"<summary>history lines of ops ([^<]*)</summary>",
                                           page) for op in ops.split(", ")}
    assert len(found) > len(shown), "more witnesses than the examples shown"
    marked = {op for mark in data["marks"] for op in mark["ops"]}
    assert marked <= found and marked - shown
    scenarios = {row["worker"]: row["scenario"] for row in data["rows"]}
    assert len({scenarios[m["worker"]] for m in data["marks"]}) >= 2
    assert all(0 <= m["bin"] < data["bins"] and len(m["ops"]) <= min(5, m["count"])
               for m in data["marks"])


@pytest.mark.slow
def test_every_chart_of_the_report_has_labelled_axes_with_units(nights):
    _, _, _, bad = nights
    page = (bad.folder / "report.html").read_text()
    latency = re.findall(r'<svg class="chart latency".*?</svg>', page, re.S)
    bars = re.findall(r'<svg class="chart bars".*?</svg>', page, re.S)
    assert len(latency) == len(bars) == len(bad.report.scenarios)
    for chart in latency:
        assert "operations (log)</text>" in chart
        assert "latency (upper bound of each bucket)</text>" in chart
        assert re.search(r'text-anchor="end">10</text>', chart), "the y-axis has its decades"
    for chart in bars:
        assert "failed checks per check</text>" in chart and 'class="axis"' in chart


def wide_index(folder: Path) -> Path:
    """An index of 12 nights with long labels: wider than 1280 px if nothing scrolls."""
    nights = []
    for day in range(12):
        labels = {f"label_{k}": f"value-{'x' * 30}-{k}" for k in range(6)}
        nights.append((f"2026-11-{day + 1:02d}T020000Z", {
            "verdict": "failed", "backend": "mypackage.store.with_a_long_name:factory",
            "seed": 123456789, "elapsed_s": 1234.0, "labels": labels,
            "invariants": {name: {"verdict": "fail", "rate": 0.123456}
                           for name in ("uniqueness", "causal_monotonicity",
                                        "deletion_monotonicity", "semantic_normalization",
                                        "durability", "isolation")},
            "checks": {"uniqueness": {"causes": {"alias": 2082, "race": 3}}}}))
    page = folder / "wide.html"
    page.write_text(render_index(nights, prefix=""), encoding="utf-8")
    return page


@pytest.mark.slow
def test_the_pages_fit_1280_px_pass_axe_core_and_log_no_errors(nights, tmp_path):
    out, _, _, bad = nights
    artifacts = Path(os.environ.get("MEMCERT_TEST_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    pages = {"report": bad.folder / "report.html", "index": out / "index.html",
             "night-index": bad.folder / "index.html", "wide-index": wide_index(tmp_path)}
    with browser() as chromium:
        for name, page in pages.items():
            chromium.open(page, width=WIDTH)
            assert chromium.console_errors() == [], name
            width = chromium.evaluate("document.documentElement.scrollWidth")
            assert width <= WIDTH, f"{name} is {width} px wide at {WIDTH} px"
            blocking = [v for v in chromium.axe() if v["impact"] in BLOCKING]
            assert blocking == [], f"{name}: {json.dumps(blocking, indent=1)}"
            shot = chromium.screenshot(artifacts / f"nightly-{name}-{WIDTH}.png")
            assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
            if name == "report":
                marks = chromium.evaluate(
                    "document.getElementById('timeline').getAttribute('data-marks')")
                assert int(marks) == page_data(page.read_text())["witnesses"] > 0
            if name == "wide-index":
                box = chromium.evaluate(
                    "(() => { var b = document.querySelector('.scroll'); var c = "
                    "b.querySelector('td'); return [b.scrollWidth, b.clientWidth, "
                    "getComputedStyle(c).position]; })()")
                assert box[0] > box[1], "the table scrolls within its own box"
                assert box[2] == "sticky", "with the night column fixed"


@pytest.mark.slow
def test_axe_core_finds_what_a_page_gets_wrong(tmp_path):
    """The check above can fail: a page with an unlabelled image and a form field with no
    label is caught, at the impacts it blocks on."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><title>x</title></head><body><main>'
                   '<img src="x.png"><input type="text"></main></body></html>')
    with browser() as chromium:
        chromium.open(bad, width=WIDTH)
        found = {v["id"]: v["impact"] for v in chromium.axe()}
    assert found.get("image-alt") == "critical" and found.get("label") == "critical"
    assert "html-has-lang" in found


HOVER_RED = """(() => {
  var canvas = document.getElementById('timeline'), tip = document.getElementById('tip');
  var box = canvas.getBoundingClientRect(), seen = {}, near = new Set(), w = canvas.width;
  var sx = canvas.clientWidth / w, sy = canvas.clientHeight / canvas.height;
  var pixels = canvas.getContext('2d').getImageData(0, 0, w, canvas.height).data;
  for (var i = 0; i < pixels.length; i += 4) {
    if (pixels[i] < 150 || pixels[i + 1] > 120 || pixels[i + 2] > 120) continue;
    for (var dx = -6; dx <= 6; dx++) near.add(i / 4 + dx);
  }
  near.forEach(function (p) {
    canvas.dispatchEvent(new MouseEvent('mousemove', {
      clientX: box.left + canvas.clientLeft + (p % w + 0.5) * sx,
      clientY: box.top + canvas.clientTop + (Math.floor(p / w) + 0.5) * sy}));
    if (!tip.hidden && tip.textContent.indexOf(' witness ') > 0) seen[tip.textContent] = 1;
  });
  return [Object.keys(seen), Number(canvas.getAttribute('data-columns'))];
})()"""
"""The pointer at the centre of every red pixel of the timeline and of the pixels beside
it (a mark's neighbour may cover the mark's middle): the distinct hover texts of the
witness marks found there, and the marks the page says it drew."""
HOVER_TEXT = re.compile(r"^(\d+) witness operation\(s\) of worker (\d+) here: op ([\d, ]+?)"
                        r"(, \.\.\.)?$")


@pytest.mark.slow
@pytest.mark.parametrize("width", [WIDTH, 640])
def test_every_witness_mark_says_on_hover_how_many_operations_it_counts(nights, width):
    """Hovering each red mark tells its count; the marks, one per worker and pixel
    column, count every witness once, also where a narrow window squeezes several
    columns of the timeline into one pixel."""
    _, _, _, bad = nights
    page = bad.folder / "report.html"
    data = page_data(page.read_text())
    with browser() as chromium:
        chromium.open(page, width=width)
        texts, columns = chromium.evaluate(HOVER_RED)
    assert len(texts) == columns <= len(data["marks"]), "every mark drawn can be hovered"
    witnesses = {op for mark in data["marks"] for op in mark["ops"]}
    workers = {mark["worker"] for mark in data["marks"]}
    counted = 0
    for text in texts:
        count, worker, ops, more = HOVER_TEXT.match(text).groups()
        listed = [int(op) for op in ops.split(", ")]
        assert int(worker) in workers and set(listed) <= witnesses, text
        assert len(listed) <= min(5, int(count)) and bool(more) == (int(count) > len(listed))
        counted += int(count)
    assert counted == data["witnesses"], "each witness is counted under one mark"


RECORD_TEXT = """window.drawnTexts = [];
var fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text) {
  window.drawnTexts.push(String(text));
  return fillText.apply(this, arguments);
};"""
"""Run before the page's own script: keeps every text drawn on a canvas."""


@pytest.mark.slow
def test_the_timeline_draws_its_time_axis_in_seconds_and_names_its_rows(nights):
    """The canvas's axes, read from what it draws: ticks from 0 to the run's span, the
    axis named with its unit, and the rows named by worker and scenario."""
    _, _, _, bad = nights
    page = bad.folder / "report.html"
    data = page_data(page.read_text())
    with browser() as chromium:
        chromium.send("Page.enable")
        chromium.send("Page.addScriptToEvaluateOnNewDocument", source=RECORD_TEXT)
        chromium.open(page, width=WIDTH)
        texts = chromium.evaluate("window.drawnTexts")
    assert "time since the run began (s)" in texts and "worker, scenario" in texts
    ticks = [float(t) for t in texts if re.fullmatch(r"\d+(\.\d+)?", t)]
    assert ticks[0] == 0 and ticks == sorted(ticks) and len(ticks) > 2
    assert abs(ticks[-1] - data["span_s"]) <= max(0.01, data["span_s"] * 0.05)
    assert {s["name"] for s in data["scenarios"]} <= set(texts), "each scenario's band"
    assert any(re.fullmatch(rf"w{row['worker']} {re.escape(row['scenario'])}", t)
               for row in data["rows"] for t in texts), "rows are named by worker"
