"""The run saved as tests/fixtures/history-v1.jsonl, the history format as it was first
written: the fixture was recorded by the hand-written encoder the msgspec codec replaced,
so a reader or writer that drifts from that format fails tests/invariants/
test_history_format.py against it.

Regenerate only if the format is meant to change (it is not): ``record_v1(path)``.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.history import History, HistoryRecorder, Read, WriteMeta

FIXTURE = Path(__file__).parent.parent / "fixtures" / "history-v1.jsonl"

_ODD = '喜欢美式 "double"\n\t\\ / 🙂 𝄞 \x00\x01\x1f\x7f \u2028\u2029 é'


def record_v1(path: Path | None = None) -> History:
    """Record the fixture's run, into ``path`` when given; its history in memory."""
    clock = itertools.count(1_764_000_000_000_000_000, 1_234_567).__next__
    with HistoryRecorder(path, clock=clock) as rec:
        w1 = rec.invoke(0, Write("ns-é", "用户-1", "Coffee Preference", _ODD, 1, "op-1"),
                        meta=WriteMeta("f1", "coffee_preference", "none"))
        w2 = rec.invoke(1, Write("ns-é", "用户-1", "coffee_preference", "likes americano", 2,
                                 "op-2", "user"),
                        meta=WriteMeta("f1", "coffee_preference", "surface"))
        rec.ok(w1, Ack(applied=True, version=1))
        r1 = rec.invoke(2, Read("ns-é", "用户-1"))
        rec.ok(w2, Ack(applied=True, version=2, reason="merged"))
        r2 = rec.invoke(3, Read("ns-é", "nobody"))
        rec.ok(r1, [Record("用户-1", "coffee_preference", _ODD, 1, 1),
                    Record("用户-1", "drink 🍵", "", 2**53 + 1, 0)])
        rec.ok(r2, [])
        w3 = rec.invoke(0, Write("ns-é", "用户-1", "drink 🍵", "", 3, "op-3", None),
                        meta=WriteMeta("f2", "drink", "lexical"))
        w4 = rec.invoke(1, Write("other", "u2", "Ünïcödé", "naïve café — ß", 2**62, "op-4",
                                 "tool:calendar"),
                        meta=WriteMeta("f3", "unicode", "semantic"))
        rec.fail(w3, Ack(applied=False, reason="stale"))
        rec.info(w4, TimeoutError("no answer in 2s"))
        d1 = rec.invoke(2, Delete("ns-é", "用户-1", 4, "op-5", "user asked"))
        d2 = rec.invoke(3, Delete("other", "u2", 5, "op-6"))
        rec.ok(d1, Ack(applied=True, version=3))
        rec.info(d2, ConnectionResetError(104, "reset by peer"))
        x1 = rec.invoke(0, Restore("ns-é", "用户-1", 6, "op-7"))
        x2 = rec.invoke(1, Restore("other", "u2", 7, "op-8"))
        rec.ok(x1, Ack(applied=True, version=4))
        rec.fail(x2, "unsupported: NotImplementedError: no restore")
        r3 = rec.invoke(2, Read("other", "u2"))
        r4 = rec.invoke(3, Read("ns-é", "用户-1"))
        rec.fail(r3, "PermissionError: namespace closed")
        rec.info(r4, "OutcomeUnknown: the service was frozen")
        x3 = rec.invoke(0, Restore("ns-é", "用户-1", 8, "op-9"))
        rec.fail(x3, Ack(applied=False, version=4, reason="not_deleted"))
        r5 = rec.invoke(1, Read("ns-é", "用户-1"))
        rec.ok(r5, (Record("用户-1", "coffee_preference", "likes americano", 2, 2),))
    return rec.history()
