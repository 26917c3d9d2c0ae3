"""Root causes: each cause of invariants.causes, from the smallest history that shows it.

Every test builds a history by hand, runs the one checker, and asserts the cause of the
violation and the per-cause counts of the result, so a change of rule that mislabels
a bug fails here first.
"""

from __future__ import annotations

import pytest

from invariants.backend import Ack, Record
from invariants.causes import CAUSES, FIXES, alteration, spelling_difference
from invariants.verdict import CheckResult
from tests.invariants.histbuild import HistoryBuilder, check


def only(result: CheckResult) -> tuple[str, str]:
    causes = {v.cause for v in result.violations}
    assert len(causes) == 1, causes
    v = result.violations[0]
    assert result.causes[v.cause] == result.violation_count
    return v.cause, v.detail


def test_every_cause_has_a_fix_and_every_checker_lists_its_causes():
    listed = [c for causes in CAUSES.values() for c in causes]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(FIXES)
    assert all(FIXES[c].strip() for c in listed)


def test_two_spellings_kept_as_two_keys_is_an_alias():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, attribute="drink").ok()
    h.write(0, "u1", "drink", "hates tea", 2, attribute="Drink").ok()
    h.read(1, "u1").ok("likes tea", "hates tea")
    result = check(h, "uniqueness")
    cause, detail = only(result)
    assert cause == "alias"
    assert detail == "case: 'drink' vs 'Drink'"
    assert result.causes == {"race": 0, "alias": 1, "not_replaced": 0}
    [v] = result.violations
    assert [r.attribute for r in v.explanation.records] == ["drink", "Drink"]
    assert [w.attribute for w in v.explanation.writes] == ["drink", "Drink"]


def test_one_spelling_and_overlapping_writes_is_a_race():
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes tea", 1)
    b = h.write(1, "u1", "drink", "hates tea", 2)
    a.ok()
    b.ok()
    h.read(2, "u1").ok("likes tea", "hates tea")
    cause, detail = only(check(h, "uniqueness"))
    assert cause == "race"
    assert "'drink'" in detail


def test_one_spelling_and_writes_one_after_another_is_not_replaced():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    h.write(0, "u1", "drink", "hates tea", 2).ok()
    h.read(1, "u1").ok("likes tea", "hates tea")
    assert only(check(h, "uniqueness"))[0] == "not_replaced"


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("coffee_preference", "Coffee_preference", "case"),
        ("coffee_preference", "ｃｏｆｆｅｅ_preference", "width"),
        ("coffee_preference", "coffee preference", "separators"),
        ("coffee_preference", "favourite_drink", "synonym"),
    ],
)
def test_spellings_differ_by_what_a_fold_would_remove(a, b, kind):
    assert spelling_difference(a, b) == kind


def test_a_lower_causal_seq_served_over_a_higher_one_is_a_stale_overwrite():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "hates tea", 2).ok()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    h.read(1, "u1").ok("likes tea")
    assert only(check(h, "causal_monotonicity"))[0] == "stale_overwrite"


def test_a_newer_fact_merged_into_the_old_record_is_over_merged():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    newer = h.write(0, "u1", "drink", "does not like tea", 2)
    newer._complete("ok", Ack(True, 1, "merged"))
    h.read(1, "u1").ok(("likes tea", 2))
    cause, detail = only(check(h, "causal_monotonicity"))
    assert cause == "over_merged"
    assert '"likes tea"' in detail


def test_records_listed_out_of_causal_order_is_read_order():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 2).ok()
    h.read(1, "u1").ok("rice", "tea")
    assert only(check(h, "causal_monotonicity")) == ("read_order", "seq 2 listed before seq 1")


def test_a_write_after_the_acknowledged_delete_accepted_is_no_tombstone():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.write(0, "u1", "drink", "coffee", 3).ok()
    h.read(1, "u1").ok("coffee")
    assert only(check(h, "deletion_monotonicity"))[0] == "no_tombstone"


def test_a_refusal_then_an_acceptance_after_the_delete_is_a_tombstone_that_expired():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.write(0, "u1", "drink", "milk", 3).fail("tombstoned")
    h.write(0, "u1", "drink", "coffee", 4).ok()
    h.read(1, "u1").ok("coffee")
    cause, detail = only(check(h, "deletion_monotonicity"))
    assert cause == "tombstone_expired"
    assert "tombstoned" in detail


