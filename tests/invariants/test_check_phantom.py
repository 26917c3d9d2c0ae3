"""phantom: every value a read returns was produced by a write (violation: phantom)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_a_value_nobody_wrote_is_a_phantom():
    h = HistoryBuilder()
    h.read(1, "u1").ok(("ghost", 7))
    result = check(h, "phantom")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses) == ("phantom", Key("ns", "u1"), (0,))
    assert texts(result) == [
        "Let R = op 0, a read of u1 in namespace ns, completed at index 1. Then R returned "
        '"ghost" (causal_seq 7), but no write of that value to u1 in namespace ns was invoked '
        "before the read completed, a contradiction."
    ]


def test_the_value_of_a_failed_write_is_a_phantom():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).fail("tombstoned")
    h.read(1, "u1").ok("tea")
    result = check(h, "phantom")
    assert [v.witnesses for v in result.violations] == [(0, 2)]
    assert texts(result) == [
        'Let W = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 1) to u1 in '
        "namespace ns, refused at index 1. Then read op 2 of u1 in namespace ns returned W's "
        "value, but W did not take effect and no other write of that value to u1 in namespace "
        "ns was invoked before the read completed, a contradiction."
    ]


def test_a_value_written_to_another_entity_is_a_phantom_here():
    h = HistoryBuilder()
    h.write(0, "u2", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    assert texts(check(h, "phantom")) == [
        'Let W = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 1) to u2 in '
        "namespace ns, acknowledged at index 1. Then read op 2 of u1 in namespace ns returned "
        "W's value, but no write of that value to u1 in namespace ns was invoked before the "
        "read completed, a contradiction."
    ]


def test_a_value_written_only_after_the_read_completed_is_a_phantom():
    h = HistoryBuilder()
    h.read(1, "u1").ok(("tea", 1))
    h.write(0, "u1", "drink", "tea", 1).ok()
    assert check(h, "phantom").violation_count == 1


def test_an_info_or_in_flight_write_may_be_visible():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).info()
    w = h.write(0, "u1", "food", "rice", 2)
    h.read(1, "u1").ok("tea", "rice")
    w.ok()
    result = check(h, "phantom")
    assert result.validity is Validity.VALID
    assert result.coverage == {"ok_reads": 1, "records_checked": 2}


def test_reads_that_fail_or_time_out_tell_nothing():
    h = HistoryBuilder()
    h.read(1, "u1").info()
    h.read(1, "u1").fail()
    result = check(h, "phantom")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == ("nothing to check: no read returned a record",)
