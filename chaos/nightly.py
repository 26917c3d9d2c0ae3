"""``memcert nightly``: the long chaos run, and the report a person opens in the morning.

Each night gets a folder of its own under ``--out``, named by its UTC start time
(``2026-11-29T020000Z``), holding what ``memcert certify --compress`` writes
(``results.json``, ``junit.xml``, ``history.jsonl.zst``) and ``report.html``. Thirty nights
are kept by default, so each night's history is compressed; the report notes its size,
compressed and plain, and the index what the nights kept take on disk. ``index.html``, in the parent
folder and in every night's folder, links the nights kept there and charts each
invariant's rate across them; its embedded data (``<script id="data">``) keeps each
night's verdicts, rates and violations per cause, so that nights can be compared
without opening every results.json. Every page is one self-contained file: styles, script and
charts are inline, so it opens offline, from a mail attachment or an artifact store.

``report.html`` shows:

- the verdict per invariant, with its violations per root cause, the seed and the
  command that reproduces the run;
- a timeline per worker: each pixel column is a slice of the run, coloured by what the
  worker's operations did there, with the operations that witness a violation marked;
- per scenario, each invariant's rate (failed checks per check, in the invariant's own
  unit), its violations by cause and the latency distribution, read from the run's own
  metrics (:mod:`chaos.metrics`), the same numbers the dashboards show;
- the minimal counterexamples, per checker and root cause: the cause's count, its fix
  paragraph (:data:`invariants.causes.FIXES`, long form in docs/fix-your-backend.md
  under the cause's anchor), and its examples' explanations with the history lines of
  their witnesses;
- coverage of the fault conditions the scenarios require, and the faults that fired.

The verdict and the exit code are certify's; the report only presents them.
"""

from __future__ import annotations

import html
import io
import json
import math
import re
import shutil
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import zstandard
from prometheus_client import CollectorRegistry

from invariants.causes import FIX_PAGE, FIXES
from invariants.errors import InvalidArgument
from invariants.history import Paraphrase, find_history
from invariants.verdict import ReadRef, Violation, cited, render_explanation
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes
from scenarios import load_suite
from scenarios.conditions import CONDITIONS

from .certify import STATEFUL_SHARE, CertifyOptions, Progress, certify
from .explain import cause_counts, examples_by_cause, most_telling
from .metrics import (
    BUCKETS_S,
    CHECKS,
    DURATION,
    FAILED_CHECKS,
    READS,
    VIOLATION_METRICS,
    VIOLATIONS_BY_CAUSE,
    MetricsOptions,
)
from .report import INVARIANTS, Report, format_rate

__all__ = ["NightlyOptions", "NightlyResult", "nightly", "render_index", "render_report"]

NIGHT_FORMAT = "%Y-%m-%dT%H%M%SZ"
_NIGHT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z(-\d+)?$")
TIMELINE_BINS = 600
COUNTEREXAMPLES = 2
"""Violations shown in full per checker and cause; results.json keeps more."""

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
    compress: bool = True
    """Record ``history.jsonl.zst`` (the default) rather than ``history.jsonl``."""
    max_value_bytes: int = DEFAULT_VALUE_BYTES
    """The longest value the plans write, in bytes of UTF-8 (at most the contract's 64 KiB)."""

    def __post_init__(self) -> None:
        check_max_value_bytes(self.max_value_bytes, "max_value_bytes")
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
        skip=options.skip, compress=options.compress, max_value_bytes=options.max_value_bytes),
        progress=progress, metrics=metrics)
    history = find_history(folder)
    if history is None:
        raise FileNotFoundError(f"certify left no history in {folder}")
    page = render_report(report, suite=options.suite, started=started,
                         history=history, workers=options.workers,
                         samples=_samples(registry))
    (folder / "report.html").write_text(page, encoding="utf-8")
    removed = _prune(options.out, options.keep, keep_also=folder)
    nights = _nights(options.out)
    index = options.out / "index.html"
    kept_bytes = sum(_size_on_disk(options.out / name) for name, _ in nights)
    index.write_text(render_index(nights, prefix="", history_bytes=kept_bytes),
                     encoding="utf-8")
    (folder / "index.html").write_text(
        render_index(nights, prefix="../", history_bytes=kept_bytes), encoding="utf-8")
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


