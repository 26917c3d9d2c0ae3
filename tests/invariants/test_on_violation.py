"""``on_violation``: every violation found, past what the checkers keep, for a report that
marks every witness."""

from __future__ import annotations

from invariants.checkers import check_history
from invariants.verdict import Violation
from tests.invariants.histbuild import HistoryBuilder


def test_every_violation_is_told_even_those_keep_drops():
    h = HistoryBuilder()
    for k in range(5):
        h.write(0, "u1", "drink", f"a{k}", 10 * k).ok()
        h.write(0, "u1", "drink", f"b{k}", 10 * k + 1 + k).ok()
        h.read(1, "u1").ok((f"b{k}", 10 * k + 1 + k), (f"a{k}", 10 * k))
    told: list[Violation] = []
    result = check_history(h.history(), names=["causal_monotonicity"], keep=2,
                           on_violation=told.append)["causal_monotonicity"]
    assert len(result.violations) < result.violation_count == 5
    assert len(told) == 5
    assert [v.witnesses for v in told[:2]] == [v.witnesses for v in result.violations]
    assert told[-1].witnesses == result.groups[0].last.witnesses
    assert all(v.cause for v in told), "told as classified"
