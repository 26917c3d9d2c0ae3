"""A graceful first signal: what ``memcert chaos`` and ``memcert load`` do on Ctrl-C.

Both stop recording and still judge what was recorded; a second Ctrl-C must then be an
ordinary interrupt, so that a person can always abandon the check. One helper keeps
the two commands behaving alike.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

__all__ = ["on_first_signal"]


@contextmanager
def on_first_signal(act: Callable[[], None], says: str,
                    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
                    ) -> Iterator[None]:
    """Call ``act`` on the first of ``signals`` and tell stderr ``says``; the handlers
    found are put back at once, so the next signal does what it did before. They are
    restored on exit too.

    Only the main thread may install signal handlers.
    """
    previous = {sig: signal.getsignal(sig) for sig in signals}

    def handle(signum: int, _frame: FrameType | None) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        act()
        # os.write, not print: the handler may interrupt a write to sys.stderr
        os.write(2, f"\nmemcert: {signal.Signals(signum).name}: {says}\n".encode())

    for sig in signals:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
