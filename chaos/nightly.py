"""``memcert nightly``: the long chaos run, and the report a person opens in the morning.

Each night gets a folder of its own under ``--out``, named by its UTC start time
(``2026-11-29T020000Z``), holding what ``memcert certify`` writes (``results.json``,
``junit.xml``, ``history.jsonl``) and ``report.html``. ``index.html``, in the parent
folder and in every night's folder, links the nights kept there and charts each
invariant's rate across them. Every page is one self-contained file: styles, script and
charts are inline, so it opens offline, from a mail attachment or an artifact store.

``report.html`` shows:

- the verdict per invariant, the seed and the command that reproduces the run;
- a timeline per worker: each pixel column is a slice of the run, coloured by what the
  worker's operations did there, with the operations that witness a violation marked;
- per scenario, the violation rates and the latency distribution, read from the run's
  own metrics (:mod:`chaos.metrics`), the same numbers the dashboards show;
- the minimal counterexamples: each violation's explanation ("Let … Then …") and the
  history lines of its witnesses;
- coverage of the fault conditions the scenarios require, and the faults that fired.

The verdict and the exit code are certify's; the report only presents them.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from invariants.errors import InvalidArgument
from invariants.history import Paraphrase
from invariants.verdict import Violation, render_explanation
from scenarios import load_suite
from scenarios.conditions import CONDITIONS

from .certify import STATEFUL_SHARE, CertifyOptions, Progress, certify
from .metrics import BUCKETS_S, DURATION, READS, VIOLATION_METRICS, MetricsOptions
from .report import Report

__all__ = ["NightlyOptions", "NightlyResult", "nightly", "render_index", "render_report"]

NIGHT_FORMAT = "%Y-%m-%dT%H%M%SZ"
_NIGHT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z(-\d+)?$")
TIMELINE_BINS = 600
COUNTEREXAMPLES = 5
"""Violations shown in full per checker; results.json keeps more."""

# Timeline codes, in rising priority: a slice shows the most telling thing in it.
_CODES = ".rwdxeuV"
_CODE_OF_OK = {"read": "r", "write": "w", "delete": "d", "restore": "d"}


@dataclass(frozen=True)
class NightlyOptions:
    """What a nightly run does and where it keeps its nights.

    ``budget_s`` None takes the suite's own ``budget_s``. ``keep`` bounds the nights
    kept under ``out`` (the oldest go first); 0 keeps every night.
    """

    out: Path = Path("memcert-nightly")
    suite: str = "nightly"
    budget_s: float | None = None
    seed: int | None = None
    level: Paraphrase = "lexical"
    workers: int = 8
    processes: int = 0
    keep: int = 30
    stateful_share: float = STATEFUL_SHARE
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 0:
            raise InvalidArgument(f"keep={self.keep!r} must be an int >= 0 (0 keeps every "
                                  "night).")


@dataclass(frozen=True)
class NightlyResult:
    """The night's report, its folder, and the index that links it."""

    report: Report
    folder: Path
    index: Path
    removed: tuple[Path, ...] = field(default=())


def nightly(factory: Any = None, options: NightlyOptions | None = None, *,
            progress: Progress | None = None, metrics: MetricsOptions | None = None,
            started: datetime | None = None) -> NightlyResult:
    """Run the nightly suite against ``factory`` (as for :func:`certify`) and write the
    night's folder, ``report.html`` and the index."""
    options = options or NightlyOptions()
    suite = load_suite(options.suite)
    started = started or datetime.now(UTC)
    folder = _new_folder(options.out, started)
    registry = (metrics.registry if metrics is not None and metrics.registry is not None
                else CollectorRegistry())
    metrics = replace(metrics, registry=registry) if metrics else MetricsOptions(
        registry=registry)
    report = certify(factory, CertifyOptions(
        budget_s=options.budget_s or suite.budget_s, seed=options.seed, level=options.level,
        workers=options.workers, out=folder, suite=options.suite,
        processes=options.processes, stateful_share=options.stateful_share,
        skip=options.skip), progress=progress, metrics=metrics)
    page = render_report(report, suite=options.suite, started=started,
                         history=folder / "history.jsonl", workers=options.workers,
                         samples=_samples(registry))
    (folder / "report.html").write_text(page, encoding="utf-8")
    removed = _prune(options.out, options.keep, keep_also=folder)
    nights = _nights(options.out)
    index = options.out / "index.html"
    index.write_text(render_index(nights, prefix=""), encoding="utf-8")
    (folder / "index.html").write_text(render_index(nights, prefix="../"), encoding="utf-8")
    return NightlyResult(report, folder, index, removed)


