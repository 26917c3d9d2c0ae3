"""Reading a scenario's ``[network]`` table: client groups and the nemesis timeline.

What the table means is declared by :mod:`scenarios.network_plan` (each toxic by its
:class:`~scenarios.network_plan.Toxic`); this module checks each field where it stands
in the file, so an error names ``network.nemesis[2].attributes`` rather than a line of
Python.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from invariants.errors import InvalidArgument

from ._errors import MISSING, ScenarioError, did_you_mean
from ._files import reject_unknown
from .network_plan import ACTIONS, DEFAULT_GROUP, NemesisStep, Network, Toxic

__all__ = ["network"]

_FIELDS = ("groups", "timeout_s", "backoff_s", "nemesis")
_STEP_FIELDS: dict[str, tuple[str, ...]] = {
    "add_toxic": ("at", "do", "toxic", "type", "stream", "toxicity", "attributes", "groups"),
    "remove_toxic": ("at", "do", "toxic"),
    "partition": ("at", "do", "groups"),
    "heal": ("at", "do"),
    "crash": ("at", "do", "down_s"),
    "pause": ("at", "do", "down_s"),
}


def network(path: Path, table: object) -> Network:
    """Check a ``[network]`` table and turn it into a :class:`~scenarios.network_plan.Network`."""
    if not isinstance(table, dict):
        raise ScenarioError(path, "network", table, "is not a table",
                            "Write the client groups and the nemesis as a [network] table.")
    reject_unknown(path, table, "network.", _FIELDS, "a [network] table")
    groups = _names(path, "network.groups", table.get("groups", [DEFAULT_GROUP]))
    defaults = Network()
    timeout_s = _seconds(path, "network.timeout_s", table.get("timeout_s", defaults.timeout_s),
                         low=0.0, high=600.0, open_low=True)
    backoff_s = _seconds(path, "network.backoff_s", table.get("backoff_s", defaults.backoff_s),
                         low=0.0, high=60.0)
    listed = table.get("nemesis", [])
    if not isinstance(listed, list):
        raise ScenarioError(path, "network.nemesis", listed, "is not an array of tables",
                            'Write each step as a [[network.nemesis]] table, e.g. at = 0.5, '
                            'do = "partition", groups = ["b"].')
    steps = tuple(_step(path, f"network.nemesis[{n}]", item) for n, item in enumerate(listed))
    try:
        return Network(groups=groups, timeline=steps, timeout_s=timeout_s, backoff_s=backoff_s)
    except InvalidArgument as error:
        step, colon, said = str(error).partition(": ")
        where = f"network.{step}" if colon and step.startswith("nemesis[") else "network"
        raise ScenarioError(path, where, MISSING,
                            *_halves(said if where != "network" else str(error))) from error


def _step(path: Path, where: str, item: Any) -> NemesisStep:
    if not isinstance(item, dict):
        raise ScenarioError(path, where, item, "is not a table",
                            "Write each step as a [[network.nemesis]] table.")
    action = item.get("do", MISSING)
    if not isinstance(action, str) or action not in ACTIONS:
        hint = did_you_mean(action, ACTIONS) if isinstance(action, str) else ""
        raise ScenarioError(path, f"{where}.do", action,
                            "is missing" if action is MISSING else "is not an action",
                            f"{hint}Give one of {', '.join(ACTIONS)}.")
    reject_unknown(path, item, f"{where}.", _STEP_FIELDS[action], f"a {action} step")
    at = item.get("at", MISSING)
    if isinstance(at, bool) or not isinstance(at, int | float) or not 0 <= at <= 1:
        raise ScenarioError(path, f"{where}.at", at,
                            "is missing" if at is MISSING else "is not a fraction",
                            "Give the point of the scenario where the step fires, in [0, 1], "
                            "e.g. at = 0.5.")
    groups = _names(path, f"{where}.groups", item["groups"]) if "groups" in item else ()
    if action == "add_toxic":
        return NemesisStep(float(at), "add_toxic", groups=groups, toxic=_toxic(path, where, item))
    if action == "remove_toxic":
        name = item.get("toxic", MISSING)
        if not isinstance(name, str):
            raise ScenarioError(path, f"{where}.toxic", name, "is not a toxic's name",
                                'Name the toxic an earlier add_toxic step added, e.g. '
                                'toxic = "slow_answers".')
        return NemesisStep(float(at), "remove_toxic", name=name)
    if action in ("crash", "pause"):
        down_s = _seconds(path, f"{where}.down_s", item.get("down_s", 0.0), low=0.0, high=600.0)
        return NemesisStep(float(at), action, down_s=down_s)  # type: ignore[arg-type]
    return NemesisStep(float(at), action, groups=groups)  # type: ignore[arg-type]


def _toxic(path: Path, where: str, item: dict[str, Any]) -> Toxic:
    for field, example in (("toxic", 'toxic = "slow_answers"'), ("type", 'type = "latency"')):
        if field not in item:
            raise ScenarioError(path, f"{where}.{field}", MISSING, "is missing",
                                f"An add_toxic step needs it, e.g. {example}.")
    attributes = item.get("attributes", {})
    if not isinstance(attributes, dict):
        raise ScenarioError(path, f"{where}.attributes", attributes, "is not a table",
                            "Give the toxic's attributes inline, e.g. attributes = "
                            "{ latency = 20, jitter = 20 }.")
    try:
        return Toxic(item["toxic"], item["type"], item.get("stream", "downstream"),
                     item.get("toxicity", 1.0), attributes)
    except InvalidArgument as error:
        problem, fix = _halves(str(error))
        raise ScenarioError(path, where, MISSING, f"does not make a toxic: {problem}",
                            fix) from error


def _halves(message: str) -> tuple[str, str]:
    """A chaos error's message as the problem and the fix a ScenarioError words apart."""
    problem, _, fix = message.partition(". ")
    return problem.rstrip("."), fix or "See docs/scenarios.md, 'Network scenarios'."


def _names(path: Path, where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ScenarioError(path, where, value, "is not a non-empty list of strings",
                            'Name client groups, e.g. groups = ["a", "b"].')
    return tuple(value)


def _seconds(path: Path, where: str, value: object, *, low: float, high: float,
             open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and (value > low if open_low else value >= low)
            and value <= high):
        bound = "(" if open_low else "["
        raise ScenarioError(path, where, value, "is out of range",
                            f"Give seconds in {bound}{low:g}, {high:g}].")
    return float(value)