def _size_on_disk(folder: Path) -> int:
    """The bytes of the history kept in a night's folder; 0 if it has none."""
    history = find_history(folder)
    return history.stat().st_size if history is not None else 0


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
    plain_bytes: int
    """The size of the history's lines, decompressed: counted as they were read."""


def _lines(history: Path) -> Iterator[bytes]:
    """The history's lines, each with its newline, read a buffer at a time; a compressed
    history (told by its first bytes, as every reader tells it) is decompressed as it
    is read, so the file is never held whole, plain or not."""
    with open(history, "rb") as raw:
        compressed = raw.read(len(zstandard.FRAME_HEADER)) == zstandard.FRAME_HEADER
        raw.seek(0)
        if not compressed:
            yield from raw
            return
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        yield from io.BufferedReader(reader)


class _Stamp(msgspec.Struct, gc=False):
    """What the timeline reads of a history line; msgspec skips the rest (the op, a
    read's records) without building it, which is most of a line."""

    index: int
    worker: int
    time_ns: int
    type: str
    f: str
    result: msgspec.Raw = msgspec.Raw(b"null")
    """Left as JSON text: the timeline only asks whether it is an object (an Ack)."""


_STAMP = msgspec.json.Decoder(_Stamp)


def _timeline(history: Path, report: Report, workers: int, witnesses: set[int]) -> _Timeline:
    """Bin every operation of the history into its worker's row.

    certify numbers workers per scenario, in suite order: scenario ``i`` runs workers
    ``i * (W + 1)`` to ``i * (W + 1) + W - 1`` and does its final reads as worker
    ``i * (W + 1) + W``.

    The file is streamed twice, the first time only for its span and its size.
    """
    plain_bytes, head, tail = 0, b"", b""
    for line in _lines(history):
        plain_bytes += len(line)
        head = head or line
        tail = line
    if not plain_bytes:
        return _Timeline(TIMELINE_BINS, 0.0, [], [], [], {}, 0)
    first, last = _STAMP.decode(head).time_ns, _STAMP.decode(tail).time_ns
    width = max(1, last - first)
    rows: dict[int, list[int]] = {}
    invoked: dict[int, tuple[int, int]] = {}
    spans: dict[int, list[int]] = {}
    operations: dict[int, list[str]] = {}
    marks = []
    decode = _STAMP.decode
    for line in _lines(history):
        entry = decode(line)
        worker, at, etype = entry.worker, entry.time_ns, entry.type
        if etype == "invoke":
            invoked[worker] = (entry.index, at)
            if entry.index in witnesses:
                operations[entry.index] = [line.decode("utf-8").rstrip("\n")]
            continue
        index, since = invoked.pop(worker, (entry.index, at))
        if index in witnesses:
            operations.setdefault(index, []).append(line.decode("utf-8").rstrip("\n"))
        code = ("V" if index in witnesses else _CODE_OF_OK[entry.f] if etype == "ok"
                else "u" if etype == "info"
                else "x" if bytes(entry.result).startswith(b"{") else "e")
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
        plain_bytes=plain_bytes,
    )


def _scenario_of(worker: int, workers: int) -> int:
    return worker // (workers + 1)


def _name(names: Sequence[str], i: int) -> str:
    return names[i] if i < len(names) else f"scenario {i + 1}"


# -- report.html ----------------------------------------------------------------------