def _new_folder(out: Path, started: datetime) -> Path:
    base = started.astimezone(UTC).strftime(NIGHT_FORMAT)
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        folder = out / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise InvalidArgument(f"{out} already holds 999 nights named {base}; pick another --out")


def _nights(out: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every night kept under ``out``, oldest first, with its results.json."""
    nights = []
    for folder in sorted(out.iterdir()):
        results = folder / "results.json"
        if _NIGHT_NAME.match(folder.name) and results.is_file():
            try:
                nights.append((folder.name, json.loads(results.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue
    return nights


def _prune(out: Path, keep: int, *, keep_also: Path) -> tuple[Path, ...]:
    """Delete the oldest night folders beyond ``keep``; only folders this job made."""
    if keep == 0:
        return ()
    folders = [out / name for name, _ in _nights(out) if out / name != keep_also]
    excess = folders[: max(0, len(folders) - (keep - 1))]
    for folder in excess:
        shutil.rmtree(folder)
    return tuple(excess)


# -- the run's metrics, as the report reads them --------------------------------------


@dataclass(frozen=True)
class _Sample:
    labels: Mapping[str, str]
    value: float


def _samples(registry: CollectorRegistry) -> dict[str, list[_Sample]]:
    found: dict[str, list[_Sample]] = defaultdict(list)
    for family in registry.collect():
        for sample in family.samples:
            found[sample.name].append(_Sample(dict(sample.labels), sample.value))
    return dict(found)


def _by_scenario(samples: Mapping[str, Sequence[_Sample]], name: str) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for sample in samples.get(name, ()):
        totals[sample.labels["scenario"]] += sample.value
    return dict(totals)


def _latency(samples: Mapping[str, Sequence[_Sample]]) -> dict[str, dict[str, list[int]]]:
    """Per scenario and op, operations per latency bucket (not cumulative)."""
    cumulative: dict[str, dict[str, dict[float, float]]] = defaultdict(lambda: defaultdict(dict))
    for sample in samples.get(f"{DURATION.name}_bucket", ()):
        bound = math.inf if sample.labels["le"] == "+Inf" else float(sample.labels["le"])
        cumulative[sample.labels["scenario"]][sample.labels["op"]][bound] = sample.value
    result: dict[str, dict[str, list[int]]] = {}
    for scenario, ops in cumulative.items():
        result[scenario] = {}
        for op, buckets in ops.items():
            running, counts = 0.0, []
            for bound in sorted(buckets):
                counts.append(int(buckets[bound] - running))
                running = buckets[bound]
            result[scenario][op] = counts
    return result


# -- the timeline ---------------------------------------------------------------------


@dataclass
class _Timeline:
    bins: int
    span_s: float
    rows: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    scenarios: list[dict[str, Any]]
    operations: dict[int, list[str]]
    """The history lines of each witness: its invocation, then its completion."""


def _timeline(history: Path, report: Report, workers: int, witnesses: set[int]) -> _Timeline:
    """Bin every operation of the history into its worker's row.

    certify numbers workers per scenario, in suite order: scenario ``i`` runs workers
    ``i * (W + 1)`` to ``i * (W + 1) + W - 1`` and does its final reads as worker
    ``i * (W + 1) + W``.
    """
    lines = history.read_text(encoding="utf-8").splitlines()
    if not lines:
        return _Timeline(TIMELINE_BINS, 0.0, [], [], [], {})
    first, last = json.loads(lines[0])["time_ns"], json.loads(lines[-1])["time_ns"]
    width = max(1, last - first)
    rows: dict[int, list[int]] = {}
    invoked: dict[int, tuple[int, int]] = {}
    spans: dict[int, list[int]] = {}
    operations: dict[int, list[str]] = {}
    marks = []
    for line in lines:
        entry = json.loads(line)
        worker, at = entry["worker"], entry["time_ns"]
        if entry["type"] == "invoke":
            invoked[worker] = (entry["index"], at)
            if entry["index"] in witnesses:
                operations[entry["index"]] = [line]
            continue
        index, since = invoked.pop(worker, (entry["index"], at))
        if index in witnesses:
            operations.setdefault(index, []).append(line)
        code = ("V" if index in witnesses else _CODE_OF_OK[entry["f"]] if entry["type"] == "ok"
                else "u" if entry["type"] == "info"
                else "x" if isinstance(entry["result"], dict) else "e")
        row = rows.setdefault(worker, [0] * TIMELINE_BINS)
        start = min(TIMELINE_BINS - 1, (since - first) * TIMELINE_BINS // width)
        end = min(TIMELINE_BINS - 1, (at - first) * TIMELINE_BINS // width)
        rank = _CODES.index(code)
        for slot in range(start, end + 1):
            row[slot] = max(row[slot], rank)
        span = spans.setdefault(_scenario_of(worker, workers), [since, at])
        span[0], span[1] = min(span[0], since), max(span[1], at)
        if index in witnesses:
            marks.append({"worker": worker, "at": (since - first) / width, "op": index})
    names = [s.name for s in report.scenarios]
    return _Timeline(
        bins=TIMELINE_BINS,
        span_s=width / 1e9,
        rows=[{"worker": worker, "scenario": _name(names, _scenario_of(worker, workers)),
               "codes": "".join(_CODES[rank] for rank in row)}
              for worker, row in sorted(rows.items())],
        marks=marks,
        scenarios=[{"name": _name(names, i), "from": (a - first) / width,
                    "to": (b - first) / width} for i, (a, b) in sorted(spans.items())],
        operations=operations,
    )


def _scenario_of(worker: int, workers: int) -> int:
    return worker // (workers + 1)


def _name(names: Sequence[str], i: int) -> str:
    return names[i] if i < len(names) else f"scenario {i + 1}"


# -- report.html ----------------------------------------------------------------------


def render_report(report: Report, *, suite: str, started: datetime, history: Path,
                  workers: int, samples: Mapping[str, Sequence[_Sample]]) -> str:
    """The night's self-contained page."""
    shown = {name: result.violations[:COUNTEREXAMPLES] for name, result in report.checks.items()}
    witnesses = {i for violations in shown.values() for v in violations for i in v.witnesses}
    timeline = _timeline(history, report, workers, witnesses)
    reads = _by_scenario(samples, f"{READS.name}_total")
    rates = {checker: _by_scenario(samples, f"{metric.name}_total")
             for checker, metric in VIOLATION_METRICS.items()}
    latency = _latency(samples)
    scenarios = [s.name for s in report.scenarios]
    title = f"memcert {suite}: {report.backend} — {report.verdict}{report.skipped_on_request}"
    body = [
        f'<header class="{report.verdict}"><h1>{_e(title)}</h1>',
        f"<p>Started {_e(started.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC'))}; took "
        f"{report.elapsed_s:.0f} s; seed {report.seed}, level {_e(report.level)}, "
        f"{report.history_entries:,} history entries.</p>",
        f"<p>Reproduce: <code>{_e(report.command)}</code></p>",
        '<p><a href="results.json">results.json</a> · <a href="junit.xml">junit.xml</a> · '
        '<a href="history.jsonl">history.jsonl</a> · <a href="index.html">all nights</a></p>'
        "</header>",
        _verdict_table(report),
        "<h2>Timeline</h2>",
        '<p class="note">One row per worker, grouped by scenario; time runs left to right. '
        "A slice takes the colour of the most telling operation in it; a red mark is an "
        "operation that witnesses a violation shown below.</p>",
        _legend(),
        '<div id="timeline-box"><canvas id="timeline" data-rendered="0"></canvas>'
        '<div id="tip" hidden></div></div>',
        "<h2>Per scenario</h2>",
        '<div class="charts">',
        *(_scenario_charts(name, reads.get(name, 0.0), {c: r.get(name, 0.0)
                                                        for c, r in rates.items()},
                           latency.get(name, {})) for name in scenarios),
        "</div>",
        "<h2>Counterexamples</h2>",
        _counterexamples(report, shown, timeline.operations),
        "<h2>Coverage of the fault conditions</h2>",
        _coverage(report),
    ]
    data = {"colours": _COLOURS, "bins": timeline.bins, "span_s": timeline.span_s,
            "rows": timeline.rows, "marks": timeline.marks, "scenarios": timeline.scenarios}
    return _page(title, "\n".join(body), script=_TIMELINE_JS, data=data)


def _verdict_table(report: Report) -> str:
    rows = ["<table><tr><th>invariant</th><th>verdict</th><th>violations</th>"
            "<th>checked</th><th>rate</th><th>notes</th></tr>"]
    for name, v in report.invariants.items():
        rows.append(f'<tr class="{v.verdict}"><td>{_e(name)}</td><td>{_e(v.verdict)}</td>'
                    f"<td>{v.violations:,}</td><td>{v.checked:,}</td><td>{v.rate:.4%}</td>"
                    f"<td>{_e('; '.join(v.notes))}</td></tr>")
    rows.append("</table>")
    if report.errors:
        rows.append("<p>The backend itself raised: " + "; ".join(
            f"{_e(name)} ×{count} (first: <code>{_e(first[:200])}</code>)"
            for name, (count, first) in report.errors.items()) + "</p>")
    return "\n".join(rows)


_COLOURS = {".": "#f4f4f4", "r": "#9ecae1", "w": "#3182bd", "d": "#756bb1", "x": "#fdae6b",
            "e": "#e6550d", "u": "#969696", "V": "#d62728"}
_MEANING = {"r": "read", "w": "write", "d": "delete or restore", "x": "rejected",
            "e": "error", "u": "unknown outcome", "V": "violation witness"}


def _legend() -> str:
    return '<p class="legend">' + " ".join(
        f'<span><i style="background:{_COLOURS[c]}"></i>{_e(m)}</span>'
        for c, m in _MEANING.items()) + "</p>"


def _scenario_charts(name: str, reads: float, violations: Mapping[str, float],
                     latency: Mapping[str, Sequence[int]]) -> str:
    bars = [(checker, count / reads if reads else 0.0) for checker, count in violations.items()]
    return (f'<section class="scenario"><h3>{_e(name)}</h3>'
            f"<p>{int(reads):,} reads checked; {int(sum(violations.values())):,} "
            "violations.</p>"
            f"{_bar_chart(bars, title='violations per read', percent=True)}"
            f"{_latency_chart(latency)}</section>")


def _bar_chart(bars: Sequence[tuple[str, float]], *, title: str, percent: bool) -> str:
    width, row, label = 420, 18, 170
    top = max((value for _, value in bars), default=0.0) or 1.0
    parts = [f'<svg class="chart bars" width="{width}" height="{row * len(bars) + 24}" '
             f'role="img" aria-label="{_e(title)}"><text x="0" y="12" class="t">'
             f"{_e(title)}</text>"]
    for i, (name, value) in enumerate(bars):
        y = 20 + i * row
        length = (width - label - 70) * value / top
        text = f"{value:.3%}" if percent else f"{value:g}"
        parts.append(f'<text x="0" y="{y + 12}">{_e(name)}</text>'
                     f'<rect x="{label}" y="{y + 2}" width="{length:.1f}" height="{row - 5}" '
                     f'class="{"bad" if value else "zero"}"><title>{_e(text)}</title></rect>'
                     f'<text x="{label + length + 4:.1f}" y="{y + 12}">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _latency_chart(latency: Mapping[str, Sequence[int]]) -> str:
    """Operations per latency bucket, one line per op, on a log-count scale."""
    width, height, left, bottom = 420, 170, 40, 40
    labels = [_duration(b) for b in BUCKETS_S] + ["more"]
    top = max((c for counts in latency.values() for c in counts), default=0)
    scale = math.log10(top + 1) or 1.0
    step = (width - left - 10) / max(1, len(labels) - 1)
    parts = [f'<svg class="chart latency" width="{width}" height="{height}" role="img" '
             'aria-label="latency distribution"><text x="0" y="12" class="t">operations per '
             "latency bucket (log scale)</text>"]
    for i, text in enumerate(labels):
        if i % 2 == 0:
            parts.append(f'<text x="{left + i * step:.1f}" y="{height - bottom + 14}" '
                         f'class="tick" text-anchor="middle">{text}</text>')
    palette = ("#3182bd", "#9ecae1", "#756bb1", "#31a354")
    for k, (op, counts) in enumerate(sorted(latency.items())):
        points = " ".join(
            f"{left + i * step:.1f},"
            f"{height - bottom - (height - bottom - 20) * math.log10(c + 1) / scale:.1f}"
            for i, c in enumerate(counts))
        colour = palette[k % len(palette)]
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                     f'stroke-width="2"><title>{_e(op)}</title></polyline>'
                     f'<text x="{left + 4 + 70 * k}" y="{height - 6}" fill="{colour}">'
                     f"{_e(op)} ({sum(counts):,})</text>")
    parts.append("</svg>")
    return "".join(parts)


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:g}µs" if seconds < 1e-3 else (
        f"{seconds * 1e3:g}ms" if seconds < 1 else f"{seconds:g}s")


