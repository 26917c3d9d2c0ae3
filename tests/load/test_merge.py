"""Merging workers' histories: one timeline, indices dense again, every pair intact."""

from __future__ import annotations

import itertools
from pathlib import Path

from chaos.load_merge import Clocks, Merger, merge_files, to_local
from invariants.backend import Ack, Record, Write
from invariants.history import Entry, HistoryRecorder, Read, WriteMeta


def _write(n: int) -> Write:
    return Write("ns", "e1", "city", f"lives in city-t{n}", n, f"op{n}")


def _record_two_workers(tmp_path: Path) -> list[Path]:
    """Workers 0 and 1_000_000 in two files, stamped by one clock, their ops interleaved."""
    ticks = itertools.count(100, 10)
    paths = [tmp_path / "worker-0.jsonl", tmp_path / "worker-1.jsonl"]
    a = HistoryRecorder(paths[0], clock=lambda: next(ticks))
    b = HistoryRecorder(paths[1], clock=lambda: next(ticks))
    meta = WriteMeta("f1", "city")
    w = a.invoke(0, _write(1), meta=meta)                   # t=100
    r = b.invoke(1_000_000, Read("ns", "e1"))               # t=110
    a.ok(w, Ack(True, 1, None))                             # t=120
    b.ok(r, [Record("e1", "city", "lives in city-t1", 1, 1)])  # t=130
    w2 = b.invoke(1_000_000, _write(2), meta=WriteMeta("f2", "city"))  # t=140
    b.info(w2, TimeoutError("no answer"))                    # t=150
    a.close()
    b.close()
    return paths


def test_merged_histories_are_ordered_by_time_and_indexed_from_zero(tmp_path: Path):
    merged = merge_files(_record_two_workers(tmp_path))

    assert [e.index for e in merged] == list(range(6))
    assert [e.time_ns for e in merged] == [100, 110, 120, 130, 140, 150]
    assert [(e.worker, e.type, e.f) for e in merged] == [
        (0, "invoke", "write"), (1_000_000, "invoke", "read"), (0, "ok", "write"),
        (1_000_000, "ok", "read"), (1_000_000, "invoke", "write"), (1_000_000, "info", "write")]
    completion = merged.partner(0)
    assert completion is not None and completion.index == 2
    assert merged.partner(4) is merged[5]
    assert merged.defects == ()


def test_a_worker_cut_short_is_merged_and_its_damage_reported(tmp_path: Path):
    paths = _record_two_workers(tmp_path)
    text = paths[1].read_text()
    paths[1].write_text(text[: text.rindex("\n", 0, len(text) - 1) + 1] + '{"index": 3, "wor')

    merged = merge_files(paths)

    assert len(merged) == 5
    assert merged.partner(4) is None, "the write whose completion was lost stays open"
    assert merged.defects == (f"{paths[1]}: line 4: the last line is cut short "
                              "('{\"index\": 3, \"wor'); the run that wrote it probably "
                              "crashed mid-write",)


def _entry(index: int, worker: int, time_ns: int) -> Entry:
    return Entry(index, worker, time_ns, "invoke", "read", Read("ns", f"e{worker}"))


def test_the_live_merge_waits_for_every_open_source():
    merger = Merger()
    merger.open(1)
    merger.add(0, [_entry(0, 0, 10), _entry(1, 0, 50)], mark_ns=60)
    assert merger.ready() == [], "source 1 has said nothing yet: it may still send t < 60"

    merger.add(1, [_entry(0, 1, 30)], mark_ns=40)
    assert [(e.index, e.worker, e.time_ns) for e in merger.ready()] == [(0, 0, 10), (1, 1, 30)]

    merger.add(1, [], mark_ns=45, done=True)
    assert [(e.index, e.time_ns) for e in merger.ready()] == [(2, 50)]
    assert merger.drain() == []
    assert merger.merged == 3


def test_a_stamp_from_another_machine_moves_through_wall_time():
    here = Clocks("a", "boot-a", offset_ns=1_000)
    same_machine = Clocks("b", "boot-a", offset_ns=1_003)
    elsewhere = Clocks("c", "boot-c", offset_ns=5_000)

    assert to_local(700, same_machine, here) == 700
    assert to_local(700, elsewhere, here) == 4_700
