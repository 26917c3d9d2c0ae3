"""The history model: recording, validation, the JSONL format and its failure messages."""

from __future__ import annotations

import json
import threading
import time

import pytest

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument
from invariants.history import (
    Entry,
    History,
    HistoryError,
    HistoryRecorder,
    Read,
    WriteMeta,
    read_history,
)
from tests.invariants.histbuild import HistoryBuilder

WRITE = Write(
    namespace="ns",
    entity_id="u1",
    attribute="Coffee Preference",
    value='喜欢美式 "double"',
    causal_seq=9,
    op_id="op-1",
    source=None,
)
META = WriteMeta(fact="f1", slot="coffee_preference", paraphrase="surface")


def _small_run(recorder: HistoryRecorder) -> None:
    w = recorder.invoke(0, WRITE, meta=META)
    r = recorder.invoke(1, Read("ns", "u1"))
    recorder.ok(w, Ack(applied=True, version=3))
    d = recorder.invoke(0, Delete("ns", "u1", causal_seq=10, op_id="op-2", reason="user asked"))
    recorder.ok(r, [Record("u1", "coffee_preference", WRITE.value, 9, 3)])
    recorder.info(d, TimeoutError("no answer in 2s"))
    x = recorder.invoke(0, Restore("ns", "u1", causal_seq=11, op_id="op-3"))
    recorder.fail(x, Ack(applied=False, reason="not_deleted"))


def test_recorder_streams_one_flushed_json_line_per_entry(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        w = recorder.invoke(0, WRITE, meta=META)
        # Flushed per line: a reader sees the invocation before the write completes.
        assert len(path.read_text(encoding="utf-8").splitlines()) == 1
        recorder.ok(w, Ack(applied=True, version=1))
        lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["invoke", "ok"]
    assert json.loads(lines[1]) == {
        "index": 1,
        "worker": 0,
        "time_ns": json.loads(lines[1])["time_ns"],
        "type": "ok",
        "f": "write",
        "op": {
            "namespace": "ns",
            "entity_id": "u1",
            "attribute": "Coffee Preference",
            "value": '喜欢美式 "double"',
            "causal_seq": 9,
            "op_id": "op-1",
            "source": None,
        },
        "result": {"applied": True, "version": 1, "reason": None},
        "meta": {"fact": "f1", "slot": "coffee_preference", "paraphrase": "surface"},
    }


def test_jsonl_round_trip_is_lossless(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    in_memory = recorder.history()
    from_file = read_history(path)
    assert from_file == in_memory
    assert [e.result for e in from_file][4] == (
        Record("u1", "coffee_preference", WRITE.value, 9, 3),
    )
    assert from_file[5].result == "TimeoutError: no answer in 2s"
    for entry in in_memory:
        assert Entry.from_dict(json.loads(json.dumps(entry.to_dict()))) == entry
    again = tmp_path / "again.jsonl"
    from_file.write_jsonl(again)
    assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_pairs_match_each_invocation_with_its_completion(tmp_path):
    recorder = HistoryRecorder()
    _small_run(recorder)
    history = recorder.history()
    pairs = [(inv.index, done.index if done else None) for inv, done in history.pairs()]
    assert pairs == [(0, 2), (1, 4), (3, 5), (6, 7)]
    assert history.partner(4) == history[1]


def test_recorder_is_thread_safe_and_feeds_observers_in_order(tmp_path):
    seen: list[int] = []
    path = tmp_path / "history.jsonl"

    def worker(w: int) -> None:
        for k in range(200):
            op = Write("ns", f"e{w}", "a", f"v{w}-{k}", k, f"{w}-{k}")
            inv = recorder.invoke(w, op, meta=WriteMeta(f"{w}-{k}", "a"))
            recorder.ok(inv, Ack(applied=True))

    with HistoryRecorder(path, observers=[lambda e: seen.append(e.index)]) as recorder:
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    history = read_history(path)
    assert len(history) == 8 * 200 * 2
    assert seen == list(range(len(history)))
    assert history == recorder.history()


def test_truncated_last_line_is_reported_with_its_line_number(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:25], encoding="utf-8")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == (
        f"""{path}:4: the last line is cut short ('{{"index":3,"worker":0,"ti'); the run """
        "that wrote it probably crashed mid-write. Delete that line to check the rest, or "
        "pass allow_incomplete=True."
    )
    assert err.value.line == 4
    assert isinstance(err.value, ValueError)


def test_allow_incomplete_drops_the_cut_line_and_says_so(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:3]) + lines[3][:25], encoding="utf-8")
    history = read_history(path, allow_incomplete=True)
    assert len(history) == 3
    assert history.defects == (
        """line 4: the last line is cut short ('{"index":3,"worker":0,"ti'); the run that """
        "wrote it probably crashed mid-write",
    )
    assert [done for _, done in history.pairs()][1] is None


