"""memcert's Hypothesis settings profiles, and the example database scoped per backend.

The profiles are registered in Hypothesis' own registry under ``memcert-`` names, so
``--hypothesis-profile=memcert-nightly`` selects one, and never under a plain ``ci`` or
``dev``: those names belong to the user's own tests (Hypothesis itself registers and
auto-loads a ``ci`` profile), and replacing them would change every other Hypothesis
test of the session.

========================  ==========================================================
profile                   for
========================  ==========================================================
``memcert-dev``           a quick local run; failures saved to ``.hypothesis/``
``memcert-ci``            CI (used when ``CI`` is set): derandomized, prints the blob
``memcert-nightly``       a deep search: many more and longer programs
========================  ==========================================================
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import ExampleDatabase
from hypothesis.errors import InvalidArgument as HypothesisInvalidArgument

__all__ = ["PROFILES", "active_settings", "register_profiles", "scoped"]

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]
"""A backend answers at its own speed, and a long program is the point."""

_BASE = settings(
    settings.get_profile("default"),
    phases=[p for p in Phase if p is not Phase.explain],
)
"""Hypothesis' defaults, not whatever profile is loaded when this module is imported;
without the explain phase, whose "# or any other generated value" comments would
break each burst of a printed program over many lines."""

PROFILES: dict[str, settings] = {
    "memcert-dev": settings(
        _BASE,
        max_examples=30, stateful_step_count=30, deadline=None, suppress_health_check=_QUIET
    ),
    "memcert-ci": settings(
        _BASE,
        max_examples=60,
        stateful_step_count=40,
        derandomize=True,
        print_blob=True,
        deadline=None,
        suppress_health_check=_QUIET,
    ),
    "memcert-nightly": settings(
        _BASE,
        max_examples=1000,
        stateful_step_count=100,
        deadline=None,
        suppress_health_check=_QUIET,
    ),
}


def register_profiles() -> None:
    """Register the profiles that no one has registered under those names yet."""
    for name, profile in PROFILES.items():
        try:
            settings.get_profile(name)
        except HypothesisInvalidArgument:
            settings.register_profile(name, profile)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def active_settings() -> settings:
    """The loaded profile if it is one of memcert's (or derived from one, as
    ``--hypothesis-verbosity`` derives them); otherwise ``memcert-ci`` when ``CI`` is
    set, else ``memcert-dev``. A user's own profile is for their own tests, and says
    nothing about how long certifying a backend may take."""
    register_profiles()
    name = settings.get_current_profile_name()
    if not name.startswith("memcert-"):
        name = "memcert-ci" if _in_ci() else "memcert-dev"
    return settings.get_profile(name)


class _Scoped(ExampleDatabase):
    """An example database whose keys are prefixed by a scope.

    Hypothesis keys saved failures by the test's digest, which is the same for every
    backend the machine drives; without a scope, running the machine on a correct
    backend would replay, see pass, and delete the failure saved for a broken one.
    """

    def __init__(self, inner: ExampleDatabase, scope: str) -> None:
        super().__init__()
        self._inner = inner
        self._prefix = hashlib.sha256(scope.encode()).digest()[:12]

    def __repr__(self) -> str:
        return f"_Scoped({self._inner!r})"

    def save(self, key: bytes, value: bytes) -> None:
        self._inner.save(self._prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._inner.fetch(self._prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self._inner.delete(self._prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._inner.move(self._prefix + src, self._prefix + dest, value)


def scoped(base: settings, scope: str) -> settings:
    """``base`` with its example database, if any, scoped to ``scope``."""
    database = base.database
    if database is None:
        return base
    return settings(base, database=_Scoped(database, scope))


register_profiles()
