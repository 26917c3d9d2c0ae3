"""The guard benchmark's machinery at a tiny size: every way runs the same operations and
the table has every row. No timing is asserted: the figures are the benchmark's."""

from __future__ import annotations

import pytest

from benchmarks import guard as bench
from benchmarks.__main__ import main as benchmarks_main
from chaos.examples import InMemoryBackend, SharedFactory


def test_every_way_runs_the_same_mix_and_reports_a_ratio(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    ops = bench.mix(200)
    assert ops == bench.mix(200)  # seeded: the same in every way and round
    kinds = {kind for kind, *_ in ops}
    assert kinds == {"write", "read", "delete", "restore"}
    ways = bench.measure(lambda: SharedFactory(InMemoryBackend)(), ops, rounds=2)
    assert [w.name for w in ways] == [w.name for w in bench.WAYS]
    assert all(len(w.seconds) == 2 and min(w.seconds) > 0 for w in ways)
    found = bench.report("tiny", ways, len(ops))
    assert set(found) == {w.name for w in bench.WAYS[1:]}
    out = capsys.readouterr().out
    assert "| unguarded |" in out and "| guard, sample=0.01 |" in out


def test_make_bench_runs_it_with_its_own_options(capsys: pytest.CaptureFixture[str]) -> None:
    benchmarks_main(["--no-header", "guard", "--rounds", "1", "--ops", "40"])
    out = capsys.readouterr().out
    assert "## Production guard overhead" in out
    assert "Target: overhead <= 5% at sample=0.01 on the reference store:" in out
    assert out.count("| guard, sample=1.0, assertion mode |") == 2
