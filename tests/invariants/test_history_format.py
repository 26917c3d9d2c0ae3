"""The history file format: today's files read back unchanged, plain or compressed, and
every way a file can be wrong is named by line and field."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import zstandard

from invariants.errors import InvalidArgument
from invariants.history import (
    Entry,
    HistoryError,
    HistoryRecorder,
    HistoryStream,
    Read,
    find_history,
    read_history,
)
from tests.invariants.history_v1 import FIXTURE, record_v1

ROOT = Path(__file__).resolve().parents[2]


def _fixture_lines() -> list[str]:
    """The fixture's lines with their newlines; not splitlines(), which also splits at
    the U+2028 inside its values."""
    return [line + "\n" for line in FIXTURE.read_text(encoding="utf-8").split("\n")[:-1]]


def test_the_saved_v1_history_reads_back_as_recorded_and_writes_back_byte_for_byte(tmp_path):
    recorded = record_v1()
    history = read_history(FIXTURE)
    assert history == recorded
    assert list(HistoryStream(FIXTURE)) == list(recorded)
    again = tmp_path / "history.jsonl"
    history.write_jsonl(again)
    assert again.read_bytes() == FIXTURE.read_bytes()
    record_v1(tmp_path / "recorded.jsonl")
    assert (tmp_path / "recorded.jsonl").read_bytes() == FIXTURE.read_bytes()


def test_a_compressed_history_holds_the_same_lines_and_reads_back_equal(tmp_path):
    history = read_history(FIXTURE)
    path = tmp_path / "history.jsonl.zst"
    history.write_jsonl(path)
    assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    plain = zstandard.ZstdDecompressor().stream_reader(path.read_bytes()).read()
    assert plain == FIXTURE.read_bytes()
    assert read_history(path) == history
    assert list(HistoryStream(path)) == list(history)


def test_a_recorder_writes_compressed_frames_of_the_same_lines(tmp_path):
    path = tmp_path / "history.jsonl.zst"
    with HistoryRecorder(path, flush_interval_s=0.01, compress=True) as recorder:
        for group in range(3):
            for k in range(100):
                r = recorder.invoke(k % 3, Read("ns", f"u{group}-{k}"))
                recorder.ok(r, [])
            size = path.stat().st_size
            deadline = time.monotonic() + 5
            while path.stat().st_size == size:  # the group is written, as a frame of its own
                assert time.monotonic() < deadline, "a group never reached the file"
                time.sleep(0.005)
    frames = 0
    data = path.read_bytes()
    while data:
        frame = zstandard.ZstdDecompressor().decompressobj()
        frame.decompress(data)
        data = frame.unused_data
        frames += 1
    assert frames >= 3
    assert read_history(path) == recorder.history()


def test_the_reader_tells_a_compressed_file_by_its_bytes_not_its_name(tmp_path):
    path = tmp_path / "renamed.jsonl"
    read_history(FIXTURE).write_jsonl(tmp_path / "h.jsonl.zst")
    (tmp_path / "h.jsonl.zst").rename(path)
    assert read_history(path) == read_history(FIXTURE)


def _cut_in_its_last_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    from invariants.history import _validation

    monkeypatch.setattr(_validation, "_WRITE_BATCH", 3)
    path = tmp_path / "history.jsonl.zst"
    read_history(FIXTURE).write_jsonl(path)
    data = path.read_bytes()
    last = data.rfind(b"\x28\xb5\x2f\xfd")
    return path, data[: last + (len(data) - last) // 2]


def test_a_last_frame_cut_short_is_named_and_dropped_only_if_allowed(tmp_path, monkeypatch):
    path, cut = _cut_in_its_last_frame(tmp_path, monkeypatch)
    path.write_bytes(cut)
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == (
        f"{path}:28: the last zstd frame is cut short; the run that wrote it probably "
        "crashed mid-write. Pass allow_incomplete=True to check the lines before it."
    )
    history = read_history(path, allow_incomplete=True)
    assert list(history) == list(read_history(FIXTURE))[:27]
    assert history.defects == (
        "line 28: the last zstd frame is cut short; the run that wrote it probably crashed "
        "mid-write",
    )
    stream = HistoryStream(path, allow_incomplete=True)
    assert len(list(stream)) == 27
    assert stream.defects == history.defects


def test_a_file_that_is_not_zstd_after_its_magic_is_named(tmp_path):
    path = tmp_path / "history.jsonl.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"not a frame at all")
    with pytest.raises(HistoryError, match=r"history.jsonl.zst: the file starts as zstd but "
                                           r"does not decompress \(.+\)\. Compress histories"):
        read_history(path)


def _line(**changes: object) -> str:
    data = json.loads(_fixture_lines()[6])  # an ok read
    for name, value in changes.items():
        where = data
        *parents, last = name.split("__")
        for parent in parents:
            where = where[int(parent)] if isinstance(where, list) else where[parent]
        if value is KeyError:
            del where[last]
        else:
            where[last] = value
    return json.dumps(data)


_META = {"fact": "f", "slot": "s", "paraphrase": "none"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (_line(index=True), "field 'index' is True (type bool). It must be of type int."),
        (_line(worker=KeyError), "field 'worker' is missing. Every entry needs it."),
        (_line(type="okk"), "field 'type' is 'okk'. Use one of invoke, ok, fail, info."),
        (_line(f="reed"), "field 'f' is 'reed'. Use one of write, delete, restore, read."),
        (_line(f=KeyError), "field 'f' is missing. Every entry needs it."),
        (_line(op__namespace=None), "field 'op.namespace' is missing. Every entry needs it."),
        (_line(op=[1]), "field 'op' is list, not an object. Each history line must be one "
                        "JSON object as Entry.to_dict() writes it."),
        (_line(result=3), "field 'result' is int. Use null, an error string, an Ack object "
                          "or a list of records."),
        (_line(result__1__causal_seq="1"),
         "field 'result[1].causal_seq' is '1' (type str). It must be of type int."),
        (_line(result__0__version=KeyError),
         "field 'result[0].version' is missing. Every entry needs it."),
        (_line(meta={**_META, "paraphrase": "loose"}),
         "field 'meta.paraphrase' is 'loose'. Use one of none, surface, lexical, semantic."),
        (_line(meta={"fact": "f", "slot": "s"}),
         "field 'meta.paraphrase' is missing. Every entry needs it."),
        ("[1, 2]", "entry is list, not an object. Each history line must be one JSON object "
                   "as Entry.to_dict() writes it."),
        ("", "the line is empty. Each line must be one JSON object as HistoryRecorder "
             "writes it."),
        ('{"index": 1} trailing', "not valid JSON (trailing characters at byte 14). Each "
                                  "line must be one JSON object as HistoryRecorder writes it."),
    ],
)
def test_a_bad_line_is_named_with_its_field_and_fix(tmp_path, line, message):
    lines = _fixture_lines()
    lines[6] = line + "\n"
    path = tmp_path / "history.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == f"{path}:7: {message}"
    assert err.value.line == 7
    with pytest.raises(HistoryError) as streamed:
        list(HistoryStream(path))
    assert str(streamed.value) == str(err.value)
    if line.startswith("{") and "trailing" not in line:
        with pytest.raises(HistoryError) as from_dict:
            Entry.from_dict(json.loads(line))
        assert str(from_dict.value) == message


def test_a_completion_read_back_holds_its_invocations_own_payload(tmp_path):
    history = read_history(FIXTURE)
    for invocation, completion in history.pairs():
        assert completion is not None
        assert completion.op is invocation.op
        assert completion.meta is invocation.meta
    lines = _fixture_lines()
    changed = json.loads(lines[2])  # the completion of op 0
    changed["op"]["value"] = "something else"
    lines[2] = json.dumps(changed, ensure_ascii=False) + "\n"
    path = tmp_path / "history.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(HistoryError) as err:
        read_history(path)
    assert str(err.value) == (
        f"{path}:3: the completion does not repeat op 0's f, op and meta. Copy the "
        "invocation's f, op and meta into its completion."
    )


def test_a_stream_validates_as_it_goes_and_reads_again_from_the_start(tmp_path):
    lines = _fixture_lines()
    path = tmp_path / "history.jsonl"
    path.write_text("".join(lines[:9] + lines[10:]), encoding="utf-8")
    with pytest.raises(HistoryError, match=r"history.jsonl:10: index is 10, expected 9\."):
        list(HistoryStream(path))
    stream = HistoryStream(FIXTURE)
    assert list(stream) == list(stream) == list(read_history(FIXTURE))
    assert stream.defects == ()


def test_find_history_takes_either_form_the_newer_if_both(tmp_path):
    assert find_history(tmp_path) is None
    plain = tmp_path / "history.jsonl"
    read_history(FIXTURE).write_jsonl(plain)
    assert find_history(tmp_path) == plain
    compressed = tmp_path / "history.jsonl.zst"
    read_history(FIXTURE).write_jsonl(compressed)
    os.utime(plain, ns=(1, 1))
    assert find_history(tmp_path) == compressed
    os.utime(compressed, ns=(0, 0))
    assert find_history(tmp_path) == plain


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("history.jsonl", {"compress": True, "flush_interval_s": 0.1},
         "compress=True needs a path ending in .zst (got '{path}'), such as "
         "history.jsonl.zst"),
        ("history.jsonl.zst", {"compress": True},
         "compress=True needs flush_interval_s > 0: each flush ends a zstd frame, and a "
         "frame per line would not compress; pass flush_interval_s=0.1, say"),
        ("history.jsonl.zst", {},
         "path='{path}' ends in .zst but compress=False; pass compress=True to write it "
         "compressed, or a path without the suffix"),
    ],
)
def test_compress_must_agree_with_the_name_and_group_the_lines(tmp_path, name, options, message):
    path = tmp_path / name
    with pytest.raises(InvalidArgument) as err:
        HistoryRecorder(path, **options)
    assert str(err.value) == message.format(path=path)
    assert not path.exists()


_CRASHING_RUN = textwrap.dedent("""
    import sys, time
    from invariants.history import HistoryRecorder, Read
    recorder = HistoryRecorder(sys.argv[1], keep=False, flush_interval_s=0.1, compress=True)
    k = 0
    while True:
        r = recorder.invoke(k % 4, Read("ns", f"u{k}"))
        recorder.ok(r, [])
        k += 1
        if k % 20 == 0:
            print(len(recorder), time.monotonic_ns(), flush=True)
            time.sleep(0.001)
