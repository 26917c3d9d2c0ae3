"""Input checks that run before a transaction starts, so bad input never writes.

Each check raises :class:`invariants.errors.InvalidInput` naming the field, the value
and how to fix it. Strings are checked for what a database would silently mangle or
reject later: NUL bytes, lone surrogates (text that cannot be encoded as UTF-8) and
sizes over the limit. SQL metacharacters are *not* special: values are bound
parameters and are stored verbatim.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from invariants.backend import Delete, Restore, Write
from invariants.errors import InvalidInput, ValueTooLarge

from .schema import MEMORY_TYPES

__all__ = [
    "MAX_ID_CHARS",
    "MAX_TAG_BYTES",
    "check_memory_type",
    "check_namespace",
    "check_op",
    "check_strength",
    "check_tags",
    "check_text",
]

MAX_ID_CHARS = 512
MAX_SEQ = 2**63 - 1
MAX_TAG_BYTES = 256
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}")


def check_text(field: str, value: object, *, max_bytes: int = MAX_ID_CHARS * 4,
               optional: bool = False) -> None:
    """A non-blank str that encodes as UTF-8, with no NUL and within ``max_bytes``."""
    if value is None and optional:
        return
    if isinstance(value, bytes | bytearray):
        raise InvalidInput(field, value, "is bytes", "Decode it to str (UTF-8) first.")
    if not isinstance(value, str):
        raise InvalidInput(field, value, "is not a str", "Pass text.")
    if not value.strip():
        raise InvalidInput(field, value, "is empty or whitespace-only", "Give a non-blank value.")
    if "\x00" in value:
        raise InvalidInput(field, value, "contains a NUL byte", "Remove the \\x00 characters.")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(
            field, value, "is not valid UTF-8 (it holds a lone surrogate)",
            "Decode the source bytes with errors='strict' and fix the input.",
        ) from None
    if size > max_bytes:
        error = ValueTooLarge if field == "value" else InvalidInput
        raise error(
            field, value, f"is {size} bytes of UTF-8, over the limit of {max_bytes}",
            "Shorten it, or open the store with a larger max_value_bytes.",
        )


def check_tags(tags: Iterable[object]) -> None:
    for tag in tags:
        check_text("tags", tag, max_bytes=MAX_TAG_BYTES)


def check_namespace(namespace: object) -> None:
    """Namespaces are ASCII identifiers, so they can never smuggle a wildcard or a path."""
    check_text("namespace", namespace, max_bytes=128)
    assert isinstance(namespace, str)
    if not _NAMESPACE.fullmatch(namespace):
        raise InvalidInput(
            "namespace", namespace, "contains a forbidden character",
            "Use 1-128 of A-Z a-z 0-9 and _ . : / @ -, starting with a letter or digit.",
        )


def check_seq(causal_seq: object, field: str = "causal_seq") -> None:
    """A causal_seq (or any of the counters an import carries) is a non-negative 64-bit
    int; bool is rejected although it is an int."""
    if isinstance(causal_seq, bool) or not isinstance(causal_seq, int):
        raise InvalidInput(
            field, causal_seq, "is not an integer",
            "Assign it from a Lamport clock when the operation starts.",
        )
    if causal_seq < 0 or causal_seq > MAX_SEQ:
        raise InvalidInput(
            field, causal_seq, f"is outside 0..{MAX_SEQ}", "Use a non-negative 64-bit counter.",
        )


def check_strength(score: object, half_life_seconds: object) -> None:
    """A score is finite and >= 0; a half-life, when given, is > 0 (inf: never decays)."""
    if isinstance(score, bool) or not isinstance(score, int | float) or not (
            math.isfinite(score) and score >= 0):
        raise InvalidInput("score", score, "is not a finite number >= 0",
                           "Pass a strength such as 1.0 (untrusted content is capped at 0.3).")
    if half_life_seconds is None:
        return
    if isinstance(half_life_seconds, bool) or not isinstance(half_life_seconds, int | float) \
            or math.isnan(half_life_seconds) or half_life_seconds <= 0:
        raise InvalidInput("half_life_seconds", half_life_seconds, "is not a number > 0",
                           "Pass seconds until the strength halves, or None for the default.")


def check_memory_type(memory_type: object) -> None:
    if memory_type not in MEMORY_TYPES:
        raise InvalidInput(
            "memory_type", memory_type, "is not a known memory type",
            f"Use one of {', '.join(MEMORY_TYPES)}.",
        )


def check_op(op: Write | Delete | Restore, *, max_value_bytes: int) -> None:
    """Every field of a contract operation, in declaration order."""
    check_namespace(op.namespace)
    check_text("entity_id", op.entity_id)
    if isinstance(op, Write):
        check_text("attribute", op.attribute)
        check_text("value", op.value, max_bytes=max_value_bytes)
    check_seq(op.causal_seq)
    check_text("op_id", op.op_id)
    if isinstance(op, Write):
        check_text("source", op.source, optional=True)
    if isinstance(op, Delete):
        check_text("reason", op.reason, optional=True)
