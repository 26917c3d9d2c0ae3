"""What `memcert certify` prints for a failing backend: short, grouped, one example per cause.

One real run of the naive dict store of docs/make-your-store-pass.md (last writer wins,
attribute names verbatim, no tombstones), whose four bugs must come out as four causes,
each with one example and one fix, within 100 terminal columns; `-v` adds the other
examples and each rate's terms.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.report import SHRINK_AGAIN, SHRINK_SHORT, build_report, render_table
from invariants.causes import FIXES
from invariants.display import columns

NAIVE = "chaos.examples.naive_dict:naive_dict"
CAUSES = {"uniqueness": "alias", "causal_monotonicity": "stale_overwrite",
          "deletion_monotonicity": "no_tombstone", "semantic_normalization": "duplicate"}
SIZE_LIMIT = 3 * 1024
"""Bytes of the default output: issue 18's target, under 3 KB (KiB) with the four causes
named. What it takes over several runs (the examples chosen, and their values, differ
from run to run, from about 2.8 to 3.0 thousand bytes) is recorded in
docs/performance.md."""


def certify(out: Path, *extra: str) -> tuple[str, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "certify", NAIVE, "--seed", "1", "--budget", "30",
         "--stateful-share", "0", "--quiet", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    return done.stdout, json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict]]:
    base = tmp_path_factory.mktemp("naive")
    return {"default": certify(base / "default"), "verbose": certify(base / "verbose", "-v")}


@pytest.mark.slow
def test_the_naive_store_fails_four_invariants_with_four_causes_each_shown_once(runs):
    out, results = runs["default"]
    failed = {n: v for n, v in results["invariants"].items() if v["verdict"] == "fail"}
    assert set(failed) == set(CAUSES)
    for name, cause in CAUSES.items():
        causes = failed[name]["causes"]
        assert {c for c, n in causes.items() if n} == {cause}, (name, causes)
        assert sum(causes.values()) == failed[name]["violations"]
        row = next(line for line in out.splitlines() if line.startswith(f"{name} "))
        assert f"({cause} {causes[cause]:,}" in row
        assert out.count(f"\n{name}: {cause}, e.g. ") == 1
        assert out.count(f"  {cause}: {FIXES[cause]}") == 1
    assert out.index("how to fix (") > max(
        out.index(f"\n{name}: {cause}, e.g. ") for name, cause in CAUSES.items())


@pytest.mark.slow
def test_the_default_output_is_short_narrow_and_ends_with_how_to_reproduce(runs):
    out, _ = runs["default"]
    assert len(out.encode()) < SIZE_LIMIT, len(out.encode())
    assert max(columns(line) for line in out.splitlines()) <= 100
    lines = out.rstrip("\n").splitlines()
    assert lines[-1].startswith("output: file://")
    assert any(line.startswith("reproduce: memcert certify " + NAIVE) for line in lines)
    assert "memcert's reading" not in out
    assert out.count("truth: ") == len(CAUSES)


@pytest.mark.slow
def test_verbose_adds_the_other_examples_each_set_of_operations_once(runs):
    out, _ = runs["default"]
    more, _ = runs["verbose"]
    promised = next(line for line in out.splitlines() if line.startswith("-v shows "))
    assert int(promised.split()[2].replace(",", "")) > 0
    assert more.count("\n  also (") > 0
    assert "memcert's reading" not in more
    assert max(columns(line) for line in more.splitlines()) <= 100
    examples = [block for block in more.split("\n  also (")[1:]]
    assert len(examples) == len(set(examples))


@pytest.mark.slow
def test_the_rates_definition_shows_by_default_and_its_terms_under_verbose(runs):
    out, _ = runs["default"]
    more, results = runs["verbose"]
    header = next(line for line in out.splitlines() if line.startswith("invariant "))
    assert header.split()[2:] == ["violations", "failed", "checked", "rate", "=", "failed", "/",
                                  "checked"]
    assert "rates, each in its invariant's own unit:" not in out
    assert "each rate's terms" in out
    assert "rates, each in its invariant's own unit:" in more
    for name in CAUSES:
        v = results["invariants"][name]
        assert f"  {name} = {v['rate_numerator']:,} " in more


@pytest.mark.slow
def test_the_scenarios_not_run_are_counted_by_default_and_explained_under_verbose(runs):
    out, results = runs["default"]
    more, _ = runs["verbose"]
    unrun = [s["name"] for s in results["scenarios"] if s["not_run"]]
    assert unrun
    assert f"why {len(unrun)} scenarios did not run" in out
    assert " not run: " not in out
    assert all(f"{name}" in more for name in unrun) and " not run: " in more


def test_a_shrinking_note_is_shown_short_once_then_pointed_to_and_in_full_under_verbose():
    """The stateful phase stops shrinking every failure at the same limit: the note sits
    under each invariant it concerns, short the first time, shorter after; -v shows it in
    full under each."""
    note = ("memcert: stopped shrinking this failure after the 6 s the stateful phase could "
            "give it; the program shown is the shortest found by then")
    failures = [{"checkers": [checker], "steps": 3, "notes": [note],
                 "explanations": [f"{checker}: Let W1 = op 0 ..."]}
                for checker in ("uniqueness", "isolation")]
    report = build_report(
        backend="b", seed=1, level="lexical", checks={}, coverage={}, scenarios=[],
        restore_supported=True, history_entries=0, elapsed_s=0.0, command="memcert certify b",
        stateful={"failures": failures, "saved": {}, "undecided": {}})
    table = render_table(report)
    assert "memcert: stopped shrinking" not in table
    first, second = table.index("uniqueness: fail"), table.index("isolation: fail")
    assert first < table.index(f"  note: {SHRINK_SHORT}\n") < second
    assert table.index(f"  note: {SHRINK_AGAIN}\n") > second
    assert render_table(report, verbose=True).count("memcert: stopped shrinking") == 2


def _two_failures(found_by_stateful: tuple[str, ...]) -> str:
    """The table of a run whose chaos phase broke uniqueness (two spellings) and causal
    monotonicity (a stale overwrite), and whose stateful phase broke ``found_by_stateful``."""
    from invariants.checkers import CHECKER_NAMES
    from tests.invariants.histbuild import HistoryBuilder, check

    h = HistoryBuilder()
    h.write(0, "u1", "city", "lives in Paris", 1, attribute="city").ok()
    h.write(0, "u1", "city", "lives in Rome", 2, attribute="City").ok()
    h.write(0, "u1", "job", "works as a baker", 4).ok()
    h.write(0, "u1", "job", "works as a cook", 3).ok()
    h.read(1, "u1").ok("lives in Paris", "lives in Rome", "works as a cook")
    checks = {name: check(h, name) for name in CHECKER_NAMES}
    failures = [{"checkers": [name], "steps": 3, "explanations": [f"{name}: Let A = op 0 ..."]}
                for name in found_by_stateful]
    report = build_report(
        backend="b", seed=1, level="lexical", checks=checks, coverage={}, scenarios=[],
        restore_supported=True, history_entries=len(h.entries), elapsed_s=0.0,
        command="memcert certify b",
        stateful={"failures": failures, "undecided": {},
                  "saved": {name: f"out/stateful/{name}.py" for name in found_by_stateful}})
    return render_table(report)


def test_failures_found_by_the_same_phases_say_so_once():
    table = _two_failures(("uniqueness", "causal_monotonicity"))
    assert table.count("each failure was found by chaos and stateful\n") == 1
    assert "uniqueness: fail" not in table and "causal_monotonicity: fail" not in table
    assert "shortest programs: stateful/<invariant>.py, each runs on its own" in table


def test_failures_found_by_different_phases_name_them_each():
    table = _two_failures(("uniqueness",))
    assert "each failure was found by" not in table
    assert "uniqueness: fail (found by chaos, stateful)" in table
    assert "shortest programs, each runs on its own: stateful/uniqueness.py" in table
