"""Settings and helpers shared by the stateful tests.

Every run here is derandomized, so a test sees the same programs on every run, and
has no example database, so no run replays another's failure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from hypothesis import Phase, settings

from invariants.stateful import PROFILES

QUICK = settings(PROFILES["memcert-ci"], max_examples=40, stateful_step_count=20, database=None)
"""Enough to pass a correct backend with every checker having checked something."""

HUNT = settings(PROFILES["memcert-ci"], max_examples=300, stateful_step_count=20, database=None)
"""Enough to find every known-bad backend's bug; a run stops at the first."""

CONCURRENT_ONLY = frozenset({"chaos.examples:racy_upsert"})
"""Known-bad backends whose bug shows only when operations race."""

HUNT_RACES = settings(HUNT, phases=tuple(phase for phase in Phase if phase is not Phase.shrink))
"""HUNT without shrinking, for CONCURRENT_ONLY backends: a race's program is not held to
a length, and shrinking one replays its timing-dependent failure a thousand times over."""

QUICK_PROFILE = """
from hypothesis import settings

from invariants.stateful import PROFILES

settings.register_profile(
    "memcert-quick",
    settings(PROFILES["memcert-ci"], max_examples={examples}, stateful_step_count=20),
)
"""
"""A conftest for pytester runs: a derandomized ``memcert-quick`` profile."""


_TIMES = re.compile(r"t=(?:\?|\d+\.\d{3})\.\.(?:in flight|\d+\.\d{3} s)")


def untimed(text: str | Iterable[str]) -> str | tuple[str, ...]:
    """``text`` (or each of several) with the times an explanation shows, which differ
    from run to run, as ``t=…``: what two runs of one program must agree on."""
    if isinstance(text, str):
        return _TIMES.sub("t=…", text)
    return tuple(_TIMES.sub("t=…", item) for item in text)


def isolated_env() -> dict[str, str]:
    """The environment for running a saved program as a user would: no PYTHONPATH, so
    that only what the program puts on sys.path (and what is installed) imports."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
