"""Reading a scenario's ``[processes]`` table, each field checked where it stands."""

from __future__ import annotations

import math
from pathlib import Path

from ._errors import ScenarioError
from ._files import reject_unknown
from .process_plan import DEFAULT_PROCESSES, Processes

__all__ = ["processes"]

_FIELDS = ("count", "kill_at")


def processes(path: Path, table: object) -> Processes:
    """Check a ``[processes]`` table and turn it into :class:`Processes`."""
    if not isinstance(table, dict):
        raise ScenarioError(path, "processes", table, "is not a table",
                            "Write the worker processes as a [processes] table, e.g. "
                            "count = 2.")
    reject_unknown(path, table, "processes.", _FIELDS, "a [processes] table")
    count = table.get("count", DEFAULT_PROCESSES)
    if isinstance(count, bool) or not isinstance(count, int) or not 2 <= count <= 64:
        raise ScenarioError(path, "processes.count", count, "is not an integer in 2..64",
                            "Give the number of worker processes, e.g. count = 2; one "
                            "process would race with nothing.")
    kill_at = table.get("kill_at", [])
    if not isinstance(kill_at, list) or not all(
        not isinstance(at, bool) and isinstance(at, int | float) and math.isfinite(at)
        and 0 < at < 1 for at in kill_at
    ):
        raise ScenarioError(path, "processes.kill_at", kill_at,
                            "is not a list of fractions of the budget in (0, 1)",
                            "Give when to kill a worker process, e.g. kill_at = [0.3, 0.6].")
    if list(kill_at) != sorted(set(kill_at)):
        raise ScenarioError(path, "processes.kill_at", kill_at, "is not strictly ascending",
                            "List each kill once, earliest first, e.g. kill_at = [0.3, 0.6].")
    return Processes(count=count, kill_at=tuple(float(at) for at in kill_at))