def render_report(report: Report, *, suite: str, started: datetime, history: Path,
                  workers: int, samples: Mapping[str, Sequence[_Sample]]) -> str:
    """The night's self-contained page."""
    shown = _shown(report)
    witnesses = {i for by_cause in shown.values() for violations in by_cause.values()
                 for v in violations for i in v.witnesses}
    timeline = _timeline(history, report, workers, witnesses)
    reads = _by_scenario(samples, f"{READS.name}_total")
    violations = {checker: _by_scenario(samples, f"{metric.name}_total")
                  for checker, metric in VIOLATION_METRICS.items()}
    rates = _rates(samples)
    causes = _scenario_causes(samples)
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
        f'{_history_link(history, timeline.plain_bytes)} · <a href="index.html">all nights</a>'
        "</p></header>",
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
        *(_scenario_charts(name, reads.get(name, 0.0),
                           sum(v.get(name, 0.0) for v in violations.values()),
                           rates.get(name, {}), causes.get(name, []), latency.get(name, {}))
          for name in scenarios),
        "</div>",
        "<h2>Counterexamples</h2>",
        _counterexamples(report, shown, timeline.operations),
        "<h2>Coverage of the fault conditions</h2>",
        _coverage(report),
    ]
    data = {"colours": _COLOURS, "bins": timeline.bins, "span_s": timeline.span_s,
            "rows": timeline.rows, "marks": timeline.marks, "scenarios": timeline.scenarios}
    return _page(title, "\n".join(body), script=_TIMELINE_JS, data=data)


def _invariant_causes(report: Report) -> dict[str, dict[str, int]]:
    """Per results.json invariant, its violations per cause, as the verdict table
    counts them: the causes of each of its checkers that ran, 0 included."""
    return {name: cause_counts(report.checks[c] for c in checkers if c in report.checks)
            for name, checkers in INVARIANTS.items()}