def test_bad_line_in_the_middle_names_its_line(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = "{oops\n"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == (
        f"{path}:3: not valid JSON (object keys must be strings at byte 1). Each line "
        "must be one JSON object as HistoryRecorder writes it."
    )


@pytest.mark.parametrize("chunk", [1, 7, 64, 100, 1 << 20])
def test_a_file_read_in_pieces_names_the_same_lines(tmp_path, monkeypatch, chunk):
    from invariants.history import _reading

    # Chunks of bytes, not lines: a chunk ends anywhere, inside a line or a character.
    monkeypatch.setattr(_reading, "READ_CHUNK_BYTES", chunk)
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    whole = read_history(path)
    good = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert read_history(path) == whole
    lines = [*good]
    lines[2] = "{oops\n"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(HistoryError, match=r":3: not valid JSON"):
        read_history(path)
    path.write_text("".join(good[:3]) + good[3][:25], encoding="utf-8")
    assert len(read_history(path, allow_incomplete=True)) == 3
    with pytest.raises(HistoryError, match=r":4: the last line is cut short"):
        read_history(path)


def test_a_field_of_the_wrong_type_is_named(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        _small_run(recorder)
    lines = path.read_text(encoding="utf-8").splitlines()
    data = json.loads(lines[0])
    data["op"]["causal_seq"] = "9"
    lines[0] = json.dumps(data)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == (
        f"{path}:1: field 'op.causal_seq' is '9' (type str). It must be of type int."
    )


def test_an_invocation_without_completion_is_an_error_unless_allowed():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1")
    with pytest.raises(HistoryError) as err:
        h.history()
    assert str(err.value) == (
        "entry 2: op 2 (worker 1) was invoked but never completed. A run must complete "
        "every operation, as info when the outcome is unknown; pass allow_incomplete=True "
        "to check a crashed run's history anyway."
    )
    assert len(h.history(allow_incomplete=True)) == 3


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda es: es.append(es[0]),
            "entry 0: index is 0, expected 2. Indices are dense from 0 in history order; "
            "do not drop or reorder lines.",
        ),
        (
            lambda es: es.insert(1, Entry(1, 0, 1, "invoke", "read", Read("ns", "u1"))),
            "entry 1: worker 0 invokes while its op 0 is outstanding. A worker runs one "
            "operation at a time; complete it (info if unsure) first.",
        ),
        (
            lambda es: es.__setitem__(
                1, Entry(1, 0, 1, "ok", "write", es[0].op, Ack(applied=False), es[0].meta)
            ),
            "entry 1: an ok write has result Ack(applied=False, version=None, reason=None). "
            "An ok write must carry Ack(applied=True); an exception is an info.",
        ),
        (
            lambda es: es.__setitem__(0, Entry(0, 0, 0, "invoke", "write", es[0].op)),
            "entry 0: a write has no meta. Record the generator's fact, slot and paraphrase "
            "level with every write.",
        ),
        (
            lambda es: es.__setitem__(
                1, Entry(1, 1, 1, "ok", "write", es[0].op, Ack(True), es[0].meta)
            ),
            "entry 1: worker 1 completes an operation it never invoked. Each completion "
            "must follow its own worker's invocation.",
        ),
    ],
)
def test_malformed_histories_are_rejected_with_a_fix(mutate, message):
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    entries = list(h.entries)
    mutate(entries)
    with pytest.raises(HistoryError) as err:
        History(entries, allow_incomplete=True)
    assert str(err.value) == message


