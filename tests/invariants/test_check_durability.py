"""durability: an acknowledged write stays readable until a delete (violation: lost)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_an_acknowledged_write_missing_from_a_later_read_is_lost():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "food", "rice", 2).ok()
    h.read(1, "u1").ok("rice")
    result = check(h, "durability")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses, v.magnitude) == (
        "lost",
        Key("ns", "u1", "drink"),
        (0, 4),
        None,
    )
    assert texts(result) == [
        'Let W = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 1) to u1 in '
        "namespace ns, acknowledged at index 1. Then read op 4 of u1 in namespace ns, invoked "
        "after W was acknowledged, with no delete of u1 that could have intervened, returned "
        "no record for slot drink, but an acknowledged write keeps its slot readable until a "
        "delete, a contradiction."
    ]
    assert (result.checked, result.rate_numerator, result.rate_denominator) == (2, 1, 2)
    assert result.groups[0].worst is None


def test_every_acknowledged_slot_present_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "drink", "coffee", 2).ok()
    h.read(1, "u1").ok("coffee")
    result = check(h, "durability")
    assert result.validity is Validity.VALID
    assert result.coverage == {
        "ok_writes": 2,
        "slot_reads_after_ok_write": 1,
        "reads_skipped_uncertain_delete": 0,
    }


def test_an_older_fact_instead_of_the_write_is_a_reorder_not_a_loss():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.write(0, "u1", "drink", "coffee", 2).ok()
    h.read(1, "u1").ok("tea")
    assert check(h, "durability").violation_count == 0
    assert check(h, "causal_monotonicity").violation_count == 1


def test_a_delete_of_unknown_outcome_explains_an_absence():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).info()
    h.read(1, "u1").ok()
    result = check(h, "durability")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == (
        "1 read(s) not checked: a delete of unknown outcome could have wiped the entity at "
        "any time",
        "nothing to check: no read was invoked after an acknowledged write to its entity",
    )


def test_a_delete_in_flight_or_racing_the_write_explains_an_absence():
    h = HistoryBuilder()
    w = h.write(0, "u1", "drink", "tea", 1)
    h.delete(1, "u1", 2).ok()  # raced the write, which may have landed first
    w.ok()
    h.read(1, "u1").ok()
    d = h.delete(0, "u1", 3)
    h.write(2, "u1", "food", "rice", 4).ok()
    h.read(1, "u1").ok()  # the delete in flight may already have struck
    d.ok()
    assert check(h, "durability").violation_count == 0


def test_an_info_or_failed_write_need_not_be_visible():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).info()
    h.write(0, "u1", "food", "rice", 2).fail()
    h.read(1, "u1").ok()
    assert check(h, "durability").validity is Validity.UNKNOWN


def test_a_write_after_a_restore_must_be_visible():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.delete(0, "u1", 2).ok()
    h.read(1, "u1").ok()
    h.restore(0, "u1", 3).ok()
    h.write(0, "u1", "drink", "coffee", 4).ok()
    h.read(1, "u1").ok()
    assert [v.witnesses for v in check(h, "durability").violations] == [(8, 10)]
