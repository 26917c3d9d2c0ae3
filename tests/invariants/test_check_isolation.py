"""isolation: nothing written in one namespace is visible from another (violation: leak)."""

from __future__ import annotations

from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def test_a_value_from_another_namespace_is_a_leak():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1, ns="alice").ok()
    h.read(1, "u1", ns="bob").ok("tea")
    result = check(h, "isolation")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses) == ("leak", Key("bob", "u1"), (0, 2))
    assert texts(result) == [
        'Let W = op 0, a write of "tea" (fact drink=tea, slot drink, causal_seq 1) to u1 in '
        "namespace alice, acknowledged at index 1. Then read op 2 of u1 in namespace bob "
        "returned W's value, but no write of that value was made in bob, and namespaces never "
        "share records, a contradiction."
    ]
    assert (result.checked, result.rate) == (1, 1.0)


def test_each_namespace_reading_its_own_values_is_valid():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1, ns="alice").ok()
    h.write(0, "u1", "drink", "coffee", 2, ns="bob").ok()
    h.read(1, "u1", ns="bob").ok("coffee")
    h.read(1, "u1", ns="alice").ok("tea")
    result = check(h, "isolation")
    assert result.validity is Validity.VALID
    assert result.coverage == {"reads_with_other_namespaces": 2, "records_checked": 2}


def test_the_same_value_written_in_both_namespaces_is_not_a_leak():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1, ns="alice").ok()
    h.write(0, "u1", "drink", "tea", 1, ns="bob").info()
    h.read(1, "u1", ns="bob").ok("tea")
    assert check(h, "isolation").validity is Validity.VALID


def test_one_namespace_is_unknown():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "isolation")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == (
        "nothing to check: no record was read while a second namespace held writes",
    )
