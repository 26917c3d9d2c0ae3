"""Running checkers together: three-valued verdicts, crashes, online equals offline."""

from __future__ import annotations

import json

import pytest

from invariants.backend import Ack, Record, Write
from invariants.checkers import (
    ALL_CHECKERS,
    CHECKER_NAMES,
    CheckerSuite,
    Phantom,
    Trace,
    Uniqueness,
    check_history,
)
from invariants.errors import InvalidArgument
from invariants.history import History, HistoryError, HistoryRecorder, Read, WriteMeta, read_history
from invariants.verdict import Validity
from tests.invariants.histbuild import HistoryBuilder

V, X, U = Validity.VALID, Validity.INVALID, Validity.UNKNOWN


@pytest.mark.parametrize(
    ("validities", "combined"),
    [
        ([], U),
        ([V], V),
        ([V, V], V),
        ([V, U], U),
        ([U, V, U], U),
        ([V, X], X),
        ([U, X, V], X),
        ([X], X),
    ],
)
def test_validity_combines_invalid_over_unknown_over_valid(validities, combined):
    assert Validity.combine(validities) is combined


def test_checker_names_are_the_invariant_names():
    assert CHECKER_NAMES == (
        "uniqueness",
        "causal_monotonicity",
        "deletion_monotonicity",
        "semantic_normalization",
        "durability",
        "isolation",
        "phantom",
    )
    assert [c.kind for c in ALL_CHECKERS] == [
        "conflict",
        "reorder",
        "resurrection",
        "duplicate",
        "lost",
        "leak",
        "phantom",
    ]


def test_an_empty_history_is_unknown_everywhere_never_valid():
    results = check_history(History([]))
    assert list(results) == list(CHECKER_NAMES)
    assert {r.validity for r in results.values()} == {U}
    assert all(r.notes[0].startswith("nothing to check: ") for r in results.values())


def test_a_crashing_checker_is_unknown_with_the_error_and_the_others_go_on():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok(("ghost", 2))
    suite = CheckerSuite()

    def boom(view):
        raise RuntimeError("boom")

    suite.checkers["uniqueness"]._on_read = boom
    suite.observe_all(h.history())
    results = suite.results()
    assert results["uniqueness"].validity is U
    assert results["uniqueness"].notes[-1] == "checker crashed at entry 3: RuntimeError: boom"
    assert results["phantom"].validity is X
    assert suite.validity() is X


def test_online_counts_and_verdicts_equal_the_recheck_of_the_saved_history(tmp_path):
    suite = CheckerSuite()
    counts: list[int] = []
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path, observers=[suite.observe]) as recorder:
        w = recorder.invoke(
            0, Write("ns", "u1", "drink", "tea", 1, "o1"), meta=WriteMeta("t", "drink")
        )
        recorder.ok(w, Ack(applied=True))
        r = recorder.invoke(1, Read("ns", "u1"))
        counts.append(suite.violation_count)
        recorder.ok(r, [Record("u1", "drink", "tea", 1, 1), Record("u1", "drink", "x", 2, 1)])
        counts.append(suite.violation_count)
    assert counts == [0, 1]
    assert suite.violation_counts()["phantom"] == 1
    assert check_history(read_history(path)) == suite.results()


def test_a_standalone_checker_is_the_same_object_the_suite_runs():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok(("ghost", 2))
    checker = Phantom()
    for entry in h.history():
        checker.observe(entry)
    assert checker.violation_count == 1
    assert checker.result() == check_history(h.history(), names=["phantom"])["phantom"]


def test_entries_out_of_order_are_refused():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    checker = Phantom()
    with pytest.raises(HistoryError) as err:
        checker.observe(h.entries[1])
    assert str(err.value) == (
        "entry 1 fed to a checker after entry -1. Feed entries in index order, each once; "
        "checkers sharing a Trace must all get one entry before any of them gets the next."
    )


def test_checkers_sharing_a_trace_must_be_fed_in_lockstep():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    trace = Trace()
    first, second = Phantom(trace=trace), Uniqueness(trace=trace)
    for entry in h.entries:
        first.observe(entry)
    with pytest.raises(HistoryError, match="entry 0 fed to a checker after entry 1"):
        second.observe(h.entries[0])