def test_a_write_in_flight_across_the_delete_is_an_in_flight_write():
    h = HistoryBuilder()
    h.delete(0, "u0", 1).ok()
    h.write(0, "u0", "drink", "milk", 2).fail("tombstoned")
    w = h.write(0, "u1", "drink", "tea", 1)
    d = h.delete(1, "u1", 2)
    d.ok()
    w.ok()
    h.read(2, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "in_flight_write"


def test_a_write_in_flight_across_the_delete_of_a_store_that_never_refuses_is_no_tombstone():
    h = HistoryBuilder()
    w = h.write(0, "u1", "drink", "tea", 1)
    d = h.delete(1, "u1", 2)
    d.ok()
    w.ok()
    h.read(2, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity")) == (
        "no_tombstone",
        "op 0 landed after the delete; no write was ever refused",
    )


def test_a_write_of_unknown_outcome_from_before_the_delete_is_not_delete_ignored():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).info()
    h.delete(0, "u1", 2).ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "no_tombstone"


def test_a_value_written_before_and_after_the_delete_is_told_as_the_store_kept_it():
    """The naive store of the tutorial: the same value under two spellings, one write
    before the delete and a late one after it; a restore still in flight makes the read
    one that a restore may follow, and both writes are below the delete's seq. The
    record carries the later write's spelling, so the store accepted a write after the
    delete (no_tombstone); it did not ignore the delete (delete_ignored)."""
    h = HistoryBuilder()
    h.write(0, "u1", "job", "works as doctor", 1, attribute="job").ok()
    h.delete(0, "u1", 5).ok()
    h.write(0, "u1", "job", "works as doctor", 1, attribute="JOB").ok()
    restore = h.restore(1, "u1", 6)  # in flight while the read runs
    h.read(2, "u1").ok(Record("u1", "JOB", "works as doctor", 1, 2))
    restore.fail("unsupported")
    cause, detail = only(check(h, "deletion_monotonicity"))
    assert cause == "no_tombstone", detail
    assert detail.startswith("op 4 "), detail


def test_a_record_from_before_the_delete_still_served_is_delete_ignored():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "delete_ignored"


def test_a_restore_that_brings_back_old_records_is_restore_revived():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 3).ok()
    h.delete(0, "u1", 2).ok()
    h.restore(0, "u1", 4).ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "restore_revived"


def test_a_stale_write_accepted_after_a_restore_is_stale_after_restore():
    h = HistoryBuilder()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).ok()
    h.write(0, "u1", "drink", "tea", 3).ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "stale_after_restore"


def test_a_write_overwritten_by_a_concurrent_write_of_another_attribute_is_a_lost_update():
    h = HistoryBuilder()
    other = h.write(1, "u1", "food", "rice", 1)
    lost = h.write(0, "u1", "drink", "tea", 2)
    lost.ok()
    other.ok()
    h.read(2, "u1").ok("rice")
    cause, detail = only(check(h, "durability"))
    assert cause == "lost_update"
    assert "'food'" in detail


def test_a_write_no_read_ever_serves_is_never_visible():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok()
    h.read(1, "u1").ok()
    result = check(h, "durability")
    assert only(result)[0] == "never_visible"
    assert result.causes == {"lost_update": 0, "never_visible": 2, "visible_late": 0}


def test_a_write_a_later_read_serves_is_visible_late():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok()
    h.read(1, "u1").ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "durability")
    cause, detail = only(result)
    assert cause == "visible_late"
    assert detail == "read op 6 served it later"
    assert result.causes == {"lost_update": 0, "never_visible": 0, "visible_late": 2}
    assert result.groups[0].first.cause == "visible_late"


def test_a_write_served_late_keeps_an_example_after_the_quotas_filled():
    # keep=1: the first lost write fills the only slot, as never_visible; the second is
    # found once the quota is full, and only a later read shows it was visible late.
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok()
    h.write(0, "u2", "food", "rice", 2).ok()
    h.read(1, "u2").ok()
    h.read(1, "u2").ok("rice")
    result = check(h, "durability", keep=1)
    assert result.causes == {"lost_update": 0, "never_visible": 1, "visible_late": 1}
    assert sorted(v.cause for v in result.violations) == ["never_visible", "visible_late"]


