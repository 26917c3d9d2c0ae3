"""history.jsonl lines are written directly for speed; they must stay the exact text
json.dumps gives for Entry.to_dict(), whatever the entry holds."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.history import Entry, History, HistoryRecorder, Read, WriteMeta, _encode


def _dumps(entry: Entry) -> str:
    return json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ints = st.integers(min_value=-(2**70), max_value=2**70)
# Values of the wrong type must fall back to json.dumps and still give its text.
odd_ints = st.one_of(ints, st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
odd_texts = st.one_of(text, st.none(), ints)

payloads = st.one_of(
    st.builds(Write, text, text, text, text, odd_ints, text, st.none() | text),
    st.builds(Delete, text, text, odd_ints, text, st.none() | text),
    st.builds(Restore, text, text, odd_ints, text),
    st.builds(Read, odd_texts, text),
)
results = st.one_of(
    st.none(),
    odd_texts,
    st.builds(Ack, st.booleans() | st.integers(0, 1), st.none() | odd_ints, st.none() | text),
    st.lists(st.builds(Record, text, text, text, odd_ints, ints), max_size=3).map(tuple),
)
metas = st.none() | st.builds(WriteMeta, text, odd_texts, st.sampled_from(["none", "lexical"]))
_F = {Write: "write", Delete: "delete", Restore: "restore", Read: "read"}


@given(
    index=odd_ints,
    worker=odd_ints,
    time_ns=ints,
    etype=st.sampled_from(["invoke", "ok", "fail", "info"]),
    op=payloads,
    result=results,
    meta=metas,
)
def test_a_line_is_the_text_json_dumps_gives(index, worker, time_ns, etype, op, result, meta):
    entry = Entry(index, worker, time_ns, etype, _F[type(op)], op, result, meta)
    assert _encode(entry) == _dumps(entry)


def test_recorded_and_saved_files_hold_json_dumps_text(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        write = Write("ns", "u1", "Coffee\tPreference", '喜欢美式 "double"\n', 9, "op-1", "user")
        w = recorder.invoke(0, write, meta=WriteMeta("f1", "c", "surface"))
        r = recorder.invoke(1, Read("ns", "u1"))
        recorder.ok(w, Ack(applied=True, version=3, reason="merged"))
        recorder.ok(r, [Record("u1", "c", '喜欢美式 "double"\n', 9, 3)])
        d = recorder.invoke(0, Delete("ns", "u1", causal_seq=10, op_id="op-2"))
        recorder.info(d, TimeoutError("no \\ answer"))
    history: History = recorder.history()
    expected = "".join(_dumps(entry) for entry in history)
    assert path.read_text(encoding="utf-8") == expected
    again = tmp_path / "again.jsonl"
    history.write_jsonl(again)
    assert again.read_text(encoding="utf-8") == expected
