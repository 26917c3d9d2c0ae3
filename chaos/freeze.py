"""Freezing a process with SIGSTOP, and knowing when it has stopped.

A crash must cut an operation short for certain: the process is frozen first, so that
nothing it does can complete, then memcert looks at what it had in flight, then kills
it. A signal is delivered when the process next runs, not when it is sent, so
:func:`freeze` waits until ``/proc`` shows the process stopped. Where there is no
SIGSTOP (Windows), nothing is frozen and callers kill at once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["CAN_FREEZE", "freeze", "thaw", "wait_stopped"]

CAN_FREEZE = hasattr(signal, "SIGSTOP")
"""Whether this platform can stop a process without ending it."""


def freeze(pid: int, *, group: bool = False) -> None:
    """SIGSTOP ``pid`` (its whole process group with ``group``) and wait until stopped."""
    if not CAN_FREEZE:
        return
    _send(pid, signal.SIGSTOP, group)
    wait_stopped(pid)


def thaw(pid: int, *, group: bool = False) -> None:
    """SIGCONT ``pid`` (its whole process group with ``group``)."""
    if CAN_FREEZE:
        _send(pid, signal.SIGCONT, group)


def wait_stopped(pid: int, timeout_s: float = 2.0) -> None:
    """Wait until ``pid`` shows as stopped in ``/proc``; where there is no ``/proc``, a
    moment."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            time.sleep(0.05)
            return
        if state in ("T", "t"):
            return
        time.sleep(0.001)


def _send(pid: int, sig: signal.Signals, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