def test_a_value_written_only_in_another_namespace_is_a_leak():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1, ns="other").ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "isolation")) == ("leak", "written in namespace 'other'")


def test_a_torn_copy_of_a_written_value_is_an_altered_value():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes green tea", 1).ok()
    h.read(1, "u1").ok("likes green tea", ("likes green tea\ufffd", 1))
    result = check(h, "phantom")
    cause, detail = only(result)
    assert cause == "altered_value"
    assert detail == "re-encoding (U+FFFD added) of op 0's value"
    [v] = result.violations
    assert v.explanation.nearest is not None and v.explanation.nearest.op == 0
    assert v.witnesses == (0, 2)


def test_the_value_of_a_refused_write_served_is_a_non_idempotent_retry():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).fail("duplicate")
    h.read(1, "u1").ok("tea")
    cause, detail = only(check(h, "phantom"))
    assert cause == "non_idempotent_retry"
    assert "applied=False (duplicate)" in detail


def test_a_value_of_another_entity_is_wrong_entity():
    h = HistoryBuilder()
    h.write(0, "u2", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 1).ok()
    h.read(1, "u1").ok("rice", Record("u1", "drink", "tea", 1, 1))
    assert only(check(h, "phantom")) == ("wrong_entity", "written to entity 'u2'")


def test_a_value_near_nothing_written_is_invented():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea", ("a summary of everything", 1))
    assert only(check(h, "phantom"))[0] == "invented"


@pytest.mark.parametrize(
    ("written", "served", "how"),
    [
        ("likes green tea", "likes green", "truncation (11 of 15 characters)"),
        ("likes  green tea", "likes green tea", "whitespace"),
        ("café", "cafe\u0301", "Unicode normalization"),
        ("Likes Tea", "likes tea", "case"),
        ("naïve", "naïve".encode().decode("latin-1"), "re-encoding (UTF-8 read as Latin-1)"),
        ("likes green tea a lot", "likes green tee a lot", "edit"),
        ("likes tea", "owns a boat", ""),
    ],
)
def test_an_alteration_is_named_by_what_changed(written, served, how):
    assert alteration(written, served) == how


def test_one_fact_served_twice_is_a_duplicate_with_its_level():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, fact="tea").ok()
    h.write(0, "u1", "drink", "Likes tea", 2, fact="tea", paraphrase="surface").ok()
    h.read(1, "u1").ok("likes tea", "Likes tea")
    assert only(check(h, "semantic_normalization")) == ("duplicate", "surface paraphrases")


def test_results_json_carries_the_cause_of_each_violation_and_the_counts():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, attribute="drink").ok()
    h.write(0, "u1", "drink", "hates tea", 2, attribute="Drink").ok()
    h.read(1, "u1").ok("likes tea", "hates tea")
    data = check(h, "uniqueness").to_dict()
    assert data["causes"] == {"race": 0, "alias": 1, "not_replaced": 0}
    v = data["violations"][0]
    assert (v["cause"], v["detail"]) == ("alias", "case: 'drink' vs 'Drink'")
    written = v["explanation"]["writes"][1]
    assert (written["attribute"], written["op_id"], written["answer"]["applied"]) == (
        "Drink",
        "w2",
        True,
    )
    assert written["invoked_s"] == pytest.approx(2e-6)
    assert [r["attribute"] for r in v["explanation"]["read"]["records"]] == ["drink", "Drink"]
    assert v["explanation"]["read"]["records"][0]["version"] == 1


def test_old_records_back_after_a_refusal_is_a_tombstone_that_expired():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.write(0, "u1", "food", "rice", 3).fail("tombstoned")
    h.read(1, "u1").ok("tea")
    cause, detail = only(check(h, "deletion_monotonicity"))
    assert cause == "tombstone_expired"
    assert detail == "op 4 was refused (tombstoned), op 0's record back later"


