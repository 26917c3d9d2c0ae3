"""Reading a scenario's ``[[faults]]`` tables.

What each fault takes, and which values it accepts, is declared once, in
:mod:`scenarios.fault_kinds` (the injectors of ``chaos.faults`` are built from it);
this module only points its errors at the file and field, so a scenario fails when it
is loaded, before any backend is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ._errors import MISSING, ScenarioError, did_you_mean
from .fault_kinds import FAULT_KINDS
from .plan import FaultSpec

__all__ = ["fault_spec"]


def fault_spec(path: Path, where: str, table: object) -> FaultSpec:
    """Check one ``[[faults]]`` table and turn it into a FaultSpec."""
    if not isinstance(table, dict):
        raise ScenarioError(
            path, where, table, "is not a table",
            'Write each fault as a [[faults]] table, e.g. name = "delay", mean_s = 0.001.',
        )
    name = table.get("name", MISSING)
    if name is MISSING:
        raise ScenarioError(
            path, f"{where}.name", MISSING, "is missing",
            f"Name the fault: one of {', '.join(FAULT_KINDS)}.",
        )
    if not isinstance(name, str) or name not in FAULT_KINDS:
        hint = did_you_mean(name, FAULT_KINDS) if isinstance(name, str) else ""
        raise ScenarioError(
            path, f"{where}.name", name, "is not a fault",
            f"{hint}Faults: {', '.join(FAULT_KINDS)}.",
        )
    accepted = FAULT_KINDS[name].params
    params: dict[str, float] = {}
    for key, value in table.items():
        if key == "name":
            continue
        field = f"{where}.{key}"
        if key not in accepted:
            raise ScenarioError(
                path, field, value, f"is not a parameter of the {name} fault",
                f"{did_you_mean(key, accepted)}{name} takes {_listing(accepted)}.",
            )
        refused = accepted[key].refusal(value)
        if refused is not None:
            raise ScenarioError(path, field, value, *refused)
        params[key] = float(value)
    for key in accepted:
        if key not in params:
            raise ScenarioError(
                path, f"{where}.{key}", MISSING, "is missing",
                f"The {name} fault takes {_listing(accepted)}; give each of them.",
            )
    return FaultSpec(name=name, params=params)


def _listing(names: Mapping[str, object]) -> str:
    keys = list(names)
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"
