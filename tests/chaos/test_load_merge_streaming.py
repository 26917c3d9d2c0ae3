"""The streamed merge of workers' histories writes the very bytes the in-memory merge
wrote, on worker files recorded from a real run, whole or cut short."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.certify import CertifyOptions, certify
from chaos.load_merge import MergeResult, merge_files, merge_into
from invariants.backend import Ack, Write
from invariants.history import (
    Entry,
    History,
    HistoryError,
    HistoryRecorder,
    WriteMeta,
    find_history,
    read_history,
)


@pytest.fixture(scope="module")
def real_history(tmp_path_factory: pytest.TempPathFactory) -> History:
    """The history of a short certify run: many workers, every op kind and outcome."""
    out = tmp_path_factory.mktemp("certify") / "out"
    certify("chaos.examples:last_arrival_wins", CertifyOptions(
        budget_s=2.0, seed=20261202, out=out, stateful_share=0.0))
    path = find_history(out)
    assert path is not None
    return read_history(path)


def record_workers(history: History, folder: Path, files: int) -> list[Path]:
    """The run's entries split by worker into ``files`` worker files, each recorded as
    a load worker records its own: its own recorder, indices from 0, the run's stamps."""
    paths = [folder / f"worker-{n}.jsonl" for n in range(files)]
    parts: list[list[Entry]] = [[] for _ in paths]
    for entry in history:
        parts[entry.worker % files].append(entry)
    for path, part in zip(paths, parts, strict=True):
        stamps = iter(entry.time_ns for entry in part)
        flying: dict[int, Entry] = {}
        with HistoryRecorder(path, keep=False, clock=lambda s=stamps: next(s)) as recorder:
            for entry in part:
                if entry.type == "invoke":
                    flying[entry.worker] = recorder.invoke(entry.worker, entry.op,
                                                           meta=entry.meta)
                else:
                    complete = getattr(recorder, entry.type)
                    complete(flying.pop(entry.worker), entry.result)
    return paths


def merged_in_memory(paths: list[Path], out: Path) -> History:
    merged = merge_files(paths)
    merged.write_jsonl(out)
    return merged


def test_the_streamed_merge_writes_what_the_whole_merge_wrote(real_history, tmp_path):
    paths = record_workers(real_history, tmp_path, files=3)
    expected = merged_in_memory(paths, tmp_path / "whole.jsonl")

    result = merge_into(paths, tmp_path / "history.jsonl")

    assert (tmp_path / "history.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert result == MergeResult(len(expected), ())
    assert len(expected) == len(real_history)
    assert [e.time_ns for e in read_history(tmp_path / "history.jsonl")] == [
        e.time_ns for e in real_history]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "history.jsonl", "whole.jsonl", "worker-0.jsonl", "worker-1.jsonl", "worker-2.jsonl"]


def test_a_worker_cut_short_merges_the_same_with_the_same_defects(real_history, tmp_path):
    paths = record_workers(real_history, tmp_path, files=2)
    data = paths[1].read_bytes()
    lines = data.splitlines(keepends=True)
    cut = next(n for n in range(len(lines) // 2, len(lines)) if b'"type":"ok"' in lines[n])
    # A completion cut 30 bytes in: its operation is left in flight.
    paths[1].write_bytes(b"".join(lines[:cut]) + lines[cut][:30])
    expected = merged_in_memory(paths, tmp_path / "whole.jsonl")
    assert len(expected.defects) == 1 and "the last line is cut short" in expected.defects[0]

    result = merge_into(paths, tmp_path / "history.jsonl")

    assert (tmp_path / "history.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    assert result == MergeResult(len(expected), expected.defects)
    assert any(completion is None for _, completion in
               read_history(tmp_path / "history.jsonl", allow_incomplete=True).pairs())


def test_a_compressed_merge_holds_the_same_lines(real_history, tmp_path):
    paths = record_workers(real_history, tmp_path, files=3)
    expected = merged_in_memory(paths, tmp_path / "whole.jsonl")

    result = merge_into(paths, tmp_path / "history.jsonl.zst")

    assert (tmp_path / "history.jsonl.zst").read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    assert read_history(tmp_path / "history.jsonl.zst") == expected
    assert result.entries == len(expected)


def test_one_worker_id_in_two_files_is_refused_and_leaves_no_history(tmp_path):
    paths = [tmp_path / "worker-0.jsonl", tmp_path / "worker-1.jsonl"]
    for path, stamps in zip(paths, ([100, 120], [105, 125]), strict=True):
        with HistoryRecorder(path, clock=iter(stamps).__next__) as recorder:
            write = Write("ns", "e1", "city", f"in {path.stem}", 1, f"op-{path.stem}")
            recorder.ok(recorder.invoke(7, write, meta=WriteMeta("f1", "city")), Ack(True))
    refused = "worker 7 invokes while its op 0 is outstanding"
    with pytest.raises(HistoryError, match=refused):
        merge_files(paths)

    with pytest.raises(HistoryError, match=refused):
        merge_into(paths, tmp_path / "history.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker-0.jsonl", "worker-1.jsonl"]


def test_entries_stamped_alike_in_two_files_merge_in_file_order(tmp_path):
    """Two workers' entries with one stamp and one position: the first file's first."""
    paths = [tmp_path / "worker-0.jsonl", tmp_path / "worker-1.jsonl"]
    for worker, path in enumerate(paths):
        with HistoryRecorder(path, clock=iter([100, 200]).__next__) as recorder:
            write = Write("ns", "e1", "city", f"by {worker}", 1, f"op-{worker}")
            recorder.ok(recorder.invoke(worker, write, meta=WriteMeta("f1", "city")), Ack(True))
    expected = merged_in_memory(paths, tmp_path / "whole.jsonl")
    assert [(e.worker, e.type) for e in expected] == [
        (0, "invoke"), (1, "invoke"), (0, "ok"), (1, "ok")]

    assert merge_into(paths, tmp_path / "history.jsonl") == MergeResult(4, ())
    assert (tmp_path / "history.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
