"""One unit for rates: one real run, and the same rate and terms everywhere it shows.

A known-bad backend (raw attribute keys: it fails uniqueness and semantic normalization)
runs once through ``memcert nightly`` with ``--pushgateway`` and ``-v``. Its printed
table (whose rate column names the definition, failed / checked, and whose ``-v`` lines
name each rate's terms), results.json, report.html and the metrics it pushed must give
each invariant the same failed checks, the same checks and the same rate, one over the
other, at most 1.
"""

from __future__ import annotations

import html
import json
import os
import random
import re
import subprocess
import sys
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from chaos.report import (
    INVARIANTS,
    RATE_HEAD,
    RATE_TERMS,
    build_report,
    format_rate,
    rate_definition,
    render_table,
)
from invariants.backend import Record
from invariants.checkers import CheckerSuite, check_history
from invariants.history import History
from tests.conftest import skip_or_fail
from tests.invariants.histbuild import HistoryBuilder
from tests.invariants.test_check_properties import run as correct_run

BAD = ("chaos.examples", "raw_attribute_keys")
FAILING = {"uniqueness", "semantic_normalization"}


def pushgateway() -> str:
    url = os.environ.get("MEMCERT_PUSHGATEWAY_URL")
    if not url:
        skip_or_fail("MEMCERT_PUSHGATEWAY_URL is not set: run `make test`, which starts a "
                     "throwaway Pushgateway", tests="the rates test")
    return str(url)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The run, under a backend name of its own so that no other push can answer."""
    gateway = pushgateway()
    folder = tmp_path_factory.mktemp("rates")
    module = f"rates_{uuid.uuid4().hex[:10]}"
    (folder / f"{module}.py").write_text(f"from {BAD[0]} import {BAD[1]} as backend\n")
    backend = f"{module}:backend"
    done = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "nightly", backend, "--out", str(folder / "nights"),
         "--budget", "20", "--suite", "quick", "--seed", "20261201", "--quiet",
         "--pushgateway", gateway, "-v"],
        capture_output=True, text=True, cwd=folder, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    [report] = re.findall(r"^report: (file://\S+)$", done.stdout, re.M)
    night = Path(unquote(urlparse(report).path)).parent
    with urllib.request.urlopen(f"{gateway}/metrics", timeout=10) as response:
        exposition = response.read().decode()
    return {"stdout": done.stdout, "night": night, "backend": backend,
            "results": json.loads((night / "results.json").read_text()),
            "page": (night / "report.html").read_text(), "exposition": exposition}


def pushed_terms(exposition: str, backend: str) -> dict[str, dict[str, float]]:
    """Per invariant, the pushed checks and failed checks, summed over the scenarios."""
    terms: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if (sample.name in ("memcert_checks_total", "memcert_failed_checks_total")
                    and sample.labels.get("backend") == backend):
                terms[sample.labels["invariant"]][sample.name] += sample.value
    return terms


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The verdict table's rows, by invariant: verdict, violations, failed checks,
    checked, rate. A per-cause breakdown in parentheses and thousands separators are left
    out."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("invariant "))
    assert lines[start].endswith("  rate" + RATE_HEAD), lines[start]
    header = lines[start].split()
    assert header[:6] == ["invariant", "verdict", "violations", "failed", "checked", "rate"], (
        header)
    rows = {}
    for line in lines[start + 2:start + 2 + len(INVARIANTS)]:
        cells = re.sub(r"\([^)]*\)", "", line).replace(",", "").split()
        rows[cells[0]] = cells[1:6]
    return rows


def rate_block(stdout: str) -> list[str]:
    """The table, and the lines under it that name each nonzero rate's terms."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("invariant "))
    end = lines.index(RATE_TERMS) + 1
    while end < len(lines) and lines[end].startswith("  "):
        end += 1
    return lines[start:end]


def rate_lines(stdout: str) -> str:
    """The lines under the table that name each nonzero rate's terms, unwrapped."""
    block = rate_block(stdout)
    start = block.index(RATE_TERMS)
    return " ".join(line.strip() for line in block[start + 1:])