def _counterexamples(report: Report, shown: Mapping[str, Sequence[Violation]],
                     operations: Mapping[int, Sequence[str]]) -> str:
    parts = []
    for checker, violations in shown.items():
        if not violations:
            continue
        total = report.checks[checker].violation_count
        parts.append(f"<h3>{_e(checker)}: {total:,} violation(s), {len(violations)} shown</h3>")
        for violation in violations:
            lines = [line for i in violation.witnesses for line in operations.get(i, ())]
            parts.append(
                f'<div class="cex"><p>{_e(render_explanation(violation))}</p>'
                f"<details><summary>history lines of ops "
                f"{', '.join(map(str, violation.witnesses))}</summary>"
                f"<pre>{_e(chr(10).join(lines))}</pre></details></div>")
    for failure in (report.stateful or {}).get("failures", []):
        parts.append(
            f"<h3>{_e(', '.join(failure['checkers']))}: the stateful phase's shortest "
            f"program, {failure['steps']} step(s)</h3>"
            f'<div class="cex">{"".join(f"<p>{_e(t)}</p>" for t in failure["explanations"])}'
            f"<pre>{_e(failure['program'])}</pre></div>")
    return "\n".join(parts) or "<p>No violations: nothing to show.</p>"


def _coverage(report: Report) -> str:
    required: dict[str, list[str]] = defaultdict(list)
    for scenario in report.scenarios:
        for wanted in scenario.requires:
            required[wanted].append(scenario.name)
    rows = ["<table><tr><th>condition</th><th>occurred</th><th>required by</th>"
            "<th>serves</th><th>meaning</th></tr>"]
    for name in sorted(set(report.coverage) | set(required) | set(CONDITIONS)):
        count = report.coverage.get(name, 0)
        status = "missing" if name in required and not count else "met" if count else ""
        condition = CONDITIONS.get(name)
        rows.append(f'<tr class="{status}"><td>{_e(name)}</td><td>{count:,}</td>'
                    f"<td>{_e(', '.join(required.get(name, [])))}</td>"
                    f"<td>{_e(condition.invariant if condition else '')}</td>"
                    f"<td>{_e(condition.definition if condition else '')}</td></tr>")
    rows.append("</table><h3>Faults fired</h3><table><tr><th>scenario</th><th>steps</th>"
                "<th>faults</th></tr>")
    for s in report.scenarios:
        faults = ", ".join(f"{_e(k)} ×{v:,}" for k, v in sorted(s.faults_fired.items()))
        rows.append(f"<tr><td>{_e(s.name)}</td><td>{s.steps_done:,} of {s.steps_planned:,}"
                    f"{' (budget ran out)' if s.budget_exhausted else ''}</td>"
                    f"<td>{faults or 'none'}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


# -- index.html -----------------------------------------------------------------------


def render_index(nights: Sequence[tuple[str, Mapping[str, Any]]], *, prefix: str) -> str:
    """Every night kept, newest first, and each invariant's rate across nights."""
    invariants = list(dict.fromkeys(name for _, r in nights for name in r.get("invariants", {})))
    charts = [_night_chart(name, [(night, float(r["invariants"].get(name, {}).get("rate", 0.0)))
                                  for night, r in nights])
              for name in invariants]
    rows = ["<table><tr><th>night</th><th>verdict</th><th>backend</th><th>seed</th>"
            "<th>took</th>" + "".join(f"<th>{_e(n)}</th>" for n in invariants) + "</tr>"]
    for night, results in reversed(nights):
        cells = "".join(
            f'<td class="{_e(results["invariants"].get(n, {}).get("verdict", ""))}">'
            f'{float(results["invariants"].get(n, {}).get("rate", 0.0)):.3%}</td>'
            for n in invariants)
        rows.append(f'<tr class="{_e(results.get("verdict", ""))}">'
                    f'<td><a href="{_e(prefix + night)}/report.html">{_e(night)}</a></td>'
                    f'<td>{_e(results.get("verdict", ""))}</td>'
                    f'<td>{_e(results.get("backend", ""))}</td>'
                    f'<td>{_e(str(results.get("seed", "")))}</td>'
                    f'<td>{float(results.get("elapsed_s", 0.0)):.0f} s</td>{cells}</tr>')
    rows.append("</table>")
    body = ("<header><h1>memcert nights</h1>"
            f"<p>{len(nights)} night(s) kept in this folder.</p></header>"
            "<h2>Rates across nights</h2>"
            f'<div class="charts">{"".join(charts)}</div>'
            "<h2>Nights</h2>" + "\n".join(rows))
    return _page("memcert nights", body)


def _night_chart(name: str, points: Sequence[tuple[str, float]]) -> str:
    width, height, left = 320, 150, 50
    highest = max((v for _, v in points), default=0.0)
    top = highest or 1.0
    step = (width - left - 10) / max(1, len(points) - 1)
    coords = [(left + i * step, height - 25 - (height - 50) * v / top)
              for i, (_, v) in enumerate(points)]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="{"bad" if v else "zero"}">'
                   f"<title>{_e(night)}: {v:.3%}</title></circle>"
                   for (x, y), (night, v) in zip(coords, points, strict=True))
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    return (f'<svg class="chart nights" width="{width}" height="{height}" role="img" '
            f'aria-label="{_e(name)} rate across nights"><text x="0" y="12" class="t">'
            f"{_e(name)} (violations per check)</text>"
            f'<text x="0" y="{height - 25}" class="tick">0</text>'
            f'<text x="0" y="29" class="tick">'
            f'{f"{highest:.2%}" if highest else "none found"}</text>'
            f'<polyline points="{line}" fill="none" stroke="#555"/>{dots}</svg>')


