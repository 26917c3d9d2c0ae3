"""``report.html``: one night, as a person reads it the morning after.

The page shows the verdict per invariant with its violations per root cause; the
command that ran, its labels, and its time against its budget (with, past
:data:`OVERRUN_NOTE`, the phases that took it); a timeline per worker with every
violation's witnesses marked (:mod:`chaos.nightly_timeline`); per scenario, each
invariant's rate, its violations by cause and the latency distribution, from the run's
own metrics (:mod:`chaos.metrics`), the same numbers the dashboards show; the
counterexamples per checker and root cause with their fix; and coverage of the fault
conditions. The verdict is certify's; the page only presents it.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry

from invariants.causes import FIX_PAGE, FIXES
from invariants.verdict import ReadRef, Violation, cited, render_explanation
from scenarios.conditions import CONDITIONS

from .certify import CHECK_RESERVE, STATEFUL_SHARE
from .explain import cause_counts, examples_by_cause, most_telling
from .metrics import (
    BUCKETS_S,
    CHECKS,
    DURATION,
    FAILED_CHECKS,
    READS,
    VIOLATION_METRICS,
    VIOLATIONS_BY_CAUSE,
)
from .nightly_charts import bar_chart, latency_chart
from .nightly_index import by_count
from .nightly_page import escape as _e
from .nightly_page import page, size_text
from .nightly_timeline import TIMELINE_JS, Witnesses, timeline
from .report import INVARIANTS, PHASES, Report, format_rate

__all__ = ["COUNTEREXAMPLES", "OVERRUN_NOTE", "Sample", "render_report", "samples"]

COUNTEREXAMPLES = 2
"""Violations shown in full per checker and cause; results.json keeps more."""
OVERRUN_NOTE = 0.10
"""An overrun of the budget past this share gets a note saying where the time went."""


# -- the run's metrics, as the report reads them --------------------------------------


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


def samples(registry: CollectorRegistry) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = defaultdict(list)
    for family in registry.collect():
        for sample in family.samples:
            found[sample.name].append(Sample(dict(sample.labels), sample.value))
    return dict(found)


def _by_scenario(samples: Mapping[str, Sequence[Sample]], name: str) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for sample in samples.get(name, ()):
        totals[sample.labels["scenario"]] += sample.value
    return dict(totals)


def _latency(samples: Mapping[str, Sequence[Sample]]) -> dict[str, dict[str, list[int]]]:
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


# -- report.html ----------------------------------------------------------------------


def render_report(report: Report, *, suite: str, started: datetime, history: Path,
                  workers: int, samples: Mapping[str, Sequence[Sample]], ran: str = "",
                  stateful_share: float = STATEFUL_SHARE,
                  witnesses: Witnesses | None = None) -> str:
    """The night's self-contained page. ``ran`` is the command that ran (``memcert
    nightly ...``), shown above the one that reproduces its plans; ``stateful_share`` is
    the run's, to say what each phase was meant to take of the budget; ``witnesses``
    holds every violation's witnesses, as certify's check found them (None checks the
    history again for them)."""
    began = time.monotonic()
    shown = _shown(report)
    shown_ops = {i for by_cause in shown.values() for violations in by_cause.values()
                 for v in violations for i in v.witnesses}
    scenarios = [s.name for s in report.scenarios]
    line = timeline(history, level=report.level, scenarios=scenarios,  # type: ignore[arg-type]
                    workers=workers, shown=shown_ops, witnesses=witnesses)
    reads = _by_scenario(samples, f"{READS.name}_total")
    violations = {checker: _by_scenario(samples, f"{metric.name}_total")
                  for checker, metric in VIOLATION_METRICS.items()}
    rates = _rates(samples)
    causes = _scenario_causes(samples)
    latency = _latency(samples)
    phases = dict(report.phases)
    if "report" not in phases:
        phases["report"] = time.monotonic() - began
    title = f"memcert {suite}: {report.backend} — {report.verdict}{report.skipped_on_request}"
    marked = (f"{line.witnesses:,} operation(s) witness a violation; each red mark counts "
              "those under it (hover for the count and their op numbers)"
              + (f", the first {line.witnesses:,} of more" if line.truncated else "")
              if line.witnesses else "no operation witnesses a violation")
    body = [
        f'<header class="{report.verdict}"><h1>{_e(title)}</h1>',
        f"<p>Ran: <code>{_e(ran or report.command)}</code></p>",
        _labels(report.labels),
        f"<p>Started {_e(started.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC'))}; "
        f"{_elapsed(report, phases)}; seed {report.seed}, level {_e(report.level)}, "
        f"{report.history_entries:,} history entries.</p>",
        _overrun(report, phases, stateful_share),
        f"<p>Reproduce: <code>{_e(report.command)}</code></p>",
        '<p><a href="results.json">results.json</a> · <a href="junit.xml">junit.xml</a> · '
        f'{_history_link(history, line.plain_bytes)} · <a href="index.html">all nights</a>'
        "</p></header>",
        _verdict_table(report),
        "<h2>Timeline</h2>",
        '<p class="note">One row per worker, grouped by scenario; time runs left to right, '
        "in seconds since the run began. A slice takes the colour of the most telling "
        f"operation in it; {marked}.</p>",
        _legend(),
        '<div id="timeline-box"><canvas id="timeline" data-rendered="0" role="img" '
        f'aria-label="timeline of {len(line.rows)} workers over {line.span_s:.1f} s, '
        f'{line.witnesses:,} witness operation(s) marked"></canvas>'
        '<div id="tip" hidden></div></div>',
        "<h2>Per scenario</h2>",
        '<div class="charts">',
        *(_scenario_charts(name, reads.get(name, 0.0),
                           sum(v.get(name, 0.0) for v in violations.values()),
                           rates.get(name, {}), causes.get(name, []), latency.get(name, {}))
          for name in scenarios),
        "</div>",
        "<h2>Counterexamples</h2>",
        _counterexamples(report, shown, line.operations),
        "<h2>Coverage of the fault conditions</h2>",
        _coverage(report),
    ]
    data = {"colours": _COLOURS, "bins": line.bins, "span_s": line.span_s,
            "rows": line.rows, "marks": line.marks, "scenarios": line.scenarios,
            "witnesses": line.witnesses, "phases": phases}
    return page(title, "\n".join(body), script=TIMELINE_JS, data=data)


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return ('<p class="labels">Labels: ' + "".join(
        f"<code>{_e(key)}={_e(value)}</code>" for key, value in labels.items()) + "</p>")


def _elapsed(report: Report, phases: Mapping[str, float]) -> str:
    took = report.elapsed_s + phases.get("report", 0.0)
    if not report.budget_s:
        return f"took {took:.0f} s"
    ratio = took / report.budget_s
    # A ratio, not a percentage: the page's percentages are rates, at most 100 %.
    share = f"{ratio:.2f}× the budget" if abs(ratio - 1) >= 0.005 else "on time"
    return f"took {took:.1f} s of a {report.budget_s:g} s budget ({share})"


def _overrun(report: Report, phases: Mapping[str, float], stateful_share: float) -> str:
    """Past :data:`OVERRUN_NOTE` over budget, the phases and what each was meant to take:
    the scenarios their share, the stateful phase its own, final reads and checking the
    reserve between them; the others, and the report, nothing."""
    took = report.elapsed_s + phases.get("report", 0.0)
    if not report.budget_s or took <= report.budget_s * (1 + OVERRUN_NOTE):
        return ""
    budget = report.budget_s
    planned = {"scenarios": budget * (1 - CHECK_RESERVE - stateful_share),
               "stateful": budget * stateful_share}
    reserve = budget * CHECK_RESERVE
    used = phases.get("final_reads", 0.0) + phases.get("checking", 0.0)
    over: list[tuple[float, str]] = []
    for name, seconds in phases.items():
        if name in planned:
            extra = seconds - planned[name]
            meant = f"its {_s(planned[name])} s"
        elif name in ("final_reads", "checking"):
            continue
        else:
            extra, meant = seconds, "no share of the budget"
        if extra > 0.05:
            over.append((extra, f"{PHASES.get(name, name)} took {_s(seconds)} s against "
                                f"{meant}"))
    if used > reserve:
        reads, checking = _s(phases.get("final_reads", 0.0)), _s(phases.get("checking", 0.0))
        over.append((used - reserve, f"final reads ({reads} s) and checking the history "
                                     f"({checking} s) took {_s(used)} s against the "
                                     f"{_s(reserve)} s reserved"))
    why = "; ".join(text for _, text in sorted(over, reverse=True))
    rows = "".join(f"<tr><td>{_e(name)}</td><td>{seconds:.2f} s</td>"
                   f"<td>{_e(PHASES.get(name, ''))}</td></tr>" for name, seconds in phases.items())
    return (f'<div class="overrun"><p><b>Over budget by {_s(took - budget)} s '
            f"({took / budget:.2f}× the budget).</b> The budget is split before the run: "
            f"{1 - CHECK_RESERVE - stateful_share:.0%} for the scenarios, "
            f"{stateful_share:.0%} for the stateful phase, {CHECK_RESERVE:.0%} reserved for "
            "the final reads and checking; a phase that runs longer is not cut short "
            "(a scenario's final reads read every entity back, checking reads the whole "
            f"history, shrinking finishes the program it holds). Here: {_e(why)}.</p>"
            f"<table><tr><th>phase</th><th>took</th><th>what</th></tr>{rows}</table></div>")


def _s(seconds: float) -> str:
    """Seconds as the note gives them: two decimals under one second, else one."""
    return f"{seconds:.2f}" if seconds < 1 else f"{seconds:.1f}"


def _invariant_causes(report: Report) -> dict[str, dict[str, int]]:
    """Per results.json invariant, its violations per cause, as the verdict table
    counts them: the causes of each of its checkers that ran, 0 included."""
    return {name: cause_counts(report.checks[c] for c in checkers if c in report.checks)
            for name, checkers in INVARIANTS.items()}


def _shown(report: Report) -> dict[str, dict[str, list[Violation]]]:
    """Per checker and cause found (most violations first), the kept violations of that
    cause shown in full: the most telling first, as the verdict table picks it, then
    the next that cites other operations, :data:`COUNTEREXAMPLES` at most; none where
    the checker kept no violation of it (results.json keeps the first few only)."""
    shown: dict[str, dict[str, list[Violation]]] = {}
    for checker, result in report.checks.items():
        kept = examples_by_cause([result])
        by_cause: dict[str, list[Violation]] = {}
        for cause, n in by_count(result.causes):
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
            for cause, n in by_count(causes.get(name, {}))) if v.violations else ""
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


def _rates(samples: Mapping[str, Sequence[Sample]]) -> dict[str, dict[str, float]]:
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


def _scenario_causes(samples: Mapping[str, Sequence[Sample]],
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
            f"{bar_chart(bars, title='rate per invariant', unit='failed checks per check')}"
            f"{latency_chart(latency, BUCKETS_S)}</section>")


def _history_link(history: Path, plain_bytes: int) -> str:
    """The link to the night's history, with its size; compressed, what it saves:
    "history.jsonl.zst (6.1 MB compressed, 67 MB plain: 1/11)"."""
    stored = history.stat().st_size
    link = f'<a href="{_e(history.name)}">{_e(history.name)}</a>'
    if stored >= plain_bytes:
        return f"{link} ({size_text(stored)})"
    ratio = plain_bytes / max(1, stored)
    shown = f"{ratio:.0f}" if ratio >= 10 else f"{ratio:.1f}"
    return f"{link} ({size_text(stored)} compressed, {size_text(plain_bytes)} plain: 1/{shown})"


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