def test_operations_left_in_flight_are_noted():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    h.write(0, "u1", "drink", "coffee", 2)
    result = check_history(h.history(allow_incomplete=True), names=["phantom"])["phantom"]
    assert result.notes == (
        "1 operation(s) had not completed; they count as possibly applied at any time",
    )


def test_defects_of_a_damaged_file_reach_every_result(tmp_path):
    path = tmp_path / "history.jsonl"
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    h.history().write_jsonl(path)
    with open(path, "a", encoding="utf-8") as out:
        out.write('{"index": 4')
    results = check_history(read_history(path, allow_incomplete=True))
    assert all(
        r.notes[-1].startswith("line 5: the last line is cut short") for r in results.values()
    )


def test_results_serialise_to_json_with_rendered_explanations():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.read(1, "u1").ok("tea")
    data = json.loads(json.dumps({k: r.to_dict() for k, r in check_history(h.history()).items()}))
    resurrection = data["deletion_monotonicity"]
    assert resurrection["validity"] == "invalid"
    assert resurrection["groups"][0]["count"] == 1
    [violation] = resurrection["violations"]
    assert violation["explanation"]["cause"] == "no_restore"
    assert violation["text"].splitlines()[:5] == [
        "W op 0: write ns/u1 'drink' = \"tea\" causal_seq 1 op_id w0",
        "   -> Ack(applied=True, version=1)  t=0.000..0.000 s",
        "D op 2: delete ns/u1 causal_seq 2 op_id d2",
        "   -> Ack(applied=True, version=1)  t=0.000..0.000 s",
        "R op 4: read ns/u1 -> 1 record  t=0.000..0.000 s",
    ]
    assert "memcert's reading (ground truth): Let D = op 2, a delete of u1" in violation["text"]
    assert (violation["cause"], violation["detail"]) == (
        "delete_ignored",
        "op 0 acknowledged before the delete, still served",
    )


def test_kept_violations_are_bounded_but_counted_with_first_worst_and_last():
    h = HistoryBuilder()
    for k in range(5):
        h.write(0, "u1", "drink", f"a{k}", 10 * k).ok()
        h.write(0, "u1", "drink", f"b{k}", 10 * k + 1 + k).ok()
        h.read(1, "u1").ok((f"b{k}", 10 * k + 1 + k), (f"a{k}", 10 * k))
    result = check_history(h.history(), names=["causal_monotonicity"], keep=2)[
        "causal_monotonicity"
    ]
    assert result.violation_count == 5
    assert [v.witnesses for v in result.violations] == [(4,), (10,)]
    [group] = result.groups
    assert (group.count, group.first.witnesses, group.worst.witnesses, group.last.witnesses) == (
        5,
        (4,),
        (28,),
        (28,),
    )
    assert group.worst.magnitude == 5


def test_unknown_checker_names_are_refused():
    with pytest.raises(InvalidArgument) as err:
        CheckerSuite(names=["uniquness"])
    assert str(err.value) == (
        "names contains 'uniquness', which is not a checker; use some of uniqueness, "
        "causal_monotonicity, deletion_monotonicity, semantic_normalization, durability, "
        "isolation, phantom"
    )


def test_a_crash_of_the_shared_trace_makes_every_checker_unknown():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    suite = CheckerSuite(names=["phantom", "durability"])

    def boom(entry, invoke):
        raise KeyError("lost track")

    suite._trace._read = boom
    suite.observe_all(h.history())
    results = suite.results()
    assert {r.validity for r in results.values()} == {U}
    assert results["phantom"].notes[-1] == (
        "the trace shared by the checkers crashed at entry 3: KeyError: 'lost track'"
    )


def test_an_entry_fed_twice_to_a_checker_is_refused_not_counted_twice():
    h = HistoryBuilder()
    h.read(1, "u1").ok(("ghost", 2))
    checker = Phantom()
    for entry in h.entries:
        checker.observe(entry)
    with pytest.raises(HistoryError) as err:
        checker.observe(h.entries[1])
    assert str(err.value) == (
        "entry 1 fed to the phantom checker twice. Feed each entry to each checker once, "
        "in index order."
    )
    assert checker.violation_count == 1


def test_keep_must_be_a_count():
    with pytest.raises(InvalidArgument) as err:
        Phantom(keep=-1)
    assert str(err.value) == "keep=-1 (type int) is not a count; pass an int >= 0"
