"""Bad input gets a 4xx naming the field, never a 5xx, and writes nothing.

Each case is sent to a served store that already holds data; the whole store is
exported before and after, and the two exports must be byte-for-byte the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .calls import call, export
from .server import Served

WRITE: dict[str, Any] = {"namespace": "bad", "entity_id": "u1", "attribute": "coffee",
                         "value": "likes americano", "causal_seq": 10, "op_id": "fresh-op"}
DELETE: dict[str, Any] = {"namespace": "bad", "entity_id": "u1", "causal_seq": 10,
                          "op_id": "fresh-delete"}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


def _without(base: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: value for key, value in base.items() if key != name}


def _raw_write(fragment: str) -> bytes:
    """A write whose causal_seq is replaced by raw JSON text."""
    return json.dumps(WRITE).replace('"causal_seq": 10', f'"causal_seq": {fragment}').encode()


# (id, method, path, JSON body or raw bytes, status, error code, field)
CASES: list[tuple[str, str, str, Any, int, str, str | None]] = [
    ("malformed json", "POST", "/v1/write", b'{"namespace":', 400, "invalid_json", "body"),
    ("json array", "POST", "/v1/write", b"[1, 2]", 400, "invalid_json", "body"),
    ("empty body", "POST", "/v1/write", b"", 400, "invalid_json", "body"),
    ("NaN", "POST", "/v1/write", _raw_write("NaN"), 400, "invalid_json", "body"),
    ("Infinity", "POST", "/v1/write", _raw_write("Infinity"), 400, "invalid_json", "body"),
    ("deep nesting", "POST", "/v1/write", b"[" * 100_000, 400, "invalid_json", "body"),
    ("5000-digit int", "POST", "/v1/write", _raw_write("1" * 5000), 400, "invalid_json",
     "body"),
    ("not utf-8", "POST", "/v1/write", b'{"namespace": "\xff"}', 400, "invalid_json", "body"),
    ("over the body limit", "POST", "/v1/write",
     json.dumps(_with(WRITE, value="x" * (1024 * 1024))).encode(), 413, "body_too_large",
     "body"),
    ("missing causal_seq", "POST", "/v1/write", _without(WRITE, "causal_seq"), 422,
     "invalid_input", "causal_seq"),
    ("unknown field", "POST", "/v1/write", _with(WRITE, opId="x"), 422, "invalid_input",
     "opId"),
    ("causal_seq as text", "POST", "/v1/write", _with(WRITE, causal_seq="10"), 422,
     "invalid_input", "causal_seq"),
    ("causal_seq true", "POST", "/v1/write", _with(WRITE, causal_seq=True), 422,
     "invalid_input", "causal_seq"),
    ("causal_seq 1.5", "POST", "/v1/write", _with(WRITE, causal_seq=1.5), 422,
     "invalid_input", "causal_seq"),
    ("causal_seq -1", "POST", "/v1/write", _with(WRITE, causal_seq=-1), 422, "invalid_input",
     "causal_seq"),
    ("causal_seq 2**63", "POST", "/v1/write", _with(WRITE, causal_seq=2**63), 422,
     "invalid_input", "causal_seq"),
    ("namespace with a space", "POST", "/v1/write", _with(WRITE, namespace="a b"), 422,
     "invalid_input", "namespace"),
    ("namespace a number", "POST", "/v1/write", _with(WRITE, namespace=5), 422,
     "invalid_input", "namespace"),
    ("namespace too long", "POST", "/v1/write", _with(WRITE, namespace="n" * 200), 422,
     "invalid_input", "namespace"),
    ("empty entity_id", "POST", "/v1/write", _with(WRITE, entity_id=""), 422,
     "invalid_input", "entity_id"),
    ("null entity_id", "POST", "/v1/write", _with(WRITE, entity_id=None), 422,
     "invalid_input", "entity_id"),
    ("blank attribute", "POST", "/v1/write", _with(WRITE, attribute="   "), 422,
     "invalid_input", "attribute"),
    ("NUL in value", "POST", "/v1/write", _with(WRITE, value="a\x00b"), 422, "invalid_input",
     "value"),
    ("lone surrogate", "POST", "/v1/write", _with(WRITE, value="\ud800"), 422,
     "invalid_input", "value"),
    ("value over 64 KiB", "POST", "/v1/write", _with(WRITE, value="x" * 70_000), 422,
     "value_too_large", "value"),
    ("op_id a list", "POST", "/v1/write", _with(WRITE, op_id=[]), 422, "invalid_input",
     "op_id"),
    ("source a number", "POST", "/v1/write", _with(WRITE, source=7), 422, "invalid_input",
     "source"),
    ("tags a string", "POST", "/v1/write", _with(WRITE, tags="work"), 422, "invalid_input",
     "tags"),
    ("empty tag", "POST", "/v1/write", _with(WRITE, tags=[""]), 422, "invalid_input", "tags"),
    ("tag a number", "POST", "/v1/write", _with(WRITE, tags=[1]), 422, "invalid_input",
     "tags"),
    ("unknown memory_type", "POST", "/v1/write", _with(WRITE, memory_type="dream"), 422,
     "invalid_input", "memory_type"),
    ("negative score", "POST", "/v1/write", _with(WRITE, score=-1), 422, "invalid_input",
     "score"),
    ("score as text", "POST", "/v1/write", _with(WRITE, score="high"), 422, "invalid_input",
     "score"),
    ("zero half-life", "POST", "/v1/write", _with(WRITE, half_life_seconds=0), 422,
     "invalid_input", "half_life_seconds"),
    ("delete without op_id", "POST", "/v1/delete", _without(DELETE, "op_id"), 422,
     "invalid_input", "op_id"),
    ("delete reason a number", "POST", "/v1/delete", _with(DELETE, reason=5), 422,
     "invalid_input", "reason"),
    ("restore null causal_seq", "POST", "/v1/restore",
     _with(_without(DELETE, "op_id"), causal_seq=None, op_id="r"), 422, "invalid_input",
     "causal_seq"),
    ("restore with a reason", "POST", "/v1/restore", _with(DELETE, reason="x"), 422,
     "invalid_input", "reason"),
    ("read empty namespace", "POST", "/v1/read", {"namespace": "", "entity_id": "u1"}, 422,
     "invalid_input", "namespace"),
    ("read entity_id a number", "POST", "/v1/read", {"namespace": "bad", "entity_id": 3},
     422, "invalid_input", "entity_id"),
    ("search without query", "POST", "/v1/search", {"namespace": "bad"}, 422,
     "invalid_input", "query"),
    ("search blank query", "POST", "/v1/search", {"namespace": "bad", "query": " "}, 422,
     "invalid_input", "query"),
    ("search limit 0", "POST", "/v1/search", {"namespace": "bad", "query": "a", "limit": 0},
     422, "invalid_input", "limit"),
    ("search limit as text", "POST", "/v1/search",
     {"namespace": "bad", "query": "a", "limit": "5"}, 422, "invalid_input", "limit"),
    ("search limit 1001", "POST", "/v1/search",
     {"namespace": "bad", "query": "a", "limit": 1001}, 422, "invalid_input", "limit"),
    ("recall empty entity_id", "POST", "/v1/recall", {"namespace": "bad", "entity_id": ""},
     422, "invalid_input", "entity_id"),
    ("recall unknown memory_type", "POST", "/v1/recall",
     {"namespace": "bad", "memory_type": "x"}, 422, "invalid_input", "memory_type"),
    ("touch without attribute", "POST", "/v1/touch", {"namespace": "bad", "entity_id": "u1"},
     422, "invalid_input", "attribute"),
    ("forget blank attribute", "POST", "/v1/forget",
     {"namespace": "bad", "entity_id": "u1", "attribute": ""}, 422, "invalid_input",
     "attribute"),
    ("reset with a field", "POST", "/v1/reset", {"everything": True}, 422, "invalid_input",
     "everything"),
    ("reset with an array", "POST", "/v1/reset", b"[]", 400, "invalid_json", "body"),
    ("export bad namespace", "GET", "/v1/export?namespace=a%20b", None, 422,
     "invalid_input", "namespace"),
    ("export unknown parameter", "GET", "/v1/export?all=1", None, 422, "invalid_input",
     "all"),
    ("import not json", "POST", "/v1/import", b"not json\n", 422, "invalid_input", "body"),
    ("import an incomplete line", "POST", "/v1/import", b'{"kind": "entity"}\n', 422,
     "invalid_input", "namespace"),
    ("unknown route", "POST", "/v1/nope", WRITE, 404, "not_found", None),
    ("wrong method", "GET", "/v1/write", None, 405, "method_not_allowed", None),
]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A store holding a live entity, a deleted one and a search-worthy memory."""
    folder: Path = tmp_path_factory.mktemp("bad-input")
    with Served.start(str(folder / "store.sqlite3")) as running:
        for body in (WRITE | {"op_id": "seed-1", "causal_seq": 1},
                     WRITE | {"entity_id": "u2", "op_id": "seed-2", "causal_seq": 1}):
            assert call(running.url, "POST", "/v1/write", body).json["applied"] is True
        assert call(running.url, "POST", "/v1/delete", DELETE | {
            "entity_id": "u2", "op_id": "seed-3", "causal_seq": 2}).json["applied"] is True
        yield running


