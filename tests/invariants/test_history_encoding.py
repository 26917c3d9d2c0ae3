"""history.jsonl lines come from msgspec; they must stay the exact text json.dumps gives
for the entry's JSON object, as the format was first defined, whatever the entry holds."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.history import Entry, History, HistoryRecorder, Read, WriteMeta
from invariants.history._codec import encode_entry

_OP_FIELDS = {
    "write": ("namespace", "entity_id", "attribute", "value", "causal_seq", "op_id", "source"),
    "delete": ("namespace", "entity_id", "causal_seq", "op_id", "reason"),
    "restore": ("namespace", "entity_id", "causal_seq", "op_id"),
    "read": ("namespace", "entity_id"),
}


def _object(entry: Entry) -> dict[str, Any]:
    """The JSON object of a line, as the format defines it, field by field."""
    res, meta = entry.result, entry.meta
    if isinstance(res, Ack):
        result: Any = {"applied": res.applied, "version": res.version, "reason": res.reason}
    elif isinstance(res, tuple):
        result = [{"entity_id": r.entity_id, "attribute": r.attribute, "value": r.value,
                   "causal_seq": r.causal_seq, "version": r.version} for r in res]
    else:
        result = res
    return {
        "index": entry.index, "worker": entry.worker, "time_ns": entry.time_ns,
        "type": entry.type, "f": entry.f,
        "op": {name: getattr(entry.op, name) for name in _OP_FIELDS[entry.f]},
        "result": result,
        "meta": None if meta is None
        else {"fact": meta.fact, "slot": meta.slot, "paraphrase": meta.paraphrase},
    }


def _dumps(entry: Entry) -> str:
    return json.dumps(_object(entry), ensure_ascii=False, separators=(",", ":")) + "\n"


def _has_float(value: object) -> bool:
    if isinstance(value, dict):
        return any(map(_has_float, value.values()))
    if isinstance(value, list):
        return any(map(_has_float, value))
    return isinstance(value, float)


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
ints = st.integers(min_value=-(2**70), max_value=2**70)
# Values of the wrong type (never in a valid history) still give json.dumps' text.
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
    line = encode_entry(entry).decode("utf-8")
    assert entry.to_dict() == _object(entry)
    assert json.loads(line) == _object(entry)
    if not _has_float(_object(entry)):
        assert line == _dumps(entry)
    # A float where an int belongs: the same number, written 1e16 where json.dumps
    # writes 1e+16.


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
