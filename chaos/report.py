"""A certification's results: one verdict per invariant, as data, then as files and text.

``results.json``'s fields are public and fixed (extend, never rename): top level
``backend``, ``seed``, ``level``, ``verdict`` (``certified`` | ``failed`` | ``unknown``),
and ``invariants`` keyed by the six guarantees, each with at least ``verdict`` (``pass`` |
``fail`` | ``unknown`` | ``skipped``), ``violations``, ``checked``, ``rate`` and
``examples``; ``budget_s`` and ``phases`` (seconds per phase, :data:`PHASES`) say where
the run's time went, and ``labels`` holds a night's labels. The phantom checker (a value
no write produced) reports under ``durability``: both say the store does not return what
it was given.

Two phases can find a violation: the chaos scenarios, whose history is checked, and
the stateful phase, whose shrunk programs are saved under ``stateful/``. Each
invariant's ``found_by`` names the phases that found one; ``violations``, ``checked``
and ``rate`` describe the chaos history alone, so that rates stay comparable across
runs, and a stateful finding adds its explanation to ``examples`` and its program's
path to ``programs``. The top-level ``stateful`` holds the phase's own outcome.

An invariant the person certifying asked to skip (``skip``, ``--skip``) is still checked
and its figures still shown, but its verdict is ``skipped`` and the overall verdict
leaves it out: a store that never meant to fold paraphrases can be certified on the
rest without its report pretending the fifth was kept.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

from invariants.causes import FIX_PAGE
from invariants.checkers import ALL_CHECKERS
from invariants.verdict import CheckResult, Validity, render_explanation
from scenarios.conditions import CONDITION_INVARIANT

from .explain import (
    WIDTH,
    cause_counts,
    cause_summary,
    example_lines,
    examples_by_cause,
    fix_lines,
    more_examples,
    most_telling,
    wrap,
)

__all__ = [
    "INVARIANTS",
    "PHASES",
    "InvariantVerdict",
    "Report",
    "ScenarioSummary",
    "build_report",
    "format_rate",
    "rate_definition",
    "render_table",
]

INVARIANTS: dict[str, tuple[str, ...]] = {
    "uniqueness": ("uniqueness",),
    "causal_monotonicity": ("causal_monotonicity",),
    "deletion_monotonicity": ("deletion_monotonicity",),
    "semantic_normalization": ("semantic_normalization",),
    "durability": ("durability", "phantom"),
    "isolation": ("isolation",),
}
"""Each results.json invariant, and the checkers whose verdicts it combines."""

PHASES: dict[str, str] = {
    "setup": "checking the backend and planning the scenarios",
    "scenarios": "the scenarios' workers",
    "final_reads": "reading every entity back after each scenario",
    "stateful": "the stateful phase: its search, then shrinking what it found",
    "checking": "checking the saved history",
    "report": "writing report.html (it reads the history twice for the timeline)",
}
"""The phases a run's ``phases`` times, in order, and what each does."""

InvariantOutcome = Literal["pass", "fail", "unknown", "skipped"]
Overall = Literal["certified", "failed", "unknown"]

SKIP_NOTE = ("skipped at the certifier's request (--skip): checked and shown, but not part "
             "of the overall verdict")
_OUTCOME = {Validity.VALID: "pass", Validity.INVALID: "fail", Validity.UNKNOWN: "unknown"}
STATEFUL_PREFIX = "The stateful phase shrank this to"
RATE_WIDTH = 100
"""The widest line of the rates under the table."""
RATE_HEAD = " = failed / checked"
"""What the table's rate column header adds, naming the definition every rate shares: the
checks that found a violation (the "failed" column; one check can find several
violations) over the checks made (the "checked" column), each invariant counting its own
kind (reads of a deleted entity, ...). ``-v`` names each nonzero rate's terms under the
table; a failing run's output stays short without them."""
RATE_TERMS = "rates, each in its invariant's own unit:"
"""The heading of the terms ``-v`` lists."""
SHRINK_SHORT = "stopped shrinking when the stateful phase's time ran out; -v says how to go on"
"""A failure's shrinking note as the default output shows it: the stateful phase's note
(shown whole under ``-v``) takes three lines, under each invariant it concerns."""
SHRINK_AGAIN = "stopped shrinking early here too"
"""A shrinking note already shown under an earlier invariant, the second time."""


