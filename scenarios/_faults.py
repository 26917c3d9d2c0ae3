"""The faults a scenario may name, with the parameters each takes and their ranges.

The injectors themselves live in ``chaos.faults``; this table only lets a scenario file
be checked when it is loaded, before any backend is touched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from chaos.plan import FaultSpec

from ._errors import MISSING, ScenarioError, did_you_mean

__all__ = ["FAULTS", "fault_spec"]


@dataclass(frozen=True, slots=True)
class _Range:
    low: float
    high: float
    meaning: str
    integer: bool = False


_PROBABILITY = _Range(0.0, 1.0, "a probability in [0, 1]")
_SECONDS = _Range(0.0, 60.0, "seconds in [0, 60]")

#: Fault name -> parameter name -> allowed range. Every parameter is required.
FAULTS: Mapping[str, Mapping[str, _Range]] = MappingProxyType(
    {
        "delay": {"mean_s": _SECONDS, "jitter_s": _SECONDS},
        "out_of_order": {"p": _PROBABILITY, "hold_s": _SECONDS},
        "lost_ack": {"p": _PROBABILITY},
        "fail_before_apply": {"p": _PROBABILITY},
        "duplicate_delivery": {"p": _PROBABILITY},
        "skewed_clock": {
            "p": _PROBABILITY,
            "max_skew": _Range(1, 10**9, "a whole number of clock ticks in [1, 1e9]",
                               integer=True),
        },
    }
)


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
            f"Name the fault: one of {', '.join(FAULTS)}.",
        )
    if not isinstance(name, str) or name not in FAULTS:
        hint = did_you_mean(name, FAULTS) if isinstance(name, str) else ""
        raise ScenarioError(
            path, f"{where}.name", name, "is not a fault",
            f"{hint}Faults: {', '.join(FAULTS)}.",
        )
    ranges = FAULTS[name]
    params: dict[str, float] = {}
    for key, value in table.items():
        if key == "name":
            continue
        field = f"{where}.{key}"
        if key not in ranges:
            raise ScenarioError(
                path, field, value, f"is not a parameter of the {name} fault",
                f"{did_you_mean(key, ranges)}{name} takes {_listing(ranges)}.",
            )
        allowed = ranges[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(
                path, field, value, "is not a number", f"Give {allowed.meaning}.",
            )
        if not (
            math.isfinite(value)
            and allowed.low <= value <= allowed.high
            and (not allowed.integer or float(value).is_integer())
        ):
            raise ScenarioError(
                path, field, value, "is out of range", f"Give {allowed.meaning}.",
            )
        params[key] = float(value)
    for key in ranges:
        if key not in params:
            raise ScenarioError(
                path, f"{where}.{key}", MISSING, "is missing",
                f"The {name} fault takes {_listing(ranges)}; give each of them.",
            )
    return FaultSpec(name=name, params=params)


def _listing(names: Mapping[str, object]) -> str:
    keys = list(names)
    return keys[0] if len(keys) == 1 else f"{', '.join(keys[:-1])} and {keys[-1]}"
