"""Every way a request can be refused, as one exception and one JSON shape.

A refusal means nothing was written: handlers raise :class:`Refusal` (or the store's
:class:`~invariants.errors.InvalidInput`) before any transaction, and :func:`refusal_body`
renders both the same way. The error shape is the protocol's, specified in
``docs/http-protocol.md``: ``error`` (a stable code), ``field`` (the offending field,
or null), ``message`` (for people), and for field errors ``problem`` and ``fix``, so a
client can rebuild the store's own exception.
"""

from __future__ import annotations

from typing import Any

from invariants.errors import InvalidInput, ValueTooLarge

__all__ = ["Refusal", "field_error", "invalid_input", "refusal_body"]


class Refusal(Exception):
    """A request refused with a 4xx before it reached the store."""

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None,
                 problem: str | None = None, fix: str | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.problem = problem
        self.fix = fix
        self.extra = extra or {}


def invalid_input(error: InvalidInput) -> Refusal:
    """The store's typed input error as a 422 that names its field."""
    code = "value_too_large" if isinstance(error, ValueTooLarge) else "invalid_input"
    return Refusal(422, code, str(error), field=error.field, problem=error.problem,
                   fix=error.fix)


def field_error(field: str, problem: str, fix: str) -> Refusal:
    """A 422 for a field the store never saw: missing, unknown, or of the wrong JSON type."""
    return Refusal(422, "invalid_input", f"{field} {problem}. {fix}", field=field,
                   problem=problem, fix=fix)


def refusal_body(refusal: Refusal) -> dict[str, Any]:
    body: dict[str, Any] = {"error": refusal.code, "field": refusal.field,
                            "message": refusal.message}
    if refusal.problem is not None:
        body["problem"] = refusal.problem
        body["fix"] = refusal.fix
    body.update(refusal.extra)
    return body
