"""uniqueness: a read never serves two facts for one slot (violation: conflict)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_two_facts_served_for_one_slot_is_a_conflict():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    h.write(0, "u1", "drink", "hates tea", 2, attribute="Drink").ok()
    h.read(1, "u1").ok("likes tea", "hates tea")
    result = check(h, "uniqueness")
    assert result.validity is Validity.INVALID
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses, v.magnitude) == (
        "conflict",
        Key("ns", "u1", "drink"),
        (0, 2, 4),
        2,
    )
    assert texts(result) == [
        'Let W1 = op 0, a write of "likes tea" (fact drink=likes tea, slot drink, causal_seq 1) '
        "to u1 in namespace ns, acknowledged at index 1, and W2 = op 2, a write of "
        '"hates tea" (fact drink=hates tea, slot drink, causal_seq 2) to u1 in namespace ns, '
        "acknowledged at index 3. Then read op 4 of u1 in namespace ns returned the values "
        "of both W1 and W2, 2 different facts for slot drink, but a slot holds one fact at a "
        "time, a contradiction."
    ]
    assert (result.checked, result.rate, result.rate_numerator, result.rate_denominator) == (
        1,
        1.0,
        1,
        1,
    )
    assert result.rate_denominator_name == "reads of a slot with 2 or more facts written"
    [group] = result.groups
    assert (group.kind, group.count, group.first, group.last, group.worst) == (
        "conflict",
        1,
        v,
        v,
        v,
    )


def test_one_fact_per_slot_after_an_overwrite_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1).ok()
    h.write(0, "u1", "drink", "hates tea", 2).ok()
    h.write(0, "u1", "food", "rice", 3).ok()
    h.read(1, "u1").ok("hates tea", "rice")
    result = check(h, "uniqueness")
    assert result.validity is Validity.VALID
    assert result.coverage == {"ok_reads": 1, "contended_slots": 1, "contended_slot_reads": 1}


def test_concurrent_writes_of_two_facts_may_show_either_but_not_both():
    h = HistoryBuilder()
    a = h.write(0, "u1", "drink", "tea", 1)
    b = h.write(1, "u1", "drink", "coffee", 1)
    h.read(2, "u1").ok("coffee")
    a.ok()
    h.read(2, "u1").ok("tea")
    b.ok()
    assert check(h, "uniqueness").validity is Validity.VALID
    h.read(2, "u1").ok("tea", "coffee")
    assert check(h, "uniqueness").violation_count == 1


def test_a_failed_write_does_not_make_a_slot_contended():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 2).ok()
    h.write(0, "u1", "drink", "coffee", 1).fail()
    h.read(1, "u1").ok("tea")
    result = check(h, "uniqueness")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == ("nothing to check: no read of a slot with writes of 2 or more facts",)


def test_nothing_contended_is_unknown_not_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "uniqueness")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == ("nothing to check: no slot ever had writes of 2 or more facts",)