def test_a_leftover_of_an_earlier_race_is_still_a_race():
    # W1 and W2 race and both insert; W3 later replaces W1's record; W2's remains.
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes tea", 1)
    b = h.write(1, "u1", "drink", "hates tea", 2)
    a.ok()
    b.ok()
    h.write(0, "u1", "drink", "likes milk", 3).ok()
    h.read(2, "u1").ok("hates tea", "likes milk")
    result = check(h, "uniqueness")
    assert only(result)[0] == "race"
    [v] = result.violations
    assert [r.op for r in v.explanation.racers] == [0, 1]


def test_once_a_store_keeps_records_without_concurrency_every_conflict_is_not_replaced():
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes tea", 1)
    b = h.write(1, "u1", "drink", "hates tea", 2)
    a.ok()
    b.ok()
    h.read(2, "u1").ok("likes tea", "hates tea")
    h.write(0, "u2", "drink", "likes tea", 1).ok()
    h.write(0, "u2", "drink", "hates tea", 2).ok()
    h.read(2, "u2").ok("likes tea", "hates tea")
    result = check(h, "uniqueness")
    assert result.causes == {"race": 0, "alias": 0, "not_replaced": 2}
    first = result.violations[0]
    assert first.cause == "not_replaced"
    assert first.detail == (
        "read op 10 kept two records of one spelling from writes one after another"
    )


def test_two_spellings_raced_are_a_race_unless_the_store_keeps_spellings_apart_anyway():
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes tea", 1, attribute="drink")
    b = h.write(1, "u1", "drink", "hates tea", 2, attribute="Drink")
    a.ok()
    b.ok()
    h.read(2, "u1").ok("likes tea", "hates tea")
    raced = check(h, "uniqueness")
    assert only(raced) == (
        "race",
        "spellings 'drink' vs 'Drink', these writes in flight together",
    )
    h.write(0, "u2", "drink", "likes tea", 1, attribute="drink").ok()
    h.write(0, "u2", "drink", "hates tea", 2, attribute="Drink").ok()
    h.read(2, "u2").ok("likes tea", "hates tea")
    result = check(h, "uniqueness")
    assert result.causes == {"race": 0, "alias": 2, "not_replaced": 0}
    assert [v.cause for v in result.violations] == ["alias", "alias"]


def test_a_stale_write_after_a_restore_of_unknown_outcome_in_a_store_with_tombstones():
    h = HistoryBuilder()
    h.delete(0, "u1", 5).ok()
    h.write(0, "u1", "drink", "milk", 6).fail("tombstoned")
    h.restore(0, "u1", 7).info()
    h.write(0, "u1", "drink", "tea", 3).ok()
    h.read(1, "u1").ok("tea")
    assert only(check(h, "deletion_monotonicity"))[0] == "stale_after_restore"


def test_two_spellings_from_writes_that_did_not_overlap_are_an_alias_on_a_raced_slot():
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes milk", 1)
    b = h.write(1, "u1", "drink", "likes juice", 2)
    a.ok()
    b.ok()
    h.write(0, "u1", "drink", "likes tea", 3, attribute="drink").ok()
    h.write(0, "u1", "drink", "hates tea", 4, attribute="Drink").ok()
    h.read(2, "u1").ok("likes tea", "hates tea")
    assert only(check(h, "uniqueness"))[0] == "alias"


def test_more_facts_kept_than_races_can_leave_is_not_replaced():
    # One pair raced; three more writes came one after another and all were kept.
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "likes milk", 1)
    b = h.write(1, "u1", "drink", "likes juice", 2)
    a.ok()
    b.ok()
    for seq, value in enumerate(["likes tea", "hates tea", "likes coffee"], start=3):
        h.write(0, "u1", "drink", value, seq).ok()
    h.read(2, "u1").ok("likes milk", "likes juice", "likes tea", "hates tea", "likes coffee")
    result = check(h, "uniqueness")
    cause, detail = only(result)
    assert cause == "not_replaced"
    assert detail == "one spelling 'drink', 5 facts kept; races explain 1 at most"


def test_a_write_of_unknown_outcome_counts_as_racing_every_later_write_to_its_slot():
    # The info write may land at any later time, after the next write checked the slot.
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes milk", 1).info()
    h.write(1, "u1", "drink", "likes tea", 2).ok()
    h.read(2, "u1").ok("likes milk", "likes tea")
    assert only(check(h, "uniqueness"))[0] == "race"
