"""The JSON bodies of the protocol: each route's body as one call of the store's API
(:data:`CALLS`), and the store's answers as JSON.

Parsing only checks the *shape* of a body: that it is an object, that every required
field is there and no unknown one is, and that lists are lists. What a field's value
may be is the store's business: its checks run before any transaction and raise
:class:`~invariants.errors.InvalidInput` naming the field, which the handler turns into
a 422. Unknown fields are refused rather than ignored, so a client's typo (``opId``)
is an error and not a silently missing ``op_id``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from starlette.responses import JSONResponse

from invariants.backend import Ack, Delete, Record, Restore, Write

from .. import Hit, ImportReport, ReferenceStore, WriteOptions
from ..validation import check_namespace, check_text
from .errors import Refusal, field_error, shown_name

__all__ = [
    "CALLS",
    "MAX_LIMIT",
    "NULLABLE",
    "ROUTE_FIELDS",
    "Answer",
    "Work",
    "as_object",
    "decode",
    "import_body",
]

MAX_LIMIT = 1000
"""The most hits one search or recall returns."""

ROUTE_FIELDS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "write": (("namespace", "entity_id", "attribute", "value", "causal_seq", "op_id"),
              ("source", "memory_type", "tags", "score", "half_life_seconds")),
    "delete": (("namespace", "entity_id", "causal_seq", "op_id"), ("reason",)),
    "restore": (("namespace", "entity_id", "causal_seq", "op_id"), ()),
    "read": (("namespace", "entity_id"), ()),
    "search": (("namespace", "query"), ("tags", "memory_type", "limit")),
    "recall": (("namespace",), ("entity_id", "tags", "memory_type", "limit")),
    "touch": (("namespace", "entity_id", "attribute"), ()),
    "forget": (("namespace", "entity_id"), ("attribute",)),
    "entities": (("namespace",), ("after", "limit")),
    "reset": ((), ()),
}
"""Per route: the required fields, then the optional ones."""

NULLABLE = frozenset({"source", "reason", "half_life_seconds"})
"""The optional fields whose null means "the default"; the OpenAPI document marks them
nullable. Any other optional field sent as null is refused rather than read as absent,
so a client's unset variable can never widen a forget to the whole entity."""


def decode(raw: bytes, route: str) -> dict[str, Any]:
    """A request body as a JSON object with exactly the route's fields, or a refusal."""
    if not raw.strip():
        if not raw and not ROUTE_FIELDS[route][0]:
            return {}  # no body at all; whitespace is not JSON, and must not reset a store
        what = "only whitespace" if raw else "empty"
        raise Refusal(400, "invalid_json", f"the body is {what}; a {route} request is a JSON "
                      "object", field="body")
    try:
        document = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except (ValueError, RecursionError) as error:
        raise Refusal(400, "invalid_json", f"the body is not valid JSON: {error}",
                      field="body") from None
    if not isinstance(document, dict):
        raise Refusal(400, "invalid_json", f"the body is a JSON {_json_type(document)}; a "
                      f"{route} request is a JSON object", field="body")
    required, optional = ROUTE_FIELDS[route]
    allowed = (*required, *optional)
    for name in document:
        if name not in allowed:
            raise field_error(name, f"is not a field of a {route} request",
                              f"Use only {', '.join(allowed) or 'an empty object'}.")
    for name in required:
        if name not in document:
            raise field_error(name, "is missing",
                              f"A {route} request needs {', '.join(required)}.")
    for name in optional:
        if name in document and document[name] is None and name not in NULLABLE:
            raise field_error(name, "is null", f"Leave {name} out, or give it a value; only "
                              f"{', '.join(sorted(NULLABLE))} may be null.")
    return document


Work = Callable[[ReferenceStore], dict[str, Any]]
"""A request's store work, run with a handle of its own; it returns the answer's body."""


def write(body: Mapping[str, Any]) -> Work:
    op = Write(body["namespace"], body["entity_id"], body["attribute"], body["value"],
               body["causal_seq"], body["op_id"], body.get("source"))
    defaults = WriteOptions()
    options = WriteOptions(
        memory_type=body.get("memory_type", defaults.memory_type),
        tags=_tags(body),
        score=body.get("score", defaults.score),
        half_life_seconds=body.get("half_life_seconds"),
    )
    return lambda store: as_object(store.remember(op, options))


def delete(body: Mapping[str, Any]) -> Work:
    op = Delete(body["namespace"], body["entity_id"], body["causal_seq"], body["op_id"],
                body.get("reason"))
    return lambda store: as_object(store.delete(op))


def restore(body: Mapping[str, Any]) -> Work:
    op = Restore(body["namespace"], body["entity_id"], body["causal_seq"], body["op_id"])
    return lambda store: as_object(store.restore(op))


