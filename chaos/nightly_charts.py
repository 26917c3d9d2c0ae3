"""The nightly pages' SVG charts: every one with labelled axes, in its units.

Each chart is inline SVG (no script, no library), ``role="img"`` with a label saying
what it plots, and each mark carries a ``<title>`` that a browser shows on hover.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .nightly_page import VERDICT_COLOURS, duration_text
from .nightly_page import escape as _e
from .report import format_rate

__all__ = ["DATE_TICKS", "TrendPoint", "bar_chart", "latency_chart", "trend_chart"]

DATE_TICKS = 6
"""Dates a trend chart's time axis names at most."""


def bar_chart(bars: Sequence[tuple[str, float]], *, title: str, unit: str) -> str:
    """One bar per name, its value written beside it; the x-axis is in ``unit``."""
    width, row, label, right = 420, 18, 170, 70
    top = max((value for _, value in bars), default=0.0) or 1.0
    plot = width - label - right
    floor = 20 + row * len(bars)
    height = floor + 34
    parts = [f'<svg class="chart bars" width="{width}" height="{height}" role="img" '
             f'aria-label="{_e(title)}, in {_e(unit)}"><text x="0" y="12" class="t">'
             f"{_e(title)}</text>"]
    for i, (name, value) in enumerate(bars):
        y = 20 + i * row
        length = plot * value / top
        text = format_rate(value)
        parts.append(f'<text x="0" y="{y + 12}">{_e(name)}</text>'
                     f'<rect x="{label}" y="{y + 2}" width="{length:.1f}" height="{row - 5}" '
                     f'class="{"bad" if value else "zero"}"><title>{_e(name)}: {_e(text)}'
                     "</title></rect>"
                     f'<text x="{label + length + 4:.1f}" y="{y + 12}">{text}</text>')
    highest = max((value for _, value in bars), default=0.0)
    parts.append(f'<line x1="{label}" y1="{floor}" x2="{label + plot}" y2="{floor}" '
                 f'class="axis"/><text x="{label}" y="{floor + 12}" class="tick">0</text>'
                 f'<text x="{label + plot}" y="{floor + 12}" class="tick" '
                 f'text-anchor="end">{format_rate(highest) if highest else "1"}</text>'
                 f'<text x="{label + plot / 2:.0f}" y="{floor + 28}" text-anchor="middle">'
                 f"{_e(unit)}</text></svg>")
    return "".join(parts)


def latency_chart(latency: Mapping[str, Sequence[int]], bounds: Sequence[float]) -> str:
    """Operations per latency bucket, one line per op: x the bucket's upper bound in
    seconds, y the operations in it on a log scale, with its decades as ticks."""
    width, height, left, bottom, top_pad = 420, 200, 52, 58, 22
    labels = [duration_text(b) for b in bounds] + ["more"]
    top = max((c for counts in latency.values() for c in counts), default=0)
    decades = max(1, math.ceil(math.log10(top + 1)))
    plot_h = height - bottom - top_pad
    floor = height - bottom
    step = (width - left - 10) / max(1, len(labels) - 1)

    def y_of(count: float) -> float:
        return floor - plot_h * math.log10(count + 1) / decades

    parts = [f'<svg class="chart latency" width="{width}" height="{height}" role="img" '
             'aria-label="latency distribution: operations per latency bucket, by op">'
             '<text x="0" y="12" class="t">latency: operations per bucket, by op</text>',
             f'<line x1="{left}" y1="{floor}" x2="{width - 10}" y2="{floor}" class="axis"/>'
             f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{floor}" class="axis"/>']
    for decade in range(decades + 1):
        count = 10 ** decade - 1 if decade else 0
        y = y_of(count)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" '
                     f'class="grid"/><text x="{left - 4}" y="{y + 4:.1f}" class="tick" '
                     f'text-anchor="end">{_count(10 ** decade if decade else 0)}</text>')
    parts.append(f'<text x="10" y="{top_pad + plot_h / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 10 {top_pad + plot_h / 2:.0f})">operations '
                 "(log)</text>")
    for i, text in enumerate(labels):
        if i % 2 == 0:
            parts.append(f'<text x="{left + i * step:.1f}" y="{floor + 14}" '
                         f'class="tick" text-anchor="middle">{text}</text>')
    parts.append(f'<text x="{left + (width - left - 10) / 2:.0f}" y="{floor + 30}" '
                 'text-anchor="middle">latency (upper bound of each bucket)</text>')
    palette = ("#3182bd", "#6a51a3", "#31a354", "#e6550d")
    for k, (op, counts) in enumerate(sorted(latency.items())):
        points = " ".join(f"{left + i * step:.1f},{y_of(c):.1f}" for i, c in enumerate(counts))
        colour = palette[k % len(palette)]
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                     f'stroke-width="2"><title>{_e(op)}: {sum(counts):,} operations'
                     "</title></polyline>"
                     f'<text x="{left + 70 * k}" y="{height - 6}" fill="{colour}">'
                     f"{_e(op)} ({sum(counts):,})</text>")
    parts.append("</svg>")
    return "".join(parts)