@pytest.mark.slow
def test_every_rate_is_failed_checks_per_check_at_most_1_in_results_json(run):
    results = run["results"]
    assert {n for n, v in results["invariants"].items() if v["verdict"] == "fail"} >= FAILING
    for name, v in results["invariants"].items():
        assert v["checked"] == v["rate_denominator"], name
        assert 0 <= v["rate_numerator"] <= v["rate_denominator"], name
        assert v["rate"] == (v["rate_numerator"] / v["rate_denominator"]
                             if v["rate_denominator"] else 0.0), name
        assert v["rate_definition"] == rate_definition(name)
        checks = [results["checks"][c] for c in INVARIANTS[name]]
        assert v["rate_numerator"] == sum(c["rate_numerator"] for c in checks), name
        assert v["checked"] == sum(c["checked"] for c in checks), name
        for c in checks:
            assert c["checked"] == c["rate_denominator"] >= c["rate_numerator"], c["checker"]
            assert c["rate_numerator"] <= c["violation_count"], c["checker"]
    semantic = results["invariants"]["semantic_normalization"]
    assert semantic["rate_numerator"] > 0
    assert semantic["violations"] >= semantic["rate_numerator"]


@pytest.mark.slow
def test_the_printed_table_shows_the_same_rates_and_names_their_terms(run):
    results, stdout = run["results"], run["stdout"]
    rows = table_rows(stdout)
    terms = rate_lines(stdout)
    assert max(len(line) for line in rate_block(stdout)) <= 100
    for name, v in results["invariants"].items():
        verdict, violations, failed, checked, rate = rows[name]
        assert verdict.lower() == v["verdict"], name
        assert (int(violations), int(failed), int(checked)) == (
            v["violations"], v["rate_numerator"], v["checked"]), name
        assert rate == format_rate(v["rate"]), name
        named = f"{name} = {v['rate_numerator']:,} "
        assert (named in terms) == (v["rate_numerator"] > 0), (name, terms)
    for name in FAILING:
        [check] = [results["checks"][c] for c in INVARIANTS[name]]
        assert (f"{name} = {check['rate_numerator']:,} {check['rate_numerator_name']} / "
                f"{check['rate_denominator']:,} {check['rate_denominator_name']}") in terms


@pytest.mark.slow
def test_the_nightly_report_shows_the_same_rates_and_no_percentage_above_100(run):
    results, page = run["results"], run["page"]
    for name, v in results["invariants"].items():
        assert (f"<td>{html.escape(name)}</td><td>{v['verdict']}</td>"
                f"<td>{v['violations']:,}</td><td>{v['rate_numerator']:,}</td>"
                f"<td>{v['checked']:,}</td><td>{format_rate(v['rate'])}</td>"
                f"<td>{html.escape(v['rate_definition'])}</td>") in page, name
    percentages = [float(p) for p in re.findall(r"(\d+(?:\.\d+)?)%", page)]
    assert all(p <= 100 for p in percentages), percentages
    shown = [float(x) for x in re.findall(r"<title>[^<:]*: (\d+\.\d{4})</title>", page)]
    assert shown and all(x <= 1 for x in shown), "per scenario: failed checks per check"
    index = (run["night"] / "index.html").read_text()
    for name, v in results["invariants"].items():
        assert f'<td class="{v["verdict"]}">{format_rate(v["rate"])}</td>' in index, name


@pytest.mark.slow
def test_the_pushed_metrics_hold_the_same_terms(run):
    results = run["results"]
    pushed = pushed_terms(run["exposition"], run["backend"])
    assert set(pushed) == set(INVARIANTS)
    for name, v in results["invariants"].items():
        assert pushed[name] == {"memcert_checks_total": v["checked"],
                                "memcert_failed_checks_total": v["rate_numerator"]}, name