def read(body: Mapping[str, Any]) -> Work:
    """The store's read trusts its caller; over the wire the ids are checked here."""
    namespace, entity_id = body["namespace"], body["entity_id"]
    check_namespace(namespace)
    check_text("entity_id", entity_id)
    return lambda store: {"records": [as_object(record)
                                      for record in store.read(namespace, entity_id)]}


def reset(body: Mapping[str, Any]) -> Work:
    def work(store: ReferenceStore) -> dict[str, Any]:
        store.reset()
        return {"reset": True}

    return work


def search(body: Mapping[str, Any]) -> Work:
    namespace, query, listing = body["namespace"], body["query"], _listing(body)
    return lambda store: _hits(store.search(namespace, query, **listing))


def recall(body: Mapping[str, Any]) -> Work:
    namespace, entity_id, listing = body["namespace"], body.get("entity_id"), _listing(body)
    return lambda store: _hits(store.recall(namespace, entity_id=entity_id, **listing))


def touch(body: Mapping[str, Any]) -> Work:
    namespace, entity_id, attribute = body["namespace"], body["entity_id"], body["attribute"]
    return lambda store: {"access_count": store.touch(namespace, entity_id, attribute)}


def forget(body: Mapping[str, Any]) -> Work:
    namespace, entity_id, attribute = body["namespace"], body["entity_id"], body.get("attribute")
    return lambda store: {"archived": store.forget(namespace, entity_id, attribute)}


def entities(body: Mapping[str, Any]) -> Work:
    """A page of the namespace's entity ids; ``next`` is the ``after`` of the next page,
    null on the last, so a client pages through a namespace of any size."""
    namespace, after, limit = body["namespace"], body.get("after"), _limit(body, "entity ids")
    check_namespace(namespace)
    if after is not None:
        check_text("after", after)

    def work(store: ReferenceStore) -> dict[str, Any]:
        page = store.entity_page(namespace, after=after, limit=limit)
        return {"entity_ids": page, "next": page[-1] if len(page) == limit else None}

    return work


CALLS: Mapping[str, Callable[[Mapping[str, Any]], Work]] = {
    "write": write, "delete": delete, "restore": restore, "read": read, "reset": reset,
    "search": search, "recall": recall, "touch": touch, "forget": forget,
    "entities": entities,
}
"""The routes that take a JSON body, each with what turns its body into store work;
they are :data:`ROUTE_FIELDS`'s routes."""


def _listing(body: Mapping[str, Any]) -> dict[str, Any]:
    """What search and recall share: which memories, and how many."""
    return {"tags": _tags(body), "memory_type": body.get("memory_type"),
            "limit": _limit(body, "hits")}


def _limit(body: Mapping[str, Any], what: str) -> int:
    limit = body.get("limit", 10)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise field_error("limit", f"is {limit!r}, not an integer in 1..{MAX_LIMIT}",
                          f"Ask for a number of {what} such as 10.")
    return limit


def _hits(hits: list[Hit]) -> dict[str, Any]:
    return {"hits": [as_object(hit) for hit in hits]}


def as_object(result: Ack | Record | Hit) -> dict[str, Any]:
    """A result of the store as its JSON object: every field, in declaration order."""
    return {name: getattr(result, name) for name in _FIELDS[type(result)]}


_FIELDS = {kind: tuple(field.name for field in dataclasses.fields(kind))
           for kind in (Ack, Record, Hit)}


def import_body(report: ImportReport) -> dict[str, Any]:
    return {"imported": report.imported,
            "rejected": [{"line": r.line, "field": None if r.field is None else
                          shown_name(r.field), "message": r.message}
                         for r in report.rejected]}


def _tags(body: Mapping[str, Any]) -> tuple[str, ...]:
    """A list of tags; each tag's text is the store's to check."""
    tags = body.get("tags", [])
    if not isinstance(tags, list):
        raise field_error("tags", f"is a JSON {_json_type(tags)}, not an array",
                          'Pass an array of strings, e.g. ["work"].')
    return tuple(tags)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON; send numbers as finite decimals")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""What ``json.loads(raw, parse_constant=...)`` would build for every request, built once;
the bytes are decoded as ``json.loads`` decodes them."""


class Answer(JSONResponse):
    """A JSON response, the very bytes of Starlette's, from one shared encoder instead of
    one built per response, on the event loop that every request shares."""

    def render(self, content: Any) -> bytes:
        return _ENCODER.encode(content).encode("utf-8")


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages a non-Python client reads."""
    return _JSON_TYPES.get(type(value), "null")


_JSON_TYPES: Mapping[type, str] = {bool: "boolean", int: "number", float: "number",
                                   str: "string", list: "array", dict: "object"}
