"""A suite: named scenarios run one after another, each with a share of the budget."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from invariants.wording.values import DEFAULT_VALUE_BYTES

from ._errors import MISSING, ScenarioError, did_you_mean
from ._files import find, names_in, read_table, reject_unknown, require_str
from ._scenario import SCENARIO_DIR, Scenario, load_scenario
from ._service import service
from .plan import Plan
from .service_plan import Service

__all__ = ["SUITE_DIR", "Suite", "SuiteEntry", "list_suites", "load_suite"]

SUITE_DIR = Path(__file__).parent / "suites"
_FIELDS = ("description", "budget_s", "scenarios", "service")
_ENTRY_FIELDS = ("name", "share", "scale")


@dataclass(frozen=True)
class SuiteEntry:
    """One scenario of a suite: its share of the suite's budget, and its scale."""

    scenario: Scenario
    share: float
    scale: float

    def budget_s(self, total_s: float) -> float:
        """This scenario's time out of a run's ``total_s`` seconds."""
        return self.share * total_s


@dataclass(frozen=True)
class Suite:
    """Scenarios to run in order. ``budget_s`` is the suite's own time budget, used
    when the caller gives none; the shares of the entries sum to 1."""

    name: str
    description: str
    budget_s: float
    entries: tuple[SuiteEntry, ...]
    path: Path
    service: Service | None = None
    """How memcert starts the user's service: the suite's ``[service]`` table, or else
    the first of its scenarios that has one."""

    def plans(self, *, seed: int, workers: int, level: str, scale: float = 1.0,
              max_value_bytes: int = DEFAULT_VALUE_BYTES) -> tuple[Plan, ...]:
        """One plan per entry, in order, each at the entry's scale times ``scale``."""
        return tuple(
            entry.scenario.plan(seed=seed, workers=workers, level=level,
                                scale=entry.scale * scale, max_value_bytes=max_value_bytes)
            for entry in self.entries
        )


def load_suite(name_or_path: str | os.PathLike[str]) -> Suite:
    """Load and check a suite: a name from :func:`list_suites`, or a file's path.

    An entry's ``name`` is a scenario name, or a ``.toml`` path relative to the suite.
    """
    path = find(name_or_path, SUITE_DIR, "suite")
    table = read_table(path)
    reject_unknown(path, table, "", _FIELDS, "a suite")
    description = require_str(path, table, "description", 'description = "What it is for."')
    budget = table.get("budget_s", MISSING)
    if budget is MISSING:
        raise ScenarioError(path, "budget_s", MISSING, "is missing",
                            "Add the suite's time budget in seconds, e.g. budget_s = 60.")
    if isinstance(budget, bool) or not isinstance(budget, int | float) or not (
        math.isfinite(budget) and budget > 0
    ):
        raise ScenarioError(path, "budget_s", budget, "is not a positive number of seconds",
                            "Give e.g. budget_s = 60.")
    listed = table.get("scenarios", MISSING)
    if not isinstance(listed, list) or not listed:
        raise ScenarioError(
            path, "scenarios", listed, "is not a non-empty array of tables",
            'Add one [[scenarios]] table per scenario, e.g. name = "mixed", share = 1.0.',
        )
    entries = tuple(_entry(path, f"scenarios[{n}]", item) for n, item in enumerate(listed))
    _check_entries(path, entries)
    own = service(path, table["service"]) if "service" in table else None
    return Suite(
        name=path.stem, description=description, budget_s=float(budget), entries=entries,
        path=path, service=own or next(
            (e.scenario.service for e in entries if e.scenario.service is not None), None),
    )


def list_suites() -> list[str]:
    """The names of the shipped suites, sorted."""
    return names_in(SUITE_DIR)


def _entry(path: Path, where: str, item: Any) -> SuiteEntry:
    if not isinstance(item, dict):
        raise ScenarioError(path, where, item, "is not a table",
                            "Write each scenario as a [[scenarios]] table.")
    reject_unknown(path, item, f"{where}.", _ENTRY_FIELDS, "a suite's scenario")
    name = item.get("name", MISSING)
    if not isinstance(name, str):
        raise ScenarioError(
            path, f"{where}.name", name, "is missing" if name is MISSING else "is not a string",
            'Name a scenario, e.g. name = "mixed".',
        )
    if name.endswith(".toml") or "/" in name:
        scenario = load_scenario(path.parent / name)
    elif name in names_in(SCENARIO_DIR):
        scenario = load_scenario(name)
    else:
        raise ScenarioError(
            path, f"{where}.name", name, "is not a known scenario",
            f"{did_you_mean(name, names_in(SCENARIO_DIR))}Known scenarios: "
            f"{', '.join(names_in(SCENARIO_DIR))}; or give a .toml path relative to the suite.",
        )
    share = _number(path, f"{where}.share", item.get("share", MISSING), upper=1.0,
                    fix="Give the scenario's share of the budget in (0, 1], e.g. share = 0.2.")
    scale = _number(path, f"{where}.scale", item.get("scale", 1.0), upper=None,
                    fix="Give a positive multiplier of the scenario's volume, e.g. scale = 1.0.")
    return SuiteEntry(scenario=scenario, share=share, scale=scale)


def _number(path: Path, where: str, value: object, *, upper: float | None, fix: str) -> float:
    if value is MISSING:
        raise ScenarioError(path, where, MISSING, "is missing", fix)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and value > 0 and (upper is None or value <= upper)
    ):
        raise ScenarioError(path, where, value, "is out of range", fix)
    return float(value)


def _check_entries(path: Path, entries: tuple[SuiteEntry, ...]) -> None:
    seen: dict[str, str] = {}
    for n, entry in enumerate(entries):
        name = entry.scenario.name
        if name in seen.values():
            raise ScenarioError(
                path, f"scenarios[{n}].name", name, "is listed twice",
                "List each scenario once; a larger scale gives it more volume.",
            )
        code = entry.scenario.tag
        if code in seen:
            raise ScenarioError(
                path, f"scenarios[{n}].name", name,
                f"tags its values {code!r} like {seen[code]!r}, so values could repeat "
                "across the two",
                "Rename one of the scenario files so their initials differ, or give one a "
                'tag field of its own (tag = "cwk").',
            )
        seen[code] = name
    total = math.fsum(entry.share for entry in entries)
    if abs(total - 1.0) > 1e-6:
        raise ScenarioError(
            path, "scenarios", MISSING, f"have shares that sum to {total:g}, not 1",
            "Make the shares of the scenarios add up to 1.",
        )

