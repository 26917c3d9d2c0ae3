"""Latency bookkeeping shared by the benchmarks."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    """Per-operation latencies of one run, in seconds."""

    name: str
    latencies: list[float]

    @property
    def ops_per_second(self) -> float:
        return len(self.latencies) / sum(self.latencies)

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def row(self) -> str:
        return (f"| {self.name} | {self.ops_per_second:,.0f} | {self.percentile(50) * 1e6:,.0f} "
                f"| {self.percentile(99) * 1e6:,.0f} |")


def best(samples: list[Sample]) -> Sample:
    """The run with the median throughput, so one lucky or unlucky run does not decide."""
    by_rate = sorted(samples, key=lambda s: s.ops_per_second)
    return by_rate[len(by_rate) // 2]


def paired_ratio(samples: list[Sample], baselines: list[Sample]) -> float:
    """The median over rounds of a run's throughput over its baseline's in that round.

    Pairing by round cancels what the host did during the round (another process's
    fsyncs, a throttled CPU); dividing two medians picked from different rounds does not.
    """
    return median([sample.ops_per_second / baseline.ops_per_second
                   for sample, baseline in zip(samples, baselines, strict=True)])


def median(values: list[float]) -> float:
    return statistics.median(values)
