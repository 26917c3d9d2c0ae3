"""Settings and helpers shared by the stateful tests.

Every run here is derandomized, so a test sees the same programs on every run, and
has no example database, so no run replays another's failure.
"""

from __future__ import annotations

from hypothesis import settings

from invariants.stateful import PROFILES

QUICK = settings(PROFILES["memcert-ci"], max_examples=40, stateful_step_count=20, database=None)
"""Enough to pass a correct backend with every checker having checked something."""

HUNT = settings(PROFILES["memcert-ci"], max_examples=300, stateful_step_count=20, database=None)
"""Enough to find every known-bad backend's bug; a run stops at the first."""

CONCURRENT_ONLY = frozenset({"chaos.examples:racy_upsert"})
"""Known-bad backends whose bug shows only when operations race."""

QUICK_PROFILE = """
from hypothesis import settings

from invariants.stateful import PROFILES

settings.register_profile(
    "memcert-quick",
    settings(PROFILES["memcert-ci"], max_examples={examples}, stateful_step_count=20),
)
"""
"""A conftest for pytester runs: a derandomized ``memcert-quick`` profile."""