def _count(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


@dataclass(frozen=True)
class TrendPoint:
    """One night on a trend chart: when it ran, its rate, its verdict and what hover says."""

    at: datetime
    rate: float
    verdict: str
    hover: str
    labels: Mapping[str, str] = field(default_factory=dict)


def trend_chart(name: str, points: Sequence[TrendPoint], *, unit: str) -> str:
    """A rate across nights: x the nights' dates, y the rate in ``unit``; each point is
    coloured by its night's verdict for the invariant, and says on hover its night,
    rate, causes and labels."""
    width, height, left, bottom, top_pad, right = 380, 210, 66, 46, 24, 30
    plot_w, floor = width - left - right, height - bottom
    plot_h = floor - top_pad
    highest = max((p.rate for p in points), default=0.0)
    top = highest or 1.0
    times = [p.at.timestamp() for p in points]
    start, end = (min(times), max(times)) if times else (0.0, 0.0)
    span = end - start

    def x_of(t: float) -> float:
        return left + (plot_w * (t - start) / span if span else plot_w / 2)

    def y_of(v: float) -> float:
        return floor - plot_h * v / top

    parts = [f'<svg class="chart nights" width="{width}" height="{height}" role="img" '
             f'aria-label="{_e(name)} rate across nights, in {_e(unit)}">'
             f'<text x="0" y="12" class="t">{_e(name)}</text>'
             f'<line x1="{left}" y1="{floor}" x2="{left + plot_w}" y2="{floor}" class="axis"/>'
             f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{floor}" class="axis"/>'
             f'<text x="{left - 4}" y="{floor + 4}" class="tick" text-anchor="end">0</text>'
             f'<text x="{left - 4}" y="{top_pad + 4}" class="tick" text-anchor="end">'
             f'{format_rate(highest) if highest else "1"}</text>'
             f'<text x="12" y="{top_pad + plot_h / 2:.0f}" text-anchor="middle" '
             f'transform="rotate(-90 12 {top_pad + plot_h / 2:.0f})">{_e(unit)}</text>']
    for t in _date_ticks(times):
        x = x_of(t)
        parts.append(f'<line x1="{x:.1f}" y1="{floor}" x2="{x:.1f}" y2="{floor + 4}" '
                     f'class="axis"/><text x="{x:.1f}" y="{floor + 15}" class="tick" '
                     f'text-anchor="middle">{datetime.fromtimestamp(t, UTC).strftime("%b %d")}'
                     "</text>")
    parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{floor + 32}" text-anchor="middle">'
                 "night (UTC date it began)</text>")
    if len(points) > 1:
        line = " ".join(f"{x_of(t):.1f},{y_of(p.rate):.1f}"
                        for t, p in zip(times, points, strict=True))
        parts.append(f'<polyline points="{line}" fill="none" stroke="#888"/>')
    for t, p in zip(times, points, strict=True):
        parts.append(f'<circle cx="{x_of(t):.1f}" cy="{y_of(p.rate):.1f}" r="4" '
                     f'fill="{VERDICT_COLOURS.get(p.verdict, "#555")}" class="{_e(p.verdict)}">'
                     f"<title>{_e(p.hover)}</title></circle>")
    parts.append("</svg>")
    return "".join(parts)


def _date_ticks(times: Sequence[float]) -> list[float]:
    """The nights' own times, at most :data:`DATE_TICKS` of them evenly picked and one per
    date: each tick then sits under a point and names its night's date."""
    stride = max(1, math.ceil(len(times) / DATE_TICKS))
    ticks: dict[str, float] = {}
    for t in list(times)[::stride]:
        ticks.setdefault(datetime.fromtimestamp(t, UTC).strftime("%b %d"), t)
    return list(ticks.values())