# -- the page -------------------------------------------------------------------------

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 2em 3em;color:#222}
header{padding:.6em 1em;margin:0 -1em 1em;border-bottom:4px solid #999}
header.certified{border-color:#31a354}header.failed{border-color:#d62728}
header.unknown{border-color:#fd8d3c}
h1{font-size:1.4em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;
text-align:left;vertical-align:top}tr.fail td,tr.failed td,tr.missing td,td.fail{background:#fde0dd}
tr.unknown td,td.unknown{background:#fff3d6}tr.skipped td{color:#737373}
td a{white-space:nowrap}code,pre{font:12px/1.35 ui-monospace,monospace}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}
.charts{display:flex;flex-wrap:wrap;gap:1em}.scenario{border:1px solid #ddd;padding:0 1em 1em}
svg.chart text{font-size:11px}svg.chart text.t{font-weight:600}svg.chart .tick{fill:#777}
rect.bad,circle.bad{fill:#d62728}rect.zero,circle.zero{fill:#31a354}
.legend span{margin-right:1em}.legend i{display:inline-block;width:10px;height:10px;
margin-right:4px}
#timeline-box{position:relative}#timeline{width:100%;border:1px solid #ddd}
#tip{position:absolute;background:#222;color:#fff;padding:2px 6px;font-size:12px;
pointer-events:none}
.cex{border-left:4px solid #d62728;padding-left:1em;margin:1em 0}.note{color:#555}
"""

_TIMELINE_JS = """
(function () {
  var data = JSON.parse(document.getElementById('data').textContent);
  var canvas = document.getElementById('timeline');
  var colours = data.colours;
  var rowH = 7, top = 18, left = 170;
  var width = Math.max(600, canvas.parentNode.clientWidth || 900);
  var height = top + rowH * data.rows.length + 4;
  var scale = window.devicePixelRatio || 1;
  canvas.width = width * scale; canvas.height = height * scale;
  canvas.style.height = height + 'px';
  var ctx = canvas.getContext('2d');
  ctx.scale(scale, scale);
  ctx.font = '10px sans-serif';
  var plot = width - left - 4, bin = plot / data.bins;
  data.scenarios.forEach(function (s, i) {
    ctx.fillStyle = i % 2 ? '#fafafa' : '#eef3f8';
    ctx.fillRect(left + s.from * plot, 0, Math.max(1, (s.to - s.from) * plot), height);
    ctx.fillStyle = '#333';
    ctx.fillText(s.name, left + s.from * plot + 2, 11);
  });
  var rowOf = {};
  data.rows.forEach(function (row, r) {
    rowOf[row.worker] = r;
    var y = top + r * rowH;
    ctx.fillStyle = '#555';
    if (r % 3 === 0) ctx.fillText('w' + row.worker + ' ' + row.scenario, 2, y + rowH);
    for (var i = 0; i < row.codes.length; i++) {
      var c = row.codes.charAt(i);
      if (c === '.') continue;
      ctx.fillStyle = colours[c];
      ctx.fillRect(left + i * bin, y, Math.max(1, bin), rowH - 1);
    }
  });
  var marks = data.marks.map(function (m) {
    var x = left + m.at * plot, y = top + rowOf[m.worker] * rowH;
    ctx.fillStyle = '#d62728';
    ctx.beginPath(); ctx.moveTo(x, y - 3); ctx.lineTo(x - 4, y + rowH + 2);
    ctx.lineTo(x + 4, y + rowH + 2); ctx.closePath(); ctx.fill();
    return {x: x, y: y, op: m.op, worker: m.worker};
  });
  var tip = document.getElementById('tip');
  canvas.addEventListener('mousemove', function (event) {
    var box = canvas.getBoundingClientRect();
    var x = event.clientX - box.left, y = event.clientY - box.top;
    var hit = marks.filter(function (m) { return Math.abs(m.x - x) < 5 && y >= m.y - 3 &&
                                                 y <= m.y + rowH + 3; })[0];
    if (hit) {
      tip.hidden = false; tip.style.left = (x + 8) + 'px'; tip.style.top = (y + 8) + 'px';
      tip.textContent = 'op ' + hit.op + ' (worker ' + hit.worker + ')';
    } else if (x >= left) {
      var t = (x - left) / plot * data.span_s;
      tip.hidden = false; tip.style.left = (x + 8) + 'px'; tip.style.top = (y + 8) + 'px';
      tip.textContent = t.toFixed(2) + ' s';
    } else { tip.hidden = true; }
  });
  canvas.addEventListener('mouseleave', function () { tip.hidden = true; });
  canvas.setAttribute('data-rendered', String(data.rows.length));
  canvas.setAttribute('data-marks', String(marks.length));
})();
"""


def _page(title: str, body: str, *, script: str = "", data: object = None) -> str:
    payload = ""
    if data is not None:
        encoded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        payload = f'<script type="application/json" id="data">{encoded}</script>'
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><meta name=\"viewport\" "
            "content=\"width=device-width,initial-scale=1\">"
            f"<style>{_STYLE}</style></head><body>\n{body}\n{payload}"
            f"{f'<script>{script}</script>' if script else ''}</body></html>\n")


def _e(text: str) -> str:
    return html.escape(text, quote=True)

