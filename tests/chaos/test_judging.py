"""The one streaming pass that judges a saved history gives what reading it whole gives.

certify, replay, chaos, nightly and load judge through ``chaos.judging.judge_file``:
the checkers, coverage, the backend's errors and the counts, from one pass over the file.
Here it is held to the whole-history path (read the file whole, then check, measure and
count it) on real runs of backends that break different invariants.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos import judging
from chaos.certify import CertifyOptions, certify, replay
from chaos.coverage import backend_errors, measure
from chaos.judging import judge_file
from chaos.report import INVARIANTS
from invariants.checkers import check_history
from invariants.history import find_history, read_history


@pytest.mark.parametrize("backend", [
    "chaos.examples:drops_writes",
    "chaos.examples:leaky_namespaces",
    "chaos.examples:expiring_tombstone",
])
@pytest.mark.parametrize("compress", [False, True])
def test_judging_a_file_streamed_equals_judging_it_read_whole(tmp_path: Path, backend: str,
                                                              compress: bool) -> None:
    out = tmp_path / "out"
    certify(backend, CertifyOptions(budget_s=4.0, seed=20261202, out=out, stateful_share=0.0,
                                    compress=compress))
    path = find_history(out)
    assert path is not None and path.name.endswith(".zst") == compress
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    nemesis = [e for s in saved["scenarios"] for e in s.get("nemesis", ())]
    level = saved["level"]

    judged = judge_file(path, level=level, nemesis=nemesis)

    history = read_history(path)
    assert judged.checks == check_history(history, level=level)
    assert judged.coverage == measure(history, nemesis)
    assert judged.errors == backend_errors(history)
    assert judged.entries == len(history)
    assert judged.invocations == sum(1 for e in history if e.type == "invoke")
    assert any(r.violation_count for r in judged.checks.values())
    # And the report certify wrote from its own judgement says the same.
    assert {inv: sum(judged.checks[c].violation_count for c in checkers)
            for inv, checkers in INVARIANTS.items()} == {
        inv: saved["invariants"][inv]["violations"] for inv in INVARIANTS}


def test_a_long_judgement_reports_its_progress(tmp_path: Path, monkeypatch) -> None:
    # Progress every 500 entries, so that one plan of 8 x 200 steps, run whole well within
    # the budget however loaded the machine, reports several times.
    monkeypatch.setattr(judging, "PROGRESS_EVERY", 500)
    suite = tmp_path / "long.toml"
    suite.write_text('description = "One long plan."\nbudget_s = 120\n\n'
                     '[[scenarios]]\nname = "concurrent_writes"\nshare = 1.0\nscale = 1\n')
    out = tmp_path / "out"
    report = certify("chaos.examples:drops_writes",
                     CertifyOptions(budget_s=120.0, seed=7, out=out, stateful_share=0.0,
                                    processes=0, suite=str(suite)))
    assert not report.scenarios[0].budget_exhausted
    path = find_history(out)
    assert path is not None
    seen: list[int] = []
    judged = judge_file(path, level="lexical", progress=seen.append)
    assert judged.entries > 2 * 500
    assert seen == list(range(500, judged.entries + 1, 500))

    told: list[tuple[int, int]] = []
    replay(out, progress=lambda done, total: told.append((done, total)))
    assert told == [(n, judged.entries) for n in seen]


def test_what_was_lost_before_the_file_goes_into_every_result(tmp_path: Path) -> None:
    out = tmp_path / "out"
    certify("reference_store:factory",
            CertifyOptions(budget_s=3.0, seed=7, out=out, stateful_share=0.0))
    path = find_history(out)
    assert path is not None
    lost = "workers/worker-2.jsonl: the last line is cut short"
    judged = judge_file(path, level="lexical", defects=[lost])
    plain = judge_file(path, level="lexical")
    for name, check in judged.checks.items():
        assert check.notes == (*plain.checks[name].notes, lost)
        assert check.validity == plain.checks[name].validity
