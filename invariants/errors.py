"""memcert's exception tree, drawn here in one place.

::

    MemcertError                    base of everything memcert raises on purpose
    ├── InvalidInput (ValueError)   an operation or record field is malformed;
    │                               nothing was written
    │   └── ValueTooLarge           a value is over the configured size limit
    ├── InvalidArgument (TypeError) a caller passed memcert an unusable option
    └── FactoryError                a backend factory could not be imported or called

A broken invariant is never an exception: it is a verdict in a report. These errors
mean the *input* was wrong, and each message names the field and says how to fix it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FactoryError",
    "InvalidArgument",
    "InvalidInput",
    "MemcertError",
    "ValueTooLarge",
]


class MemcertError(Exception):
    """Base class, so callers can catch every deliberate memcert error at once."""


class InvalidInput(MemcertError, ValueError):
    """A field of an operation is malformed; the store wrote nothing.

    ``field`` is the name of the offending field, so that an HTTP layer can turn the
    error into a 4xx that points at it without parsing the message.
    """

    def __init__(self, field: str, value: object, problem: str, fix: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{field}={_shown(value)} {problem}. {fix}")

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:
        """Rebuilt from its parts, so that it survives a worker process's queue."""
        return type(self), (self.field, self.value, self.problem, self.fix)


class ValueTooLarge(InvalidInput):
    """The value exceeds the store's size limit."""


class InvalidArgument(MemcertError, TypeError):
    """An option passed to memcert itself (not to a backend) is unusable."""


class FactoryError(MemcertError):
    """A backend factory spec did not resolve to a working backend."""


def _shown(value: object, limit: int = 60) -> str:
    """Render a bad value for a message without flooding the terminal."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{text} (type {type(value).__name__})"
