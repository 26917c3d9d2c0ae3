"""Read the dashboard and the rules files, and take PromQL expressions apart.

No YAML library is needed: the rule files are read for the few keys these tests look
at, line by line, and promtool parses them for real.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "dashboards" / "memcert.json"
RULES = REPO / "dashboards" / "prometheus" / "memcert.rules.yml"
RULE_TESTS = REPO / "dashboards" / "prometheus" / "memcert.rules.test.yml"

CHAOS = '{source!="guard"}'
GUARD = '{source="guard"}'
"""The selectors that keep chaos runs' series and the production guard's apart: the
guard's carry source="guard", chaos runs' no source label at all."""

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
             "or", "unless", "offset", "inf", "nan", "atan2"}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(board: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included."""
    for panel in (board or dashboard())["panels"]:
        yield panel
        yield from panel.get("panels", ())


def panel_targets() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for panel in panels():
        for target in panel.get("targets", ()):
            yield panel, target


def annotations() -> list[dict[str, Any]]:
    """The dashboard's Prometheus annotations (Grafana's built-in one left out)."""
    return [a for a in dashboard()["annotations"]["list"] if not a.get("builtIn")]


def substitute(expr: str, *, backend: str = ".*", scenario: str = ".*", cause: str = ".*",
               interval: str = "1m", range_: str = "1h") -> str:
    """The expression Grafana would send, for given variable values."""
    return (expr.replace("$__rate_interval", interval).replace("$__range", range_)
            .replace("${backend}", backend).replace("$backend", backend)
            .replace("${scenario}", scenario).replace("$scenario", scenario)
            .replace("${cause}", cause).replace("$cause", cause))


def metric_names(expr: str) -> set[str]:
    """The metric and recording-rule names an expression selects."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        name = match.group(0)
        rest = text[match.end():].lstrip()
        if rest.startswith("(") or name.lower() in _KEYWORDS:
            continue
        before = text[:match.start()]
        if before and (before[-1].isdigit() or before[-1] == "."):
            continue  # the unit of a duration or a number, like the "e" of 1e3
        names.add(name)
    return names


def recording_rules() -> dict[str, str]:
    """Each recording rule's name and expression."""
    return dict(re.findall(r"- record: (\S+)\n\s+expr: (.+)", RULES.read_text()))


def alerts() -> dict[str, str]:
    """Each alert's name and its whole block of text."""
    text = RULES.read_text()
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"- alert: (\S+)", text)]
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return {name: text[start:end] for (start, name), end in zip(starts, ends, strict=True)}


def alert_expr(block: str) -> str:
    match = re.search(r"expr: (.+)", block)
    assert match is not None
    return match.group(1)
