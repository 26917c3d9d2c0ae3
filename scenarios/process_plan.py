"""What a scenario's ``[processes]`` table declares: a phase run in worker processes.

A backend can be right under threads and wrong under processes: a ``threading.Lock``
around check-then-insert on a shared file serialises one process's writers and no
other's. A scenario with this table runs its workers spread over ``count`` processes,
so two processes write one key at once. ``kill_at`` makes it a crash scenario for a
library backend: at each of those fractions of the run, one worker
process is killed with SIGKILL in the middle of an operation and another takes over
its remaining steps, as a supervisor would restart it; the run is measured by steps done or
by time spent, whichever is further.

The table is data, like the rest of a plan; :mod:`chaos.processes` acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PROCESSES", "Processes"]

DEFAULT_PROCESSES = 2
"""Worker processes when a ``[processes]`` table gives no ``count``."""


@dataclass(frozen=True, slots=True)
class Processes:
    """``count`` worker processes; a SIGKILL of one at each fraction in ``kill_at``."""

    count: int = DEFAULT_PROCESSES
    kill_at: tuple[float, ...] = ()

    @property
    def kills(self) -> bool:
        return bool(self.kill_at)