def _by_count(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Causes by falling count; ties keep their order (CAUSES' own)."""
    return sorted(counts.items(), key=lambda item: -item[1])


def _shown(report: Report) -> dict[str, dict[str, list[Violation]]]:
    """Per checker and cause found (most violations first), the kept violations of that
    cause shown in full: the most telling first, as the verdict table picks it, then
    the next that cites other operations, :data:`COUNTEREXAMPLES` at most; none where
    the checker kept no violation of it (results.json keeps the first few only)."""
    shown: dict[str, dict[str, list[Violation]]] = {}
    for checker, result in report.checks.items():
        kept = examples_by_cause([result])
        by_cause: dict[str, list[Violation]] = {}
        for cause, n in _by_count(result.causes):
            if not n:
                continue
            examples = kept.get(cause, [])
            if examples:
                best = most_telling(examples)
                examples = [best, *(v for v in examples if v is not best)]
            chosen: dict[tuple[int, ...], Violation] = {}
            for v in examples:
                if len(chosen) < COUNTEREXAMPLES:
                    chosen.setdefault(_writes_cited(v), v)
            by_cause[cause] = list(chosen.values())
        if by_cause:
            shown[checker] = by_cause
    return shown


def _writes_cited(violation: Violation) -> tuple[int, ...]:
    """The operations an example cites other than its read: two examples citing the
    same ones differ only in the read that saw them, and are shown once."""
    return tuple(ref.op for _, ref in cited(violation.explanation)
                 if not isinstance(ref, ReadRef))


def _verdict_table(report: Report) -> str:
    causes = _invariant_causes(report)
    rows = ["<table><tr><th>invariant</th><th>verdict</th><th>violations</th>"
            "<th>failed checks</th><th>checked</th><th>rate</th><th>rate of</th>"
            "<th>by cause</th><th>notes</th></tr>"]
    for name, v in report.invariants.items():
        by_cause = ", ".join(
            f'<a href="#cause-{_e(cause)}">{_e(cause)}</a> {n:,}' if n else f"{_e(cause)} 0"
            for cause, n in _by_count(causes.get(name, {}))) if v.violations else ""
        rows.append(f'<tr class="{v.verdict}"><td>{_e(name)}</td><td>{_e(v.verdict)}</td>'
                    f"<td>{v.violations:,}</td><td>{v.rate_numerator:,}</td>"
                    f"<td>{v.checked:,}</td><td>{format_rate(v.rate)}</td>"
                    f"<td>{_e(v.rate_definition)}</td><td>{by_cause}</td>"
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


def _rates(samples: Mapping[str, Sequence[_Sample]]) -> dict[str, dict[str, float]]:
    """Per scenario, each invariant's failed checks over its checks: results.json's
    rate, restricted to the scenario."""
    terms: dict[str, dict[str, list[float]]] = defaultdict(
        lambda: {name: [0.0, 0.0] for name in INVARIANTS})
    for position, metric in enumerate((FAILED_CHECKS, CHECKS)):
        for sample in samples.get(f"{metric.name}_total", ()):
            terms[sample.labels["scenario"]][sample.labels["invariant"]][position] += sample.value
    return {scenario: {name: failed / checks if checks else 0.0
                       for name, (failed, checks) in by_invariant.items()}
            for scenario, by_invariant in terms.items()}


def _scenario_causes(samples: Mapping[str, Sequence[_Sample]],
                     ) -> dict[str, list[tuple[str, str, int]]]:
    """Per scenario, the (invariant, cause, violations) its metrics found, most first."""
    found: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for sample in samples.get(f"{VIOLATIONS_BY_CAUSE.name}_total", ()):
        if sample.value:
            labels = sample.labels
            found[labels["scenario"]].append(
                (labels["invariant"], labels["cause"], int(sample.value)))
    return {scenario: sorted(causes, key=lambda c: -c[2]) for scenario, causes in found.items()}


def _scenario_charts(name: str, reads: float, violations: float, rates: Mapping[str, float],
                     causes: Sequence[tuple[str, str, int]],
                     latency: Mapping[str, Sequence[int]]) -> str:
    bars = [(invariant, rates.get(invariant, 0.0)) for invariant in INVARIANTS]
    by_cause = "; ".join(f"{_e(invariant)} {_e(cause)} {n:,}" for invariant, cause, n in causes)
    return (f'<section class="scenario"><h3>{_e(name)}</h3>'
            f"<p>{int(reads):,} reads; {int(violations):,} violations"
            f"{f' (by cause: {by_cause})' if by_cause else ''}.</p>"
            f"{_bar_chart(bars, title='rate: failed checks per check')}"
            f"{_latency_chart(latency)}</section>")


def _bar_chart(bars: Sequence[tuple[str, float]], *, title: str) -> str:
    width, row, label = 420, 18, 170
    top = max((value for _, value in bars), default=0.0) or 1.0
    parts = [f'<svg class="chart bars" width="{width}" height="{row * len(bars) + 24}" '
             f'role="img" aria-label="{_e(title)}"><text x="0" y="12" class="t">'
             f"{_e(title)}</text>"]
    for i, (name, value) in enumerate(bars):
        y = 20 + i * row
        length = (width - label - 70) * value / top
        text = format_rate(value)
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


def _history_link(history: Path, plain_bytes: int) -> str:
    """The link to the night's history, with its size; compressed, what it saves:
    "history.jsonl.zst (6.1 MB compressed, 67 MB plain: 1/11)"."""
    stored = history.stat().st_size
    link = f'<a href="{_e(history.name)}">{_e(history.name)}</a>'
    if stored >= plain_bytes:
        return f"{link} ({_bytes(stored)})"
    ratio = plain_bytes / max(1, stored)
    shown = f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.1f}"
    return f"{link} ({_bytes(stored)} compressed, {_bytes(plain_bytes)} plain: 1/{shown})"


def _bytes(count: int) -> str:
    """A size as a reader takes it in: "6.1 MB", "67 MB", "820 kB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{count} B"


def _duration(seconds: float) -> str:
    return f"{seconds * 1e6:g}µs" if seconds < 1e-3 else (
        f"{seconds * 1e3:g}ms" if seconds < 1 else f"{seconds:g}s")


def _counterexamples(report: Report, shown: Mapping[str, Mapping[str, Sequence[Violation]]],
                     operations: Mapping[int, Sequence[str]]) -> str:
    """Per checker and cause: the count, the fix paragraph once, then the examples."""
    parts = []
    for checker, by_cause in shown.items():
        result = report.checks[checker]
        parts.append(f"<h3>{_e(checker)}: {result.violation_count:,} violation(s)</h3>")
        for cause, violations in by_cause.items():
            parts.append(
                f'<h4 id="cause-{_e(cause)}">{_e(cause)}: {result.causes[cause]:,} '
                f"violation(s), {len(violations)} shown</h4>"
                f'<p class="fix"><b>Fix.</b> {_e(FIXES.get(cause, ""))} <span class="note">'
                f"The long form: <code>{_e(FIX_PAGE)}#{_e(cause)}</code> in memcert's "
                "sources.</span></p>")
            if not violations:
                parts.append(f'<p class="note">No example of {_e(cause)} was kept: results.json '
                             f"keeps the first {len(result.violations)} violations of "
                             f"{_e(checker)}; <code>memcert replay</code> on this folder "
                             "finds them all.</p>")
            for violation in violations:
                parts.append(_counterexample(violation, operations))
    for failure in (report.stateful or {}).get("failures", []):
        texts = "".join(f'<p class="text">{_e(t)}</p>' for t in failure["explanations"])
        parts.append(
            f"<h3>{_e(', '.join(failure['checkers']))}: the stateful phase's shortest "
            f"program, {failure['steps']} step(s)</h3>"
            f'<div class="cex">{texts}<pre>{_e(failure["program"])}</pre></div>')
    return "\n".join(parts) or "<p>No violations: nothing to show.</p>"


def _counterexample(violation: Violation, operations: Mapping[int, Sequence[str]]) -> str:
    lines = [line for i in violation.witnesses for line in operations.get(i, ())]
    seen = (f"{violation.repeats:,} violations cite the same operations"
            if violation.repeats > 1 else "")
    detail = "; ".join(part for part in (violation.detail, seen) if part)
    detail = f'<p class="detail">{_e(detail)}</p>' if detail else ""
    return (f'<div class="cex">{detail}<p class="text">{_e(render_explanation(violation))}</p>'
            f"<details><summary>history lines of ops "
            f"{', '.join(map(str, violation.witnesses))}</summary>"
            f"<pre>{_e(chr(10).join(lines))}</pre></details></div>")


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


def render_index(nights: Sequence[tuple[str, Mapping[str, Any]]], *, prefix: str,
                 history_bytes: int | None = None) -> str:
    """Every night kept, newest first, and each invariant's rate across nights; the
    page's data holds each night's verdicts, rates and violations per cause.
    ``history_bytes``, when given, is what the nights' histories take on disk."""
    invariants = list(dict.fromkeys(name for _, r in nights for name in r.get("invariants", {})))
    trends = [_night_trend(night, results) for night, results in nights]
    charts = [_night_chart(name, [(t["night"], t["invariants"].get(name, {}))
                                  for t in trends]) for name in invariants]
    rows = ["<table><tr><th>night</th><th>verdict</th><th>backend</th><th>seed</th>"
            "<th>took</th>" + "".join(f"<th>{_e(n)}</th>" for n in invariants)
            + "<th>causes found</th></tr>"]
    for (night, results), trend in zip(reversed(nights), reversed(trends), strict=True):
        cells = "".join(
            f'<td class="{_e(trend["invariants"].get(n, {}).get("verdict", ""))}">'
            f'{format_rate(float(trend["invariants"].get(n, {}).get("rate", 0.0)))}</td>'
            for n in invariants)
        found = "; ".join(f"{n}: {_found(t['causes'])}" for n, t in trend["invariants"].items()
                          if _found(t["causes"]))
        cells += f"<td>{_e(found)}</td>"
        rows.append(f'<tr class="{_e(results.get("verdict", ""))}">'
                    f'<td><a href="{_e(prefix + night)}/report.html">{_e(night)}</a></td>'
                    f'<td>{_e(results.get("verdict", ""))}</td>'
                    f'<td>{_e(results.get("backend", ""))}</td>'
                    f'<td>{_e(str(results.get("seed", "")))}</td>'
                    f'<td>{float(results.get("elapsed_s", 0.0)):.0f} s</td>{cells}</tr>')
    rows.append("</table>")
    body = ("<header><h1>memcert nights</h1>"
            f"<p>{len(nights)} night(s) kept in this folder"
            + (f"; their histories take {_bytes(history_bytes)} on disk"
               if history_bytes is not None else "") + ".</p></header>"
            "<h2>Rates across nights</h2>"
            f'<div class="charts">{"".join(charts)}</div>'
            "<h2>Nights</h2>" + "\n".join(rows))
    return _page("memcert nights", body, data={"nights": trends})


def _night_trend(night: str, results: Mapping[str, Any]) -> dict[str, Any]:
    """What the index keeps of one night's results.json: per invariant its verdict,
    rate and its two terms, violations, and violations per cause (its checkers'
    ``causes``, summed as the verdict table sums them; {} for a night from before
    causes were counted)."""
    checks = results.get("checks", {})
    invariants: dict[str, Any] = {}
    for name, v in results.get("invariants", {}).items():
        causes: dict[str, int] = {}
        for checker in INVARIANTS.get(name, ()):
            for cause, n in checks.get(checker, {}).get("causes", {}).items():
                causes[cause] = causes.get(cause, 0) + int(n)
        invariants[name] = {
            "verdict": v.get("verdict", ""), "rate": float(v.get("rate", 0.0)),
            "rate_numerator": int(v.get("rate_numerator", 0)),
            "rate_denominator": int(v.get("rate_denominator", v.get("checked", 0))),
            "violations": int(v.get("violations", 0)), "causes": causes}
    return {"night": night, "verdict": results.get("verdict", ""),
            "backend": results.get("backend", ""), "seed": results.get("seed"),
            "invariants": invariants}


def _found(causes: Mapping[str, int]) -> str:
    """The causes found, most first: "alias 2,082, race 3"; "" when none."""
    return ", ".join(f"{cause} {n:,}" for cause, n in _by_count(causes) if n)


def _night_chart(name: str, nights: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    width, height, left = 320, 150, 50
    points = [(night, float(trend.get("rate", 0.0)), _found(trend.get("causes", {})))
              for night, trend in nights]
    highest = max((v for _, v, _ in points), default=0.0)
    top = highest or 1.0
    step = (width - left - 10) / max(1, len(points) - 1)
    coords = [(left + i * step, height - 25 - (height - 50) * v / top)
              for i, (_, v, _) in enumerate(points)]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" class="{"bad" if v else "zero"}">'
                   f"<title>{_e(night)}: {format_rate(v)}{_e(f' ({found})' if found else '')}"
                   "</title></circle>"
                   for (x, y), (night, v, found) in zip(coords, points, strict=True))
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    return (f'<svg class="chart nights" width="{width}" height="{height}" role="img" '
            f'aria-label="{_e(name)} rate across nights"><text x="0" y="12" class="t">'
            f"{_e(name)} (failed checks per check)</text>"
            f'<text x="0" y="{height - 25}" class="tick">0</text>'
            f'<text x="0" y="29" class="tick">'
            f'{format_rate(highest) if highest else "none found"}</text>'
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
h4{margin:1.2em 0 .3em}.fix{background:#eef6ee;border-left:4px solid #31a354;padding:.3em 1em}
.detail{font-weight:600}.cex p.text{white-space:pre-wrap;font:12px/1.35 ui-monospace,monospace}
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