""")
_SLACK_S = 0.25
"""Beyond the 0.1 s promised, what a shared 2-core machine may keep the writer waiting."""


def test_a_killed_recorder_loses_at_most_its_last_interval_of_a_compressed_history(tmp_path):
    path = tmp_path / "history.jsonl.zst"
    child = subprocess.Popen([sys.executable, "-c", _CRASHING_RUN, str(path)], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    progress: list[tuple[int, int]] = []
    try:
        started = None  # when the child reported its first entries, having started up
        while started is None or time.monotonic() - started < 1.0:
            line = child.stdout.readline()
            assert line, "the recording child died"
            count, at = line.split()
            progress.append((int(count), int(at)))
            started = started or time.monotonic()
        killed_ns = time.monotonic_ns()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        progress.extend((int(c), int(t)) for c, t in map(str.split, child.stdout))
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    history = read_history(path, allow_incomplete=True)
    promised = max((count for count, at in progress
                    if at <= killed_ns - int((0.1 + _SLACK_S) * 1e9)), default=0)
    assert len(history) >= promised > 100
    assert all(entry.op == Read("ns", f"u{entry.index // 2}") for entry in history)
    assert [e.result for e in history if e.type == "ok"] == [()] * (len(history) // 2)
    assert history[-1].time_ns <= killed_ns
