"""Every way a request can be refused, as one exception and one JSON shape.

A refusal means nothing was written: handlers raise :class:`Refusal` (or the store's
:class:`~invariants.errors.InvalidInput`) before any transaction, and :func:`refusal_body`
renders both the same way. The error shape is the protocol's, specified in
``docs/http-protocol.md``: ``error`` (a stable code), ``field`` (the offending field,
or null), ``message`` (for people), and for field errors ``problem`` and ``fix``, so a
client can rebuild the store's own exception.
"""

from __future__ import annotations

import json
from typing import Any

from invariants.errors import InvalidInput, ValueTooLarge

__all__ = ["Refusal", "field_error", "invalid_input", "refusal_body", "shown_name"]


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
    shown = shown_name(field)
    return Refusal(422, "invalid_input", f"{shown} {problem}. {fix}", field=shown,
                   problem=problem, fix=fix)


def shown_name(name: str) -> str:
    """A field name as an answer can carry it back to the client who sent it.

    A client's unknown name can be anything JSON allows: empty, spaced, or a lone
    surrogate that UTF-8 cannot encode. Such a name is shown as its JSON string literal
    in ASCII (``""``, ``"\\ud800"``), so a message stays readable and the answer can
    always be encoded; an identifier is shown as it is.
    """
    return name if name.isidentifier() else json.dumps(name)


def refusal_body(refusal: Refusal) -> dict[str, Any]:
    body: dict[str, Any] = {"error": refusal.code, "field": refusal.field,
                            "message": refusal.message}
    if refusal.problem is not None:
        body["problem"] = refusal.problem
        body["fix"] = refusal.fix
    body.update(refusal.extra)
    return body
