"""The OpenAPI 3 document of the protocol, built from the same field lists the parser uses.

The request schemas come from :data:`~reference_store.service.wire.ROUTE_FIELDS`, so a
field the service accepts is a field the document names, and the other way round. The
document is served at ``/openapi.json``, printed by ``memcert serve --openapi``, and
kept in ``docs/openapi.json`` for readers without a running service.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final

from ..config import DEFAULT_MAX_VALUE_BYTES
from ..schema import MEMORY_TYPES
from ..validation import MAX_ID_CHARS, MAX_SEQ, MAX_TAG_BYTES
from .wire import MAX_LIMIT, ROUTE_FIELDS

__all__ = ["FIELDS", "PROTOCOL_VERSION", "openapi_document", "openapi_text"]

PROTOCOL_VERSION: Final = "1"

_ID: Final = {"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS * 4,
              "pattern": r"\S", "description": "Non-blank text, no NUL, at most "
                                                f"{MAX_ID_CHARS * 4} bytes of UTF-8."}
_SEQ: Final = {"type": "integer", "format": "int64", "minimum": 0, "maximum": MAX_SEQ,
               "description": "Lamport time assigned when the operation started; a retry "
                              "reuses it."}
_TAGS: Final = {"type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_BYTES},
                "description": "Labels; a search or recall keeps memories holding all of "
                               "them."}
_MEMORY_TYPE: Final = {"type": "string", "enum": list(MEMORY_TYPES)}

FIELDS: Final[dict[str, dict[str, Any]]] = {
    "namespace": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$",
                  "description": "Isolation boundary: nothing crosses namespaces."},
    "entity_id": _ID,
    "attribute": {**_ID, "description": "The slot; variants of one name are one slot."},
    "value": {"type": "string", "minLength": 1, "pattern": r"\S",
              "description": f"The fact; at most {DEFAULT_MAX_VALUE_BYTES} bytes of UTF-8 "
                             "by default."},
    "causal_seq": _SEQ,
    "op_id": {**_ID, "description": "Idempotency key: a retry with the same op_id gets "
                                    "the first outcome."},
    "source": {**_ID, "nullable": True,
               "description": "Where the fact came from (user, agent, tool, web:...); "
                              "decides trust."},
    "reason": {**_ID, "nullable": True},
    "memory_type": _MEMORY_TYPE,
    "tags": _TAGS,
    "score": {"type": "number", "minimum": 0, "description": "Strength when written; "
                                                             "untrusted sources are capped "
                                                             "at 0.3."},
    "half_life_seconds": {"type": "number", "exclusiveMinimum": True, "minimum": 0,
                          "nullable": True,
                          "description": "Seconds until the strength halves; null: the "
                                         "store's default."},
    "query": {"type": "string", "minLength": 1, "pattern": r"\S"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10},
    "after": {**_ID, "description": "The next page starts after this entity id, by code "
                                    "point: the previous page's next."},
}
"""The schema of every request field, by name."""

_ROUTES: Final = {
    "write": ("Write a fact (contract).", "Ack",
              "Apply a write, or refuse it with applied=false and a reason. The optional "
              "memory_type, tags, score and half_life_seconds are the reference store's "
              "extensions; a backend that lacks them answers 422 naming the field."),
    "delete": ("Delete an entity (contract).", "Ack",
               "Delete every record of the entity and refuse writes until a restore."),
    "restore": ("Restore a deleted entity (contract).", "Ack",
                "Make a deleted entity writable again without reviving anything. A backend "
                "without the capability answers 501."),
    "read": ("Read an entity's active records (contract).", "Records",
             "Active records in ascending causal_seq."),
    "reset": ("Empty the whole store (contract).", "Reset",
              "Every namespace included; memcert calls it before a certification."),
    "search": ("Search by text (store API).", "Hits",
               "Active memories ranked by 0.6 x similarity + 0.4 x strength."),
    "recall": ("Recall the strongest memories (store API).", "Hits",
               "Active memories of a namespace, or of one entity, strongest first."),
    "touch": ("Count one use of a memory (store API).", "Touched",
              "Returns the new access count, 0 when no memory is active there."),
    "forget": ("Archive memories (store API).", "Forgotten",
               "Archive an entity's active memories, or one attribute's; no tombstone."),
    "entities": ("List a namespace's entity ids (store API).", "EntityPage",
                 "Every entity id the namespace has held, deleted ones too, by code point, "
                 "a page at a time: what memcert audit enumerates a service by."),
}

_ERRORS: Final = {
    "400": "The body is not a JSON object (error invalid_json, field body).",
    "401": "The bearer token is missing or wrong (error unauthorized).",
    "413": "The body is over the service's limit (error body_too_large).",
    "422": "A field is missing, unknown or invalid (error invalid_input or "
           "value_too_large, field names it). Nothing was written.",
    "500": "The service failed; a write's outcome is unknown.",
    "503": "The database could not complete the request; a write's outcome is unknown.",
}


def openapi_document() -> dict[str, Any]:
    """The protocol as an OpenAPI 3.0 document: a fresh copy each call, which its caller
    may change (the schemas it is built from share their parts)."""
    errors = {status: _answer(text, "Error") for status, text in _ERRORS.items()}
    paths: dict[str, Any] = {}
    for route, (summary, answer, description) in _ROUTES.items():
        responses = {"200": _answer("OK", answer), **errors}
        if route == "restore":
            responses["501"] = _answer("Restore is not supported by this backend.", "Error")
        paths[f"/v1/{route}"] = {"post": {
            "operationId": route, "summary": summary, "description": description,
            "requestBody": {"required": bool(ROUTE_FIELDS[route][0]),
                            **_content(_ref(_name(route)))},
            "responses": responses,
        }}
    paths["/v1/export"] = {"get": {
        "operationId": "export", "summary": "Export the store as JSON Lines (store API).",
        "parameters": [{"name": "namespace", "in": "query", "required": False,
                        "schema": FIELDS["namespace"]}],
        "responses": {"200": _answer("One JSON object per line, every table.", _TEXT, _NDJSON),
                      **errors},
    }}
    paths["/v1/import"] = {"post": {
        "operationId": "import", "summary": "Import an export (store API).",
        "description": "Lines that fail a check are reported and skipped; 422 when no line "
                       "could be imported. An empty body is the export of an empty store: "
                       "it imports nothing.",
        "requestBody": {"required": False, **_content(_TEXT, _NDJSON)},
        "responses": {"200": _answer("What was imported and what was not.", "ImportReport"),
                      **errors},
    }}
    paths["/healthz"] = {"get": {
        "operationId": "healthz", "summary": "Whether the service and its database answer.",
        "security": [],
        "responses": {"200": _answer("Healthy.", "Health"),
                      "503": _answer("The database does not answer.", "Health")},
    }}
    paths["/metrics"] = {"get": {
        "operationId": "metrics", "summary": "Prometheus text exposition.",
        "responses": {"200": _answer("Metrics.", _TEXT, "text/plain"), "401": errors["401"]},
    }}
    paths["/openapi.json"] = {"get": {
        "operationId": "openapi", "summary": "This document.", "security": [],
        "responses": {"200": _answer("OpenAPI 3.0.", {"type": "object"})},
    }}
    return copy.deepcopy({
        "openapi": "3.0.3",
        "info": {"title": "memcert memory protocol", "version": PROTOCOL_VERSION,
                 "description": "The HTTP protocol memcert certifies backends through; "
                                "see docs/http-protocol.md."},
        "security": [{"bearer": []}, {}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {**_request_schemas(), **_response_schemas()},
        },
    })


_TEXT: Final = {"type": "string"}
_NDJSON: Final = "application/x-ndjson"


def _name(route: str) -> str:
    return f"{route.capitalize()}Request"


def _ref(schema: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{schema}"}


def _content(schema: dict[str, Any], media: str = "application/json") -> dict[str, Any]:
    return {"content": {media: {"schema": schema}}}


def _answer(description: str, schema: str | dict[str, Any],
            media: str = "application/json") -> dict[str, Any]:
    """A response: a named component schema, or a schema given inline."""
    return {"description": description,
            **_content(_ref(schema) if isinstance(schema, str) else schema, media)}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", **({"required": required} if required else {}),
            "properties": properties}


def _request_schemas() -> dict[str, Any]:
    schemas = {}
    for route, (required, optional) in ROUTE_FIELDS.items():
        schema: dict[str, Any] = {
            "type": "object", "additionalProperties": False,
            "properties": {name: FIELDS[name] for name in (*required, *optional)}}
        if required:
            schema["required"] = list(required)
        schemas[_name(route)] = schema
    return schemas


def _response_schemas() -> dict[str, Any]:
    integer, number, boolean = {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
    nullable_text = {"type": "string", "nullable": True}
    record = {"entity_id": _TEXT, "attribute": _TEXT, "value": _TEXT, "causal_seq": _SEQ,
              "version": integer}
    hit = _object({
        **record, "namespace": _TEXT, "memory_type": _MEMORY_TYPE,
        "tags": {"type": "array", "items": _TEXT},
        "trust": {"type": "string", "enum": ["trusted", "derived", "untrusted"]},
        "instruction_like": boolean, "access_count": integer, "score": number,
        "strength": number, "rank": number, "similarity": {"type": "number", "nullable": True}})
    return {
        "Ack": _object({"applied": boolean, "version": {"type": "integer", "nullable": True},
                        "reason": nullable_text}, ["applied", "version", "reason"]),
        "Record": _object(record, list(record)),
        "Records": _object({"records": {"type": "array", "items": _ref("Record")}},
                           ["records"]),
        "Reset": _object({"reset": boolean}),
        "Hit": hit,
        "Hits": _object({"hits": {"type": "array", "items": _ref("Hit")}}, ["hits"]),
        "Touched": _object({"access_count": integer}),
        "Forgotten": _object({"archived": integer}),
        "EntityPage": _object({"entity_ids": {"type": "array", "items": _TEXT},
                               "next": nullable_text}, ["entity_ids", "next"]),
        "ImportReport": _object({
            "imported": integer,
            "rejected": {"type": "array", "items": _object({
                "line": integer, "field": nullable_text, "message": _TEXT})}}),
        "Health": _object({"status": _TEXT, "message": _TEXT}),
        "Error": _object({
            "error": {"type": "string", "enum": [
                "invalid_json", "invalid_input", "value_too_large", "body_too_large",
                "unauthorized", "not_found", "method_not_allowed", "not_implemented",
                "unavailable", "internal"]},
            "field": nullable_text, "message": _TEXT, "problem": _TEXT, "fix": _TEXT},
            ["error", "field", "message"]),
    }


def openapi_text() -> str:
    """The document as ``memcert serve --openapi`` prints it and docs/openapi.json keeps it."""
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"