@pytest.mark.parametrize(("method", "path", "body", "status", "code", "field"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_refused_with_the_field_named_and_nothing_written(
        seeded: Served, method: str, path: str, body: Any, status: int, code: str,
        field: str | None):
    before = export(seeded.url)
    raw = body if isinstance(body, bytes) else None
    answer = call(seeded.url, method, path, None if raw is not None else body, raw=raw)
    assert answer.status == status, answer.body[:500]
    assert answer.headers["content-type"] == "application/json"
    error = answer.json
    assert (error["error"], error["field"]) == (code, field)
    assert isinstance(error["message"], str) and error["message"]
    assert export(seeded.url) == before


def test_messages_say_what_is_wrong_and_how_to_fix_it(seeded: Served):
    missing = call(seeded.url, "POST", "/v1/write", _without(WRITE, "causal_seq")).json
    assert missing["message"] == ("causal_seq is missing. A write request needs namespace, "
                                  "entity_id, attribute, value, causal_seq, op_id.")
    unknown = call(seeded.url, "POST", "/v1/delete", _with(DELETE, opId="x")).json
    assert unknown["message"] == (
        "opId is not a field of a delete request. Use only namespace, entity_id, causal_seq, "
        "op_id, reason.")
    negative = call(seeded.url, "POST", "/v1/write", _with(WRITE, causal_seq=-1)).json
    assert negative == {
        "error": "invalid_input", "field": "causal_seq",
        "message": "causal_seq=-1 (type int) is outside 0..9223372036854775807. Use a "
                   "non-negative 64-bit counter.",
        "problem": "is outside 0..9223372036854775807",
        "fix": "Use a non-negative 64-bit counter."}
    limit = call(seeded.url, "POST", "/v1/search",
                 {"namespace": "bad", "query": "a", "limit": 0}).json
    assert limit["message"] == ("limit is 0, not an integer in 1..1000. Ask for a number of "
                                "hits such as 10.")
    large = call(seeded.url, "POST", "/v1/write", raw=b"{" + b" " * (2 * 1024 * 1024) + b"}")
    assert large.json["message"] == "the body is over the limit of 1048576 bytes"