@dataclass(frozen=True)
class InvariantVerdict:
    """One guarantee's verdict, with the evidence a reader needs to trust it."""

    name: str
    verdict: InvariantOutcome
    violations: int
    checked: int
    rate: float
    rate_definition: str
    examples: tuple[str, ...]
    witnesses: tuple[tuple[int, ...], ...]
    missing_conditions: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    found_by: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    rate_numerator: int = 0
    """Checks that found a violation; ``rate`` is this over ``checked``."""
    rate_denominator: int = 0
    """Always ``checked``, kept under the name the checkers' results use."""
    causes: Mapping[str, int] = field(default_factory=dict)
    """Violations per root cause (``invariants.causes``), zeros included."""
    shrinking: tuple[str, ...] = ()
    """The stateful phase's notes on this invariant's programs (shrinking stopped early),
    also in ``notes``; shown under the invariant even when its other notes are not."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "violations": self.violations,
            "checked": self.checked,
            "rate": self.rate,
            "rate_definition": self.rate_definition,
            "rate_numerator": self.rate_numerator,
            "rate_denominator": self.rate_denominator,
            "causes": dict(self.causes),
            "examples": list(self.examples),
            "witnesses": [list(w) for w in self.witnesses],
            "missing_conditions": list(self.missing_conditions),
            "notes": list(self.notes),
            "found_by": list(self.found_by),
            "programs": list(self.programs),
        }


@dataclass(frozen=True)
class ScenarioSummary:
    """What one scenario of the run did.

    ``not_run`` says why a scenario did not run at all (a network scenario against a
    backend that is not reached over HTTP); such a scenario requires nothing, so it
    can neither make an invariant unknown nor pass one. ``nemesis`` holds what its
    nemesis did (:class:`chaos.nemesis.Nemesis`), which coverage reads back.
    ``stopped`` marks a scenario cut short, or never reached, because the run stopped
    early (``--fail-fast``); unlike one not run, it keeps its requirements, so the
    conditions it never produced leave their invariants unknown rather than passed.
    ``budget_s`` is the time it was given: its share of the run's budget, with the
    shares of the scenarios that could not run spread over those that could (0 for one
    not run; None in results written before it was recorded).
    """

    name: str
    steps_planned: int
    steps_done: int
    elapsed_s: float
    budget_exhausted: bool
    faults_fired: Mapping[str, int] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    not_run: str = ""
    nemesis: tuple[Mapping[str, Any], ...] = ()
    stopped: bool = False
    budget_s: float | None = None


@dataclass(frozen=True)
class Report:
    """Everything a certification concluded; ``to_json`` is results.json."""

    backend: str
    seed: int
    level: str
    verdict: Overall
    invariants: Mapping[str, InvariantVerdict]
    checks: Mapping[str, CheckResult]
    coverage: Mapping[str, int]
    scenarios: tuple[ScenarioSummary, ...]
    restore_supported: bool
    history_entries: int
    elapsed_s: float
    command: str
    errors: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    stateful: Mapping[str, Any] | None = None
    skip: tuple[str, ...] = ()
    stopped: str = ""
    """Why the run stopped before its plans ended (``--fail-fast``), or ""."""
    budget_s: float | None = None
    """The wall-clock budget the run was given; None for a replay."""
    phases: Mapping[str, float] = field(default_factory=dict)
    """Seconds per phase of the run, in order (:data:`PHASES`): where the time went when
    ``elapsed_s`` overran ``budget_s``."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """A night's labels (``memcert nightly --label``): what was tested."""

    @property
    def skipped_on_request(self) -> str:
        """What a verdict's headline adds for the invariants skipped, or ""."""
        return f" ({', '.join(self.skip)} skipped on request)" if self.skip else ""

    @property
    def exit_code(self) -> int:
        return {"certified": 0, "failed": 1, "unknown": 3}[self.verdict]

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "seed": self.seed,
            "level": self.level,
            "verdict": self.verdict,
            "skip": list(self.skip),
            "stopped": self.stopped or None,
            "invariants": {name: v.to_dict() for name, v in self.invariants.items()},
            "checks": {name: c.to_dict() for name, c in self.checks.items()},
            "coverage": dict(self.coverage),
            "scenarios": [
                {"name": s.name, "steps_planned": s.steps_planned, "steps_done": s.steps_done,
                 "elapsed_s": round(s.elapsed_s, 3), "budget_exhausted": s.budget_exhausted,
                 "faults_fired": dict(s.faults_fired), "requires": list(s.requires),
                 "not_run": s.not_run or None, "nemesis": [dict(e) for e in s.nemesis],
                 "stopped": s.stopped,
                 "budget_s": None if s.budget_s is None else round(s.budget_s, 3)}
                for s in self.scenarios
            ],
            "restore_supported": self.restore_supported,
            "backend_errors": {name: {"count": count, "first": first}
                               for name, (count, first) in self.errors.items()},
            "history_entries": self.history_entries,
            "elapsed_s": round(self.elapsed_s, 3),
            "reproduce": self.command,
            "stateful": None if self.stateful is None else dict(self.stateful),
            "budget_s": self.budget_s,
            "phases": {name: round(seconds, 3) for name, seconds in self.phases.items()},
            "labels": dict(self.labels),
        }

    def write(self, out: Path) -> None:
        """Write results.json and junit.xml beside the history."""
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(
            json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        _junit(self).write(out / "junit.xml", encoding="utf-8", xml_declaration=True)


def build_report(
    *,
    backend: str,
    seed: int,
    level: str,
    checks: Mapping[str, CheckResult],
    coverage: Mapping[str, int],
    scenarios: Sequence[ScenarioSummary],
    restore_supported: bool,
    history_entries: int,
    elapsed_s: float,
    command: str,
    errors: Mapping[str, tuple[int, str]] | None = None,
    stateful: Mapping[str, Any] | None = None,
    skip: Collection[str] = (),
    stopped: str = "",
    budget_s: float | None = None,
    phases: Mapping[str, float] | None = None,
) -> Report:
    """Combine checker results, coverage and the stateful phase's findings (the JSON
    form of :class:`invariants.stateful.StatefulOutcome`) into per-invariant verdicts;
    the invariants named in ``skip`` are judged, then marked skipped."""
    required = {cond for s in scenarios if not s.not_run for cond in s.requires}
    invariants = {
        name: _with_stateful(
            _verdict(name, [checks[c] for c in names if c in checks], coverage, required,
                     restore_supported),
            names, stateful)
        for name, names in INVARIANTS.items()
    }
    for name in skip:
        invariants[name] = replace(invariants[name], verdict="skipped",
                                   notes=(*invariants[name].notes, SKIP_NOTE))
    outcomes = {v.verdict for v in invariants.values()}
    overall: Overall = ("failed" if "fail" in outcomes
                        else "unknown" if "unknown" in outcomes else "certified")
    return Report(backend, seed, level, overall, invariants, dict(checks), dict(coverage),
                  tuple(scenarios), restore_supported, history_entries, elapsed_s, command,
                  dict(errors or {}), stateful, tuple(n for n in INVARIANTS if n in skip),
                  stopped, budget_s, dict(phases or {}))


def _with_stateful(verdict: InvariantVerdict, checkers: tuple[str, ...],
                   stateful: Mapping[str, Any] | None) -> InvariantVerdict:
    """A violation the stateful phase shrank fails the invariant whatever the chaos
    history showed; the phase's undecided checkers leave the chaos verdict alone, since
    the chaos history alone is what a pass rests on."""
    chaos = ("chaos",) if verdict.verdict == "fail" else ()
    if not stateful:
        return replace(verdict, found_by=chaos)
    undecided = stateful.get("undecided", {})
    notes = verdict.notes + tuple(f"the stateful phase left {c} undecided: {undecided[c]}"
                                  for c in checkers if c in undecided)
    found = [f for f in stateful["failures"] if set(f["checkers"]) & set(checkers)]
    if not found:
        return replace(verdict, found_by=chaos, notes=notes)
    saved = stateful.get("saved", {})
    programs = tuple(dict.fromkeys(saved[c] for c in checkers if c in saved))
    explanations = tuple(
        f"{STATEFUL_PREFIX} {f['steps']} step(s):\n{text}"
        for f in found for text in f["explanations"]
        if text.split(":", 1)[0] in checkers)
    shrinking = tuple(dict.fromkeys(n for f in found for n in f.get("notes", ())))
    return replace(
        verdict, verdict="fail", found_by=(*chaos, "stateful"), programs=programs,
        examples=verdict.examples + explanations, notes=notes + shrinking,
        shrinking=shrinking)


def _verdict(name: str, results: list[CheckResult], coverage: Mapping[str, int],
             required: set[str], restore_supported: bool) -> InvariantVerdict:
    missing = tuple(sorted(cond for cond, inv in CONDITION_INVARIANT.items()
                           if inv == name and cond in required and not coverage.get(cond)))
    if not restore_supported and name == "deletion_monotonicity":
        missing = tuple(c for c in missing if "restore" not in c)
    validity = Validity.combine(r.validity for r in results)
    if validity is Validity.VALID and missing:
        validity = Validity.UNKNOWN
    violations = sum(r.violation_count for r in results)
    # Checkers combined under one invariant (durability and phantom) add their checks
    # and their failed checks alike, so the rate stays one over the other.
    numerator = sum(r.rate_numerator for r in results)
    denominator = sum(r.rate_denominator for r in results)
    causes = cause_counts(results)
    by_cause = examples_by_cause(results)
    telling = [most_telling(by_cause[c]) for c, n in sorted(causes.items(), key=lambda cn: -cn[1])
               if n and c in by_cause]
    examples = tuple(render_explanation(v) for v in telling)
    witnesses = tuple(v.witnesses for v in telling)
    notes = tuple(n for r in results for n in r.notes)
    if missing:
        notes += (f"required condition(s) never occurred: {', '.join(missing)}",)
    if not restore_supported and name == "deletion_monotonicity":
        notes += ("restore is not implemented by this backend: restore checks skipped",)
    definition = _definition([(r.rate_numerator_name, r.rate_denominator_name)
                              for r in results])
    return InvariantVerdict(
        name=name,
        verdict=_OUTCOME[validity],  # type: ignore[arg-type]
        violations=violations,
        checked=denominator,
        rate=numerator / denominator if denominator else 0.0,
        rate_definition=definition,
        rate_numerator=numerator,
        rate_denominator=denominator,
        causes=causes,
        examples=examples,
        witnesses=witnesses,
        missing_conditions=missing,
        notes=notes,
    )


def _junit(report: Report) -> ElementTree.ElementTree:
    failures = sum(v.verdict == "fail" for v in report.invariants.values())
    errors = sum(v.verdict == "unknown" for v in report.invariants.values())
    skipped = sum(v.verdict == "skipped" for v in report.invariants.values())
    suite = ElementTree.Element("testsuite", {
        "name": f"{_command_name(report)} {report.backend}", "tests": str(len(report.invariants)),
        "failures": str(failures), "errors": str(errors), "skipped": str(skipped),
        "time": f"{report.elapsed_s:.3f}"})
    for name, verdict in report.invariants.items():
        case = ElementTree.SubElement(suite, "testcase", {
            "classname": "memcert.invariants", "name": name, "time": "0"})
        detail = "\n\n".join(verdict.examples + verdict.notes)
        if verdict.verdict == "fail":
            ElementTree.SubElement(case, "failure", {
                "message": f"{verdict.violations} violation(s) of {name}",
                "type": "violation"}).text = detail
        elif verdict.verdict == "unknown":
            ElementTree.SubElement(case, "error", {
                "message": f"{name} could not be decided", "type": "unknown"}).text = detail
        elif verdict.verdict == "skipped":
            ElementTree.SubElement(case, "skipped", {
                "message": f"{name} skipped on request; {verdict.violations} violation(s) "
                           "found, not judged"}).text = detail
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def _command_name(report: Report) -> str:
    """``memcert certify``, ``memcert chaos``, ...: whichever command made the report."""
    words = report.command.split()[:2]
    return " ".join(words) if len(words) == 2 else "memcert certify"


def render_table(report: Report, *, verbose: bool = False) -> str:
    """What a person reads at the end of ``memcert certify``: the verdict table with
    each failed invariant's violations per cause, one example per cause, the fixes,
    and how to reproduce, within :data:`WIDTH` terminal columns; ``verbose`` adds every
    kept example, each rate's terms and, for a failure, why a scenario did not run."""
    rows = [("invariant", "verdict", "violations", "failed", "checked", "rate")]
    for name, v in report.invariants.items():
        rows.append((name, v.verdict.upper() if v.verdict == "fail" else v.verdict,
                     f"{v.violations:,}", f"{v.rate_numerator:,}", f"{v.checked:,}",
                     format_rate(v.rate)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
             for row in rows]
    for i, v in enumerate(report.invariants.values(), start=1):
        if v.violations and any(v.causes.values()):
            room = WIDTH - len(lines[i]) - 4
            lines[i] += f"  ({cause_summary(v.causes, room)})"
    lines[0] += RATE_HEAD
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = [f"{_command_name(report)} {report.backend}  (seed {report.seed}, level "
           f"{report.level})", "", *lines, *_rate_lines(report, verbose=verbose), ""]
    starved = [s for s in report.scenarios
               if s.steps_planned and not s.steps_done and not s.stopped and not s.not_run]
    for scenario in starved:
        out.append(f"scenario {scenario.name} ran none of its {scenario.steps_planned:,} "
                   f"steps in its {scenario.elapsed_s:.1f} s share of the budget; give "
                   "the run a larger --budget (worker processes take seconds to start)")
    if report.stopped:
        cut = ", ".join(f"{s.name} ({s.steps_done:,} of {s.steps_planned:,} steps)"
                        for s in report.scenarios if s.stopped)
        out.append(f"stopped early by {report.stopped}; cut short or not run: {cut}; "
                   "no stateful phase")
    if starved or report.stopped:
        out.append("")
    fixes: list[str] = []
    programs: list[str] = []
    noted: dict[str, str] = {}
    failed = [name for name, v in report.invariants.items() if v.verdict == "fail"]
    finders = {report.invariants[name].found_by for name in failed}
    shared = next(iter(finders)) if len(failed) > 1 and len(finders) == 1 else ()
    if shared and shared != ("chaos",):
        out += [f"each failure was found by {' and '.join(shared)}", ""]
    for name, v in report.invariants.items():
        results = [report.checks[c] for c in INVARIANTS[name] if c in report.checks]
        if v.verdict in ("fail", "unknown"):
            findings = _findings(name, v, results, verbose=verbose, noted=noted)
            # A failure the chaos phase alone found needs no line of its own: the table
            # gave its verdict, and each cause's line below names the invariant.
            plain = v.verdict == "fail" and v.found_by in ((), ("chaos",), shared)
            if not plain or not findings or not findings[0].startswith(f"{name}: "):
                by = f" (found by {', '.join(v.found_by)})" if v.found_by else ""
                out.append(f"{name}: {v.verdict}{by}")
            programs.extend(_in_out(p) for p in v.programs)
            out.extend(findings)
            fixes.extend(c for c, n in sorted(v.causes.items(), key=lambda cn: -cn[1]) if n)
            out.append("")
        elif v.verdict == "skipped":
            found = (f": {v.violations:,} violation(s) found, not judged" if v.violations
                     else ", nothing found")
            if SKIP_NOTE in v.notes or not v.notes:
                out.append(f"{name}: skipped at your request (--skip){found}")
            else:  # skipped by the command, which says why (memcert audit)
                out.append(f"{name}: skipped{found}")
                for note in v.notes:
                    out.extend(wrap(note, "  because ", "    "))
            out.extend(example_lines(name, v.causes, results, verbose=verbose))
            out.append("")
    if fixes:
        out.append(f"how to fix ({FIX_PAGE}#<cause> at length):")
        out.extend(fix_lines(fixes))
        out.append("")
    if programs == [_in_out(f"stateful/{name}.py") for name in failed]:
        out.append("shortest programs: stateful/<invariant>.py, each runs on its own")
    elif programs:
        out.extend(wrap("shortest programs, each runs on its own: " + ", ".join(programs),
                        "", "    "))
    for name, (count, first) in sorted(report.errors.items(), key=lambda kv: -kv[1][0]):
        out.append(f"the backend raised {name} {count} time(s), outcome unknown; first: "
                   f"{first[:160]}")
    if report.errors:
        out.append("")
    skipped: dict[str, list[str]] = {}
    for s in report.scenarios:
        if s.not_run:
            skipped.setdefault(s.not_run, []).append(s.name)
    # A failure does not rest on the scenarios that could not run: its output counts
    # them, and -v says why; any other verdict says why at once.
    brief = report.verdict == "failed" and not verbose
    for reason, names in skipped.items() if not brief else ():
        out.extend(wrap(f"{'scenarios' if len(names) > 1 else 'scenario'} "
                        f"{', '.join(names)} not run: {reason}", "", "    "))
    if skipped and not brief:
        out.append("")
    more = sum(more_examples(report.checks[c] for c in INVARIANTS[n] if c in report.checks)
               for n, v in report.invariants.items() if v.verdict == "fail")
    unrun = sum(map(len, skipped.values())) if brief else 0
    hidden = [f"{more:,} more example(s)"] if more and not verbose else []
    if not verbose and any(v.rate_numerator for v in report.invariants.values()):
        hidden.append("each rate's terms")
    if unrun:
        hidden.append(f"why {unrun} scenario{'s' if unrun > 1 else ''} did not run")
    if hidden:
        out.append("-v shows " + (", ".join(hidden[:-1]) + " and " if hidden[1:] else "")
                   + hidden[-1])
    out.append(f"verdict: {report.verdict.upper()}{report.skipped_on_request}")
    if report.verdict != "certified":
        out.extend(_command_lines(f"reproduce: {report.command}"))
    return "\n".join(out)


def _command_lines(text: str) -> list[str]:
    """A shell command in lines of at most :data:`WIDTH` columns, continued with a
    backslash, so that it still pastes as one command."""
    lines = textwrap.wrap(text, width=WIDTH - 2, subsequent_indent="    ",
                          break_long_words=False, break_on_hyphens=False)
    return [line + " \\" for line in lines[:-1]] + lines[-1:]


def _findings(name: str, v: InvariantVerdict, results: Sequence[CheckResult], *,
              verbose: bool, noted: dict[str, str]) -> list[str]:
    """A failed or unknown invariant's evidence: its examples per cause, the stateful
    phase's explanation when the chaos history found nothing (or with ``verbose``),
    then the notes, which qualify a pass or an unknown and, for a failure, only
    ``verbose`` shows; a failure's shrinking note is shown whatever: in full under
    ``verbose``, else short (:data:`SHRINK_SHORT`) the first time and shorter still when
    an invariant before it in ``noted`` had the same (``noted`` gains this
    invariant's)."""
    lines = example_lines(name, v.causes, results, verbose=verbose)
    stateful = [text for text in v.examples if text.startswith(STATEFUL_PREFIX)]
    if not verbose:
        stateful = stateful[:1]
    if stateful and (verbose or not v.violations):
        for text in stateful:
            for line in text.splitlines():
                lines.extend(wrap(line, "  ", "      "))
    for note in v.notes:
        if note in v.shrinking and not verbose:
            lines.append(f"  note: {SHRINK_AGAIN if note in noted else SHRINK_SHORT}")
        elif verbose or v.verdict != "fail" or note in v.shrinking:
            lines.extend(wrap(note, "  note: ", "    "))
        if note in v.shrinking:
            noted.setdefault(note, name)
    return lines


def _in_out(path: str) -> str:
    """A saved program's path as the output folder holds it (``stateful/x.py``); the
    folder itself is printed once, last."""
    parts = Path(path).parts
    return str(Path(*parts[-2:])) if len(parts) >= 2 and parts[-2] == "stateful" else path


def rate_definition(invariant: str) -> str:
    """What ``invariant``'s rate divides, by name, as results.json's ``rate_definition``
    gives it: its checkers' failed checks per their checks, each term joined with " + "
    where it combines two checkers (durability and phantom)."""
    checkers = {c.name: c for c in ALL_CHECKERS}
    return _definition([(checkers[c].numerator_name, checkers[c].denominator_name)
                        for c in INVARIANTS[invariant]])


def _definition(terms: Sequence[tuple[str, str]]) -> str:
    """One wording for results.json, the table and the dashboard: "N per D", or
    "N1 + N2 per D1 + D2", from (numerator name, denominator name) pairs."""
    if not terms:
        return ""
    return (" + ".join(n for n, _ in terms) + " per " + " + ".join(d for _, d in terms))


def format_rate(rate: float) -> str:
    """A rate as every report shows it (the table, report.html, the nights' index): four
    decimals, and never 0.0000 for a rate that is not 0. A rate is at most 1, so it
    needs no percentage that could read as more than 100 %."""
    if 0 < rate < 0.00005:
        return f"{rate:.1e}"
    return f"{rate:.4f}"


def _rate_lines(report: Report, *, verbose: bool = False) -> list[str]:
    """With ``verbose``, under the table, each nonzero rate's failed checks over its
    checks, counted and named in the invariant's own unit, per checker where an
    invariant combines two; nothing without."""
    if not verbose:
        return []
    lines = []
    for name, v in report.invariants.items():
        if not v.rate_numerator:
            continue
        results = [report.checks[c] for c in INVARIANTS[name] if c in report.checks]
        if len(results) == 1:
            [r] = results
            text = (f"{name} = {r.rate_numerator:,} {r.rate_numerator_name} / "
                    f"{r.rate_denominator:,} {r.rate_denominator_name}")
        else:
            text = (f"{name} = {v.rate_numerator:,} ("
                    + " + ".join(f"{r.rate_numerator:,} {r.rate_numerator_name}"
                                 for r in results)
                    + f") / {v.rate_denominator:,} ("
                    + " + ".join(f"{r.rate_denominator:,} {r.rate_denominator_name}"
                                 for r in results) + ")")
        if v.violations > v.rate_numerator:
            text += f" ({v.violations:,} violations: a check can find several)"
        lines.extend(textwrap.wrap(text, width=RATE_WIDTH, initial_indent="  ",
                                   subsequent_indent="      "))
    return ["", RATE_TERMS, *lines] if lines else []
