"""The history benchmark's machinery at a tiny size: a real certify run, scaled into fresh
namespaces, replays to the same verdict, and the benchmark prints every column.

No timing is asserted: the figures are the benchmark's to report, not the test's.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from benchmarks import history as bench
from benchmarks.__main__ import main as benchmarks_main
from benchmarks.scaled_history import (
    COMPRESSED,
    PLAIN,
    Prepared,
    prepare,
    quiescent_points,
    real_run,
    renamed,
)
from chaos.certify import replay
from invariants.history import History, read_history

pytestmark = pytest.mark.slow

BUDGET_S = 3.0


def _quiet(line: str) -> None:
    """Progress lines are for a person watching the benchmark, not for the test."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history-bench")
    real_run(folder / "real", budget_s=BUDGET_S, seed=bench.REAL_SEED, say=_quiet)
    return folder


@pytest.fixture(scope="module")
def source(data: Path) -> History:
    return read_history(data / "real" / PLAIN)


def _sizes(source: History) -> tuple[int, int]:
    """The run's length, and a size of two whole copies and a prefix cut short."""
    points = quiescent_points(source)
    whole = max(points)
    return whole, 2 * whole + max(p for p in points if p < whole)


def _copies(history: History) -> dict[int, list[int]]:
    """Copy number -> the positions of its entries, by the suffix of their namespace."""
    copies: dict[int, list[int]] = {}
    for position, entry in enumerate(history):
        base, sep, k = entry.op.namespace.rpartition("~")
        assert sep and base and k.isdigit(), entry.op.namespace
        copies.setdefault(int(k), []).append(position)
    return copies


def test_the_scaled_history_is_the_run_copied_into_fresh_namespaces(data, source):
    whole, ops = _sizes(source)
    prepared = prepare(data, data / "real", ops, plain=True, say=_quiet)
    assert prepared.plain is not None
    scaled = read_history(prepared.zst / COMPRESSED)
    assert read_history(prepared.plain / PLAIN) == scaled
    assert prepared.scaled.plain_bytes == (prepared.plain / PLAIN).stat().st_size
    assert sum(1 for e in scaled if e.type == "invoke") == prepared.scaled.ops == ops
    assert len(scaled) == prepared.scaled.entries == 2 * ops

    copies = _copies(scaled)
    assert sorted(copies) == [0, 1, 2]
    for k, positions in copies.items():
        assert positions == list(range(positions[0], positions[-1] + 1))  # one after another
        suffix = f"~{k}"
        original = source.entries[:len(positions)]
        assert [(e.worker, e.type, e.f, renamed(e.op, suffix), e.result, e.meta)
                for e in original] == [(e.worker, e.type, e.f, e.op, e.result, e.meta)
                                       for e in (scaled[p] for p in positions)]
        times = [scaled[p].time_ns for p in positions]
        assert [t - times[0] for t in times] == [e.time_ns - original[0].time_ns
                                                 for e in original]
    assert [len(copies[k]) // 2 for k in range(3)] == [whole, whole, ops - 2 * whole]
    assert max(scaled[p].time_ns for p in copies[0]) < min(scaled[p].time_ns for p in copies[1])
    op_ids = [e.op.op_id for e in scaled if e.type == "invoke" and hasattr(e.op, "op_id")]
    assert len(set(op_ids)) == len(op_ids)


def _verdicts(folder: Path) -> tuple[str, dict[str, str], dict[str, int]]:
    report = replay(folder)
    return (report.verdict, {n: c.validity.value for n, c in report.checks.items()},
            {n: c.checked for n, c in report.checks.items()})


def test_copying_into_fresh_namespaces_keeps_the_verdict_and_sums_the_counts(data, source):
    """Every count doubles with two copies but isolation's: its checks are reads of an
    entity id that another namespace holds too, and each copy's namespaces hold the ids of
    the other's."""
    whole, ops = _sizes(source)
    verdict, validity, checked = _verdicts(data / "real")
    twice: Prepared = prepare(data, data / "real", 2 * whole, plain=True, say=_quiet)
    assert twice.plain is not None
    for folder in (twice.zst, twice.plain):
        scaled_verdict, scaled_validity, scaled_checked = _verdicts(folder)
        assert (scaled_verdict, scaled_validity) == (verdict, validity)
        assert scaled_checked.pop("isolation") >= 2 * checked["isolation"]
        assert scaled_checked == {n: 2 * c for n, c in checked.items() if n != "isolation"}
    cut = prepare(data, data / "real", ops, plain=False, say=_quiet)
    assert _verdicts(cut.zst)[:2] == (verdict, validity)


def test_the_benchmark_prints_every_column_and_the_same_verdict(data, source, capsys):
    _, ops = _sizes(source)
    figures = bench.run((ops,), data=data, real_budget_s=BUDGET_S)
    out = capsys.readouterr().out
    for header in (
        "| ops | entries | copies | generate s | plain MB | zst MB | plain / zst |",
        "| ops | file | run | wall s | CPU s | ops/s | peak RSS MB | start MB | / decode |",
        "| ops | read whole s | RSS after read MB | check s | check CPU s | check ops/s "
        "| peak RSS MB |",
    ):
        assert header in out
    rows = {tuple(cell.strip() for cell in line.split("|")[2:4])
            for line in out.splitlines() if line.startswith(f"| {ops:,} |")}
    assert {("plain", "decode"), ("plain", "replay"), ("zst", "decode"),
            ("zst", "replay")} <= rows
    assert "of every scaled history: the same." in out
    assert "- compressed <= 1/5 of plain" in out
    assert {f"{kind}_{name}_s_{ops}" for kind in ("decode", "replay")
            for name in ("plain", "zst")} | {f"check_ops_per_s_{ops}"} <= set(figures)
    assert max(len(line) for line in out.splitlines()) <= 100


def test_sizes_are_read_as_people_write_them():
    assert bench.parse_sizes("100k,1M,10M") == (100_000, 1_000_000, 10_000_000)
    assert bench.parse_sizes("2500, 1.5M") == (2_500, 1_500_000)
    with pytest.raises(argparse.ArgumentTypeError, match="'lots' is not a number of op"):
        bench.parse_sizes("lots")


def test_python_m_benchmarks_passes_history_its_options_and_no_other(capsys):
    with pytest.raises(SystemExit) as exited:
        benchmarks_main(["history", "--sizes", "lots"])
    assert exited.value.code == 2
    assert ("python -m benchmarks history: error: argument --sizes: 'lots' is not a number "
            "of operations; write 100k, 1M or 2500") in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        benchmarks_main(["checkers", "--sizes", "1M"])
    assert exited.value.code == 2
    assert ("error: unrecognized arguments: --sizes 1M; only history and guard take options, "
            "after the name, alone") in capsys.readouterr().err


def test_a_scaled_history_is_reused_until_the_real_run_is_recorded_again(data, source):
    whole, _ = _sizes(source)
    said: list[str] = []
    first = prepare(data, data / "real", whole, plain=False, say=said.append)
    again = prepare(data, data / "real", whole, plain=False, say=said.append)
    assert again == first
    assert said[-1] == f"{whole:,} operations: reusing {data / f'scaled-{whole}'}"
    history = data / "real" / PLAIN
    stat = history.stat()
    os.utime(history, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    before = len(said)
    prepare(data, data / "real", whole, plain=False, say=said.append)
    assert said[before] == (f"{whole:,} operations: generating "
                            f"{data / f'scaled-{whole}' / 'zst' / COMPRESSED}")
