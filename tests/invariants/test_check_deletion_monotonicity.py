"""deletion_monotonicity: a deleted entity serves nothing until a restore, and a restore
revives nothing (violation: resurrection)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_a_record_after_an_acknowledged_delete_is_a_resurrection():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 2).ok()
    h.delete(0, "u1", 3).ok()
    h.read(1, "u1").ok("tea", "rice")
    result = check(h, "deletion_monotonicity")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses, v.magnitude) == ("resurrection", Key("ns", "u1"), (4, 6), 2)
    assert texts(result) == [
        "Let D = op 4, a delete of u1 in namespace ns (causal_seq 3), acknowledged at index 5. "
        "Then read op 6 of u1 in namespace ns, invoked after D was acknowledged, with no "
        'restore of u1 that could have taken effect, returned "tea" (written by op 0) and 1 '
        "more record(s), but a deleted entity has no records until a restore, a contradiction."
    ]
    assert (result.checked, result.rate) == (1, 1.0)
    assert result.rate_denominator_name == "reads of a deleted entity"


def test_an_empty_read_after_a_delete_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 3).ok()
    h.read(1, "u1").ok()
    result = check(h, "deletion_monotonicity")
    assert result.validity is Validity.VALID
    assert result.coverage == {
        "ok_deletes": 1,
        "ok_restores": 0,
        "deleted_entity_reads": 1,
        "reads_after_possible_restore": 0,
    }


def test_a_restore_must_not_revive_what_was_written_before_the_delete():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 5).ok()  # a skewed clock: above the delete's seq
    h.delete(0, "u1", 3).ok()
    h.restore(0, "u1", 4).ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "deletion_monotonicity")
    assert [v.witnesses for v in result.violations] == [(0, 2, 6)]
    assert texts(result) == [
        'Let W = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 5) to u1 in '
        "namespace ns, acknowledged at index 1, and D = op 2, a delete of u1 in namespace ns "
        "(causal_seq 3), acknowledged at index 3. Then read op 6 of u1 in namespace ns, after "
        "restore op 4, returned W's value, but D was invoked after W was acknowledged and a "
        "restore must not revive what the entity held before the delete, a contradiction."
    ]


def test_a_late_write_below_the_delete_seq_must_stay_refused_after_a_restore():
    h = HistoryBuilder()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).ok()
    h.write(0, "u1", "drink", "tea", 3).ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "deletion_monotonicity")
    assert [v.witnesses for v in result.violations] == [(0, 4, 6)]
    assert texts(result) == [
        "Let D = op 0, a delete of u1 in namespace ns (causal_seq 5), acknowledged at index 1, "
        'and W = op 4, a write of "tea" (fact drink=tea, slot drink, causal_seq 3) to u1 in '
        "namespace ns, acknowledged at index 5. Then read op 6 of u1 in namespace ns, after "
        "restore op 2, returned W's value, but W's causal_seq 3 is below D's 5, so W must "
        "stay refused even after a restore, a contradiction."
    ]


def test_a_new_write_after_a_restore_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).ok()
    h.write(0, "u1", "drink", "coffee", 7).ok()
    h.read(1, "u1").ok("coffee")
    result = check(h, "deletion_monotonicity")
    assert result.validity is Validity.VALID
    assert result.coverage["reads_after_possible_restore"] == 1


def test_a_restore_of_unknown_outcome_may_explain_records():
    h = HistoryBuilder()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).info()
    h.write(0, "u1", "drink", "coffee", 7).ok()
    h.read(1, "u1").ok("coffee")
    assert check(h, "deletion_monotonicity").validity is Validity.VALID


def test_a_restore_in_flight_during_the_read_may_explain_records():
    h = HistoryBuilder()
    h.delete(0, "u1", 5).ok()
    restore = h.restore(0, "u1", 6)
    h.write(2, "u1", "drink", "coffee", 7).ok()
    h.read(1, "u1").ok("coffee")
    restore.ok()
    assert check(h, "deletion_monotonicity").validity is Validity.VALID


def test_a_failed_restore_explains_nothing():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).fail("not_deleted")
    h.read(1, "u1").ok("tea")
    assert [v.explanation.cause for v in check(h, "deletion_monotonicity").violations] == [
        "no_restore"
    ]


def test_an_info_write_from_before_the_delete_may_land_after_the_restore():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 9).info()
    h.delete(0, "u1", 5).ok()
    h.restore(0, "u1", 6).ok()
    h.read(1, "u1").ok("tea")
    assert check(h, "deletion_monotonicity").validity is Validity.VALID


def test_a_delete_of_unknown_outcome_or_in_flight_proves_nothing():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 5).info()
    d = h.delete(0, "u1", 6)
    h.read(1, "u1").ok("tea")
    d.ok()
    result = check(h, "deletion_monotonicity")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == (
        "nothing to check: no read was invoked after a delete of its entity was acknowledged",
    )


def test_no_delete_is_unknown():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    assert check(h, "deletion_monotonicity").notes == (
        "nothing to check: no delete was acknowledged",
    )