def test_an_invariant_of_two_checkers_adds_both_terms_and_names_both():
    """Durability combines the durability and phantom checkers: one read of a slot with
    an acknowledged write that served only a value nobody wrote is one lost write of
    one slot read, and one phantom record of one record read."""
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    h.read(1, "u1").ok("likes coffee")
    checks = check_history(h.history())
    report = build_report(backend="b", seed=1, level="lexical", checks=checks, coverage={},
                          scenarios=[], restore_supported=True, history_entries=4,
                          elapsed_s=0.0, command="memcert certify b")
    durability = report.invariants["durability"]
    assert (durability.violations, durability.rate_numerator, durability.checked,
            durability.rate_denominator, durability.rate) == (2, 2, 2, 2, 1.0)
    assert durability.rate_definition == rate_definition("durability") == (
        "lost writes + phantom records per reads of a slot with an acknowledged write + "
        "records read")
    assert durability.to_dict()["rate_numerator"] == 2
    assert RATE_TERMS not in render_table(report)
    table = render_table(report, verbose=True).splitlines()
    start = table.index(RATE_TERMS)
    assert table[start + 1:start + 3] == [
        "  durability = 2 (1 lost writes + 1 phantom records) / 2 (1 reads of a slot with an "
        "acknowledged",
        "      write + 1 records read)",
    ]


def _broken(history: History, rnd: random.Random) -> History:
    """The correct store's history with some reads broken every way a backend can: a
    record doubled, dropped, swapped with another's, an older write's value served too, a
    value from another namespace, or a value nobody wrote."""
    entries = list(history)
    written: dict[tuple[str, str], list[str]] = defaultdict(list)
    for i, entry in enumerate(entries):
        if entry.f == "write" and entry.type == "invoke":
            written[(entry.op.namespace, entry.op.entity_id)].append(entry.op.value)
        if entry.f != "read" or entry.type != "ok" or rnd.random() < 0.5:
            continue
        records = list(entry.result)
        older = written[(entry.op.namespace, entry.op.entity_id)]
        foreign = [v for (ns, _), values in written.items() if ns != entry.op.namespace
                   for v in values]
        for _ in range(rnd.randint(1, 3)):
            move = rnd.choice(("double", "drop", "swap", "older", "foreign", "ghost"))
            if move == "older" and older:
                records.append(Record(entry.op.entity_id, "drink", rnd.choice(older), 1, 1))
            elif move == "foreign" and foreign:
                records.append(Record(entry.op.entity_id, "drink", rnd.choice(foreign), 1, 1))
            elif move == "ghost" or not records:
                records.append(Record(entry.op.entity_id, "drink", f"ghost {i}", 10**6, 1))
            elif move == "double":
                records.append(rnd.choice(records))
            elif move == "drop":
                records.pop(rnd.randrange(len(records)))
            else:
                rnd.shuffle(records)
        entries[i] = replace(entry, result=tuple(records))
    return History(entries)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), steps=st.integers(20, 150), workers=st.integers(1, 4),
       namespaces=st.integers(1, 2))
def test_every_checker_rate_is_failed_checks_over_checked_at_most_1(seed, steps, workers,
                                                                    namespaces):
    """However a history breaks the invariants, each rate is one count over the other,
    "checked" is its denominator, and the suite's live terms are the result's."""
    history = _broken(correct_run(seed, steps=steps, workers=workers, namespaces=namespaces,
                                  faults=True), random.Random(seed))
    suite = CheckerSuite()
    suite.observe_all(history)
    live = suite.rate_terms()
    for name, r in suite.results().items():
        assert r.checked == r.rate_denominator, name
        assert 0 <= r.rate_numerator <= min(r.rate_denominator, r.violation_count), name
        assert (r.violation_count > 0) == (r.rate_numerator > 0), name
        assert live[name] == (r.rate_numerator, r.rate_denominator), name
        assert r.rate == (r.rate_numerator / r.rate_denominator if r.rate_denominator else 0)


def test_a_crashed_checker_keeps_its_rate_terms():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea", ("ghost", 2))
    suite = CheckerSuite()

    def boom() -> None:
        raise RuntimeError("boom")

    suite.observe_all(h.history())
    suite.checkers["phantom"].result = boom  # type: ignore[method-assign]
    phantom = suite.results()["phantom"]
    assert (phantom.checked, phantom.rate_numerator, phantom.rate_denominator, phantom.rate) == (
        2, 1, 2, 0.5)
