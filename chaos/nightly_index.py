"""``index.html``: every night kept, opening with what changed since the previous one.

The page holds, in order: "since the previous night" (:mod:`chaos.nightly_changes`),
each invariant's rate across the nights on a dated axis, and the nights' table, newest
first, in a box of its own that scrolls sideways with the night column fixed. Its data
(``<script id="data">``) keeps what it read from every night's results.json, so that
nights compare from this one file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .nightly_changes import FEW_NIGHTS_SHARE, FLOOR_SHARE, MAD_FACTOR, WINDOW, Changes, changes
from .nightly_charts import TrendPoint, trend_chart
from .nightly_page import escape as _e
from .nightly_page import page, size_text
from .report import INVARIANTS, format_rate

__all__ = ["NIGHT_FORMAT", "by_count", "found_text", "night_time", "night_trend",
           "render_index"]

NIGHT_FORMAT = "%Y-%m-%dT%H%M%SZ"
RATE_UNIT = "failed checks per check"


def night_time(night: str) -> datetime:
    """When a night began, from its folder's name (``2026-11-29T020000Z``, ``...Z-2``)."""
    return datetime.strptime(re.sub(r"-\d+$", "", night), NIGHT_FORMAT).replace(tzinfo=UTC)


def by_count(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Causes by falling count; ties keep their order (CAUSES' own)."""
    return sorted(counts.items(), key=lambda item: -item[1])


def found_text(causes: Mapping[str, int]) -> str:
    """The causes found, most first: "alias 2,082, race 3"; "" when none."""
    return ", ".join(f"{cause} {n:,}" for cause, n in by_count(causes) if n)


def labels_text(labels: Mapping[str, str]) -> str:
    """A night's labels as a trend point's hover text gives them: "commit=abc, image=x"."""
    return ", ".join(f"{key}={value}" for key, value in labels.items())


def night_trend(night: str, results: Mapping[str, Any]) -> dict[str, Any]:
    """What the index keeps of one night's results.json: per invariant its verdict,
    rate and its two terms, violations, and violations per cause (its checkers'
    ``causes``, summed as the verdict table sums them; {} for a night from before
    causes were counted), and the night's labels ({} before labels were kept)."""
    checks = results.get("checks", {})
    invariants: dict[str, Any] = {}
    for name, v in results.get("invariants", {}).items():
        causes: dict[str, int] = {}
        for checker in INVARIANTS.get(name, ()):
            for cause, n in checks.get(checker, {}).get("causes", {}).items():
                causes[cause] = causes.get(cause, 0) + int(n)
        invariants[name] = {
            "verdict": v.get("verdict", ""), "rate": float(v.get("rate", 0.0)),
            "rate_numerator": int(v.get("rate_numerator", 0)),
            "rate_denominator": int(v.get("rate_denominator", v.get("checked", 0))),
            "violations": int(v.get("violations", 0)), "causes": causes}
    return {"night": night, "verdict": results.get("verdict", ""),
            "backend": results.get("backend", ""), "seed": results.get("seed"),
            "labels": dict(results.get("labels") or {}), "invariants": invariants}


def render_index(nights: Sequence[tuple[str, Mapping[str, Any]]], *, prefix: str,
                 history_bytes: int | None = None) -> str:
    """Every night kept, newest first, what changed since the previous night, and each
    invariant's rate across nights; the page's data holds each night's verdicts, rates,
    violations per cause and labels. ``history_bytes``, when given, is what the nights'
    histories take on disk."""
    invariants = list(dict.fromkeys(name for _, r in nights for name in r.get("invariants", {})))
    trends = [night_trend(night, results) for night, results in nights]
    since = changes(trends)
    charts = [_chart(name, trends) for name in invariants]
    body = ("<header><h1>memcert nights</h1>"
            f"<p>{len(nights)} night(s) kept in this folder"
            + (f"; their histories take {size_text(history_bytes)} on disk"
               if history_bytes is not None else "") + ".</p></header>"
            + _since(since, prefix)
            + "<h2>Rates across nights</h2>"
            f'<p class="note">Each point is a night, coloured by that invariant\'s verdict '
            f"(green pass, red fail, orange unknown); hover it for its causes and labels. "
            f"Rates are {RATE_UNIT}.</p>"
            f'<div class="charts">{"".join(charts)}</div>'
            "<h2>Nights</h2>" + _table(nights, trends, invariants, prefix))
    return page("memcert nights", body, data={"nights": trends, "since": since.to_dict()})


def _chart(name: str, trends: Sequence[Mapping[str, Any]]) -> str:
    points = []
    for trend in trends:
        saved = trend["invariants"].get(name)
        if saved is None:
            continue
        found = found_text(saved.get("causes", {}))
        labels = labels_text(trend.get("labels", {}))
        hover = (f"{trend['night']}: {format_rate(saved['rate'])}"
                 + (f" ({found})" if found else "") + (f"\nlabels: {labels}" if labels else ""))
        points.append(TrendPoint(night_time(trend["night"]), float(saved["rate"]),
                                 str(saved["verdict"]), hover, trend.get("labels", {})))
    return trend_chart(name, points, unit=RATE_UNIT)


def _since(since: Changes, prefix: str) -> str:
    """The index's opening section."""
    head = ('<section id="since" aria-labelledby="since-h"><h2 id="since-h">Since the '
            "previous night</h2>")
    if not since.previous:
        return head + "<p>The first night kept: nothing to compare yet.</p></section>"
    link = (f'<a href="{_e(prefix + since.night)}/report.html">{_e(since.night)}</a> against '
            f'<a href="{_e(prefix + since.previous)}/report.html">{_e(since.previous)}</a>')
    items = []
    for name, then, now in since.verdicts:
        items.append(f"<li><b>{_e(name)}</b>: verdict <b>{_e(then)}</b> → <b>{_e(now)}</b></li>")
    for name, cause, n in since.appeared:
        items.append(f'<li>new cause: <b>{_e(name)}</b> <a href="{_e(prefix + since.night)}/'
                     f'report.html#cause-{_e(cause)}">{_e(cause)}</a> ({n:,} violation(s))</li>')
    for name, cause, n in since.vanished:
        items.append(f"<li>cause gone: <b>{_e(name)}</b> {_e(cause)} (had {n:,} violation(s))"
                     "</li>")
    for rise in since.rises:
        items.append(f"<li>rate rose: <b>{_e(rise.invariant)}</b> {format_rate(rise.rate)}, "
                     f"beyond the {rise.nights} night(s) before: their median "
                     f"{format_rate(rise.baseline)}, noise {format_rate(rise.noise)}</li>")
    for key, was, became in since.labels:
        items.append(f"<li>label <code>{_e(key)}</code>: "
                     f"{_e(was) if was is not None else '(absent)'} → "
                     f"{_e(became) if became is not None else '(absent)'}</li>")
    body = ("<ul>" + "".join(items) + "</ul>" if items else
            "<p>Nothing changed: the same verdicts, the same causes, no rate beyond its "
            "noise, the same labels.</p>")
    uncounted = (f'<p class="note">Causes not compared for {_e(", ".join(since.uncounted))}: '
                 "one of the two nights did not count them.</p>" if since.uncounted else "")
    rule = (f'<p class="note">A rate rose when it exceeds the median of up to {WINDOW} '
            f"nights before by more than their noise: {MAD_FACTOR:g} × the scaled median "
            f"absolute deviation, at least {FLOOR_SHARE:g} × the median "
            f"({FEW_NIGHTS_SHARE:g} × with fewer than 3 nights before); see docs/nightly.md."
            "</p>")
    return f"{head}<p>{link}</p>{body}{uncounted}{rule}</section>"


def _table(nights: Sequence[tuple[str, Mapping[str, Any]]],
           trends: Sequence[Mapping[str, Any]], invariants: Sequence[str], prefix: str) -> str:
    rows = ['<div class="scroll" tabindex="0" role="region" aria-label="every night kept">'
            "<table><tr><th>night</th><th>verdict</th><th>backend</th><th>seed</th>"
            "<th>took</th><th>labels</th>" + "".join(f"<th>{_e(n)}</th>" for n in invariants)
            + "<th>causes found</th></tr>"]
    for (night, results), trend in zip(reversed(nights), reversed(trends), strict=True):
        cells = "".join(
            f'<td class="{_e(trend["invariants"].get(n, {}).get("verdict", ""))}">'
            f'{format_rate(float(trend["invariants"].get(n, {}).get("rate", 0.0)))}</td>'
            for n in invariants)
        found = "; ".join(f"{n}: {found_text(t['causes'])}"
                          for n, t in trend["invariants"].items() if found_text(t["causes"]))
        cells += f"<td>{_e(found)}</td>"
        labels = "".join(f"<code>{_e(k)}={_e(v)}</code> " for k, v in trend["labels"].items())
        rows.append(f'<tr class="{_e(results.get("verdict", ""))}">'
                    f'<td><a href="{_e(prefix + night)}/report.html">{_e(night)}</a></td>'
                    f'<td>{_e(results.get("verdict", ""))}</td>'
                    f'<td>{_e(results.get("backend", ""))}</td>'
                    f'<td>{_e(str(results.get("seed", "")))}</td>'
                    f'<td class="took">{float(results.get("elapsed_s", 0.0)):.0f} s</td>'
                    f'<td class="labels">{labels.strip()}</td>{cells}</tr>')
    rows.append("</table></div>")
    return "\n".join(rows)
