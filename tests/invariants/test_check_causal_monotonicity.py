"""causal_monotonicity: no older write replaces a newer one; reads list records in
ascending causal_seq (violation: reorder)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_records_out_of_causal_order_are_a_reorder():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 2).ok()
    h.read(1, "u1").ok("rice", "tea")
    result = check(h, "causal_monotonicity")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses, v.magnitude) == ("reorder", Key("ns", "u1"), (4,), 1)
    assert texts(result) == [
        "Let R = op 4, a read of u1 in namespace ns, completed at index 5. Then R returned "
        '"rice" (causal_seq 2) at position 0 and "tea" (causal_seq 1) at position 1, but a '
        "read lists records in ascending causal_seq, a contradiction."
    ]


def test_ascending_or_equal_causal_seq_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 1).ok()
    h.write(0, "u1", "city", "Paris", 2).ok()
    h.read(1, "u1").ok("tea", "rice", "Paris")
    result = check(h, "causal_monotonicity")
    assert result.validity is Validity.VALID
    assert result.coverage == {
        "order_checks": 1,
        "staleness_checks": 3,
        "reads_skipped_uncertain_delete": 0,
    }


def test_serving_a_fact_older_than_an_acknowledged_write_is_a_reorder():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "drink", "coffee", 5).ok()
    h.read(1, "u1").ok(("tea", 5))
    result = check(h, "causal_monotonicity")
    [v] = result.violations
    assert (v.witnesses, v.key, v.magnitude) == ((0, 2, 4), Key("ns", "u1", "drink"), 4)
    assert texts(result) == [
        'Let W1 = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 1) to u1 in '
        'namespace ns, acknowledged at index 1, and W2 = op 2, a write of "coffee" (fact '
        "drink=coffee, slot drink, causal_seq 5) to u1 in namespace ns, acknowledged at index "
        "3. Then read op 4 of u1 in namespace ns, invoked after W2 was acknowledged, with no "
        'delete of u1 that could have intervened, returned "tea", a value of fact drink=tea, '
        "for slot drink, but W2's causal_seq 5 is above W1's 1, the highest of any write of "
        "fact drink=tea, so W2 must have replaced it, a contradiction."
    ]


def test_serving_the_newest_fact_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "drink", "coffee", 5).ok()
    h.read(1, "u1").ok("coffee")
    assert check(h, "causal_monotonicity").validity is Validity.VALID


def test_a_late_write_with_a_lower_seq_must_not_win():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "coffee", 5).ok()
    h.write(0, "u1", "drink", "tea", 3).ok()  # acknowledged, yet older
    h.read(1, "u1").ok("tea")
    assert [v.witnesses for v in check(h, "causal_monotonicity").violations] == [(0, 2, 4)]


def test_a_merged_paraphrase_may_keep_older_wording_with_a_newer_seq():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, fact="tea").ok()
    h.write(0, "u1", "drink", "hates tea", 2, fact="no-tea").ok()
    h.write(0, "u1", "drink", "enjoys tea", 3, fact="tea", paraphrase="lexical").ok()
    h.read(1, "u1").ok(("likes tea", 3))
    assert check(h, "causal_monotonicity").validity is Validity.VALID


def test_overlapping_writes_resolve_by_causal_seq_in_either_order():
    h = HistoryBuilder()
    low = h.write(0, "u1", "drink", "tea", 1)
    high = h.write(1, "u1", "drink", "coffee", 2)
    h.read(2, "u1").ok("tea")  # concurrent with both: either is fine
    high.ok()
    low.ok()
    h.read(2, "u1").ok("coffee")
    assert check(h, "causal_monotonicity").validity is Validity.VALID
    h.read(2, "u1").ok("tea")
    assert [v.witnesses for v in check(h, "causal_monotonicity").violations] == [(0, 1, 8)]


def test_a_read_concurrent_with_the_newer_write_may_serve_the_older_fact():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    r = h.read(1, "u1")
    h.write(0, "u1", "drink", "coffee", 5).ok()
    r.ok("tea")
    assert check(h, "causal_monotonicity").validity is Validity.VALID


def test_an_info_write_may_be_the_one_served():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "drink", "coffee", 5).info()
    h.read(1, "u1").ok("coffee")
    h.read(1, "u1").ok("tea")
    assert check(h, "causal_monotonicity").validity is Validity.VALID


def test_a_delete_of_unknown_outcome_makes_an_old_fact_explainable():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "coffee", 5).ok()
    h.delete(0, "u1", 6).info()
    h.restore(0, "u1", 7).ok()
    h.write(0, "u1", "drink", "tea", 8).ok()
    h.write(0, "u1", "drink", "water", 9).ok()
    h.read(1, "u1").ok("tea")  # would be stale, but the info delete may have struck late
    result = check(h, "causal_monotonicity")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == (
        "1 read(s) not checked for stale facts: a delete of unknown outcome could have "
        "wiped the entity at any time",
        "nothing to check: no read returned 2 or more records, and no read served a slot "
        "after an acknowledged write to it",
    )


def test_an_acknowledged_delete_after_the_newer_write_makes_it_unknowable():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "coffee", 5).ok()
    h.delete(0, "u1", 6).ok()
    h.restore(0, "u1", 7).ok()
    h.write(0, "u1", "drink", "tea", 2).info()
    h.read(1, "u1").ok("tea")
    assert check(h, "causal_monotonicity").violation_count == 0
