"""A progress bar on stderr for long runs, quiet when stderr is not a terminal.

Redrawing is throttled to a few times a second: workers report every step, and a
terminal write per step would cost more than many backends' operations.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from typing import TextIO

from .certify import Progress

__all__ = ["TerminalProgress"]

WIDTH = 28


class TerminalProgress(Progress):
    """``[#######.......]  41%  24.6/60 s  3,120 ops  0 violations  concurrent_writes``."""

    def __init__(self, stream: TextIO | None = None, *, interval_s: float = 0.2) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._interval = interval_s if self._tty else 5.0
        self._lock = threading.Lock()
        self._done = 0
        self._total = 1
        self._budget = 1.0
        self._started = 0.0
        self._last = 0.0
        self._name = ""
        self._violations = 0

    def start(self, total_steps: int, budget_s: float) -> None:
        self._total, self._budget = max(1, total_steps), budget_s
        self._started = time.monotonic()

    def not_run(self, name: str, steps: int) -> None:
        self._total = max(1, self._total - steps)

    def scenario(self, name: str) -> None:
        self._name = name
        self._draw(force=True)

    def step(self, violations: int) -> None:
        with self._lock:
            self._done += 1
            self._violations = violations
        self._draw()

    def finish(self) -> None:
        self._draw(force=True)
        if self._tty:
            self._stream.write("\n")
        self._stream.write("checking the saved history...\n")
        self._stream.flush()

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self._interval:
            return
        self._last = now
        elapsed = now - self._started
        fraction = min(1.0, max(self._done / self._total, elapsed / self._budget))
        filled = int(fraction * WIDTH)
        line = (f"[{'#' * filled}{'.' * (WIDTH - filled)}] {fraction:4.0%}  "
                f"{elapsed:5.1f}{'' if math.isinf(self._budget) else f'/{self._budget:g}'} s  "
                f"{self._done:,} ops  "
                f"{self._violations} violations  {self._name}")
        self._stream.write(("\r" + line.ljust(100)) if self._tty else line + "\n")
        self._stream.flush()
