"""The production guard: memcert's invariants checked on a sample of live traffic.

``invariants.guard(backend, sample=0.01, level="lexical", registry=...)`` returns a
handle that forwards every call to ``backend`` unchanged, on the caller's thread, and
checks a sample of entities in the background with the checkers a certification uses;
``sample=1.0`` is the assertion mode for tests, where a violation raises. docs/guard.md
says what it checks, what it exports, what it costs and what it cannot see.
"""

from __future__ import annotations

from ._guard import Guard, GuardedBackend, InvariantViolated, guard
from ._judge import GUARD_CHECKERS, SHARED_CHECKERS, Finding

__all__ = [
    "GUARD_CHECKERS",
    "SHARED_CHECKERS",
    "Finding",
    "Guard",
    "GuardedBackend",
    "InvariantViolated",
    "guard",
]
