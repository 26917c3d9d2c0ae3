"""Skipping an invariant on request: still checked and shown, never part of the verdict,
and never hiding a failure of another invariant."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from chaos.certify import CertifyOptions, certify, replay
from chaos.cli import main
from chaos.cli_parser import UsageError, build_parser, skip_names
from chaos.report import INVARIANTS, SKIP_NOTE, render_table
from invariants.errors import InvalidArgument

LEAKY = "chaos.examples:leaky_namespaces"
"""Breaks isolation and nothing else (chaos.examples.KNOWN_BAD)."""


def options(tmp_path: Path, **overrides) -> CertifyOptions:
    return CertifyOptions(**{"budget_s": 60.0, "seed": 20261130, "out": tmp_path / "out",
                             "stateful_share": 0.0, "suite": "quick", **overrides})


@pytest.mark.slow
def test_a_skipped_invariant_is_checked_and_shown_but_left_out_of_the_verdict(tmp_path):
    report = certify(LEAKY, options(tmp_path, skip=("isolation",)))
    isolation = report.invariants["isolation"]
    assert report.checks["isolation"].violation_count > 0
    assert isolation.verdict == "skipped"
    assert isolation.violations == report.checks["isolation"].violation_count
    assert isolation.examples and isolation.examples[0].startswith("W op ")
    assert isolation.causes == {"leak": isolation.violations}
    assert isolation.notes[-1] == SKIP_NOTE
    assert {n: v.verdict for n, v in report.invariants.items() if n != "isolation"} == \
        dict.fromkeys([n for n in INVARIANTS if n != "isolation"], "pass")
    assert report.verdict == "certified" and report.exit_code == 0

    out = tmp_path / "out"
    saved = json.loads((out / "results.json").read_text())
    assert saved["verdict"] == "certified" and saved["skip"] == ["isolation"]
    assert saved["invariants"]["isolation"]["verdict"] == "skipped"
    assert saved["reproduce"].endswith("--stateful-share 0 --skip isolation")
    case = next(c for c in ElementTree.parse(out / "junit.xml").getroot().iter("testcase")
                if c.get("name") == "isolation")
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("message") == (
        f"isolation skipped on request; {isolation.violations} violation(s) found, not judged")

    table = render_table(report)
    assert table.endswith("verdict: CERTIFIED (isolation skipped on request)")
    assert (f"isolation: skipped at your request (--skip): {isolation.violations:,} "
            "violation(s) found, not judged") in table
    assert "\nisolation: leak, e.g. " in table

    again = replay(out)
    assert again.skip == ("isolation",)
    assert {n: v.verdict for n, v in again.invariants.items()} == \
        {n: v.verdict for n, v in report.invariants.items()}


@pytest.mark.slow
def test_skipping_one_invariant_never_hides_another_failing(tmp_path):
    report = certify(LEAKY, options(tmp_path, skip=("semantic_normalization",)))
    assert report.invariants["semantic_normalization"].verdict == "skipped"
    assert report.invariants["isolation"].verdict == "fail"
    assert report.verdict == "failed" and report.exit_code == 1


def test_skip_is_kept_in_results_json_order_whatever_order_it_came_in():
    assert CertifyOptions(skip=["isolation", "uniqueness", "isolation"]).skip == (
        "uniqueness", "isolation")


@pytest.mark.parametrize(("skip", "message"), [
    (("no_such",), "skip names 'no_such', which is not an invariant; use some of "
                   "uniqueness, causal_monotonicity, deletion_monotonicity, "
                   "semantic_normalization, durability, isolation."),
    (tuple(INVARIANTS), "skip names every invariant, which leaves nothing to certify; skip "
                        "at most five."),
    ("isolation", "skip='isolation' must be a list of invariant names, e.g. "
                  "['semantic_normalization']."),
])
def test_a_bad_skip_is_refused_before_anything_runs(tmp_path, skip, message):
    with pytest.raises(InvalidArgument) as refused:
        CertifyOptions(skip=skip, out=tmp_path / "out")
    assert str(refused.value) == message
    assert not (tmp_path / "out").exists()


def test_the_command_line_takes_skip_repeated_and_replaces_the_environment(monkeypatch):
    monkeypatch.setenv("MEMCERT_SKIP", "durability, isolation")
    parser = build_parser()
    assert skip_names(parser.parse_args(["certify"])) == ("durability", "isolation")
    given = parser.parse_args(["certify", "--skip", "uniqueness", "--skip", "isolation"])
    assert skip_names(given) == ("uniqueness", "isolation")
    assert skip_names(parser.parse_args(["nightly", "--skip", "uniqueness"])) == ("uniqueness",)


def test_an_unknown_name_on_the_command_line_or_in_the_environment_exits_2(
        tmp_path, monkeypatch, capsys):
    assert main(["certify", "--skip", "isolaton", "--out", str(tmp_path / "a")]) == 2
    assert "argument --skip: invalid choice: 'isolaton'" in capsys.readouterr().err
    monkeypatch.setenv("MEMCERT_SKIP", "isolaton")
    with pytest.raises(UsageError) as refused:
        skip_names(build_parser().parse_args(["certify"]))
    assert str(refused.value) == (
        "memcert: MEMCERT_SKIP names 'isolaton', which is not an invariant; use some of "
        "uniqueness, causal_monotonicity, deletion_monotonicity, semantic_normalization, "
        "durability, isolation")
    assert main(["certify", "--out", str(tmp_path / "b")]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