def test_recorder_refuses_a_second_operation_on_a_busy_worker():
    recorder = HistoryRecorder()
    recorder.invoke(0, Read("ns", "u1"))
    with pytest.raises(HistoryError, match="worker 0 invokes while its op 0 is outstanding"):
        recorder.invoke(0, Read("ns", "u2"))
    assert len(recorder) == 1
    assert recorder.outstanding == 1


def test_outstanding_since_counts_the_operations_invoked_from_that_entry_on():
    recorder = HistoryRecorder()
    early = recorder.invoke(0, Read("ns", "u1"))
    done = recorder.invoke(1, Read("ns", "u1"))
    recorder.ok(done, [])
    frozen_at = len(recorder)
    assert recorder.outstanding_since(frozen_at) == 0
    late = recorder.invoke(2, Read("ns", "u2"))
    recorder.invoke(3, Read("ns", "u3"))
    assert (recorder.outstanding, recorder.outstanding_since(frozen_at)) == (3, 2)
    recorder.info(late, "OutcomeUnknown: reset")
    recorder.ok(early, [])
    assert (recorder.outstanding, recorder.outstanding_since(frozen_at)) == (1, 1)
    assert recorder.outstanding_since(0) == 1


def test_a_fail_may_carry_error_text_that_proves_nothing_was_applied(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as recorder:
        x = recorder.invoke(0, Restore("ns", "u1", causal_seq=1, op_id="r1"))
        recorder.fail(x, "unsupported: NotImplementedError: no restore")
        r = recorder.invoke(0, Read("ns", "u1"))
        recorder.fail(r, "PermissionError: namespace closed")
    history = read_history(path)
    assert [e.result for e in history if e.type == "fail"] == [
        "unsupported: NotImplementedError: no restore",
        "PermissionError: namespace closed",
    ]


def test_an_ok_read_must_carry_records():
    recorder = HistoryRecorder()
    r = recorder.invoke(0, Read("ns", "u1"))
    with pytest.raises(HistoryError) as err:
        recorder.ok(r, Ack(applied=True))
    assert str(err.value) == (
        "entry 1: an ok read has result Ack(applied=True, version=None, reason=None). An ok "
        "read carries the tuple of Records it returned, in serving order; a read that failed "
        "carries the error text."
    )


def test_an_ok_write_must_carry_an_applied_ack_and_a_refused_one_records_nothing():
    recorder = HistoryRecorder()
    w = recorder.invoke(0, WRITE, meta=META)
    with pytest.raises(HistoryError) as err:
        recorder.ok(w, Ack(applied=False, reason="stale"))
    assert str(err.value) == (
        "entry 1: an ok write has result Ack(applied=False, version=None, reason='stale'). "
        "An ok write must carry Ack(applied=True); an exception is an info."
    )
    assert (len(recorder), recorder.outstanding) == (1, 1)
    recorder.fail(w, Ack(applied=False, reason="stale"))
    assert [e.type for e in recorder.history()] == ["invoke", "fail"]


def test_grouped_writes_reach_the_file_within_the_interval_and_all_on_close(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path, flush_interval_s=0.05) as recorder:
        w = recorder.invoke(0, WRITE, meta=META)
        recorder.ok(w, Ack(applied=True, version=1))
        deadline = time.monotonic() + 5
        while len(path.read_text(encoding="utf-8").splitlines()) < 2:
            assert time.monotonic() < deadline, "grouped lines never reached the file"
            time.sleep(0.01)
        for k in range(200):
            r = recorder.invoke(1, Read("ns", f"u{k}"))
            recorder.ok(r, [])
    assert len(read_history(path)) == 402


def test_deferred_observers_see_every_entry_in_order_before_close_returns(tmp_path):
    seen: list[int] = []
    with HistoryRecorder(tmp_path / "h.jsonl", deferred_observers=[lambda e: seen.append(e.index)],
                         flush_interval_s=0.01) as recorder:
        for k in range(100):
            r = recorder.invoke(k % 4, Read("ns", "u"))
            recorder.ok(r, [])
    assert seen == list(range(200))


def test_deferred_observers_need_a_flush_interval(tmp_path):
    with pytest.raises(InvalidArgument):
        HistoryRecorder(tmp_path / "h.jsonl", deferred_observers=[print])
