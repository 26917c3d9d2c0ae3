"""The protocol's JSON codec: the service's own encoder and decoder say what Starlette's
and ``json.loads`` would."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from starlette.responses import JSONResponse

from reference_store.service import wire
from reference_store.service.errors import Refusal

BODIES: list[Any] = [
    {"records": []},
    {"records": [{"entity_id": "用户-1", "attribute": "city", "value": "lives in Zürich \"now\"\n",
                  "causal_seq": 9_007_199_254_740_993, "version": 2}]},
    {"hits": [{"score": 0.1 + 0.2, "tags": ["a", "b"], "half_life_seconds": None}]},
    {"error": "invalid_input", "field": "value", "message": "\u2028 \x00"},
    {"access_count": 3, "archived": True},
]


@pytest.mark.parametrize("body", BODIES)
def test_an_answer_has_the_very_bytes_of_starlettes_json_response(body: Any):
    answer = wire.Answer(body, 201, headers={"retry-after": "1"})
    expected = JSONResponse(body, 201, headers={"retry-after": "1"})
    assert answer.body == expected.body
    assert answer.status_code == 201
    assert answer.headers.items() == expected.headers.items()


def test_an_answer_refuses_what_json_cannot_say_as_starlette_does():
    for value in (math.nan, math.inf, "\ud800"):
        with pytest.raises(ValueError):
            JSONResponse({"score": value})
        with pytest.raises(ValueError):
            wire.Answer({"score": value})


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32"])
def test_a_body_is_decoded_as_json_loads_decodes_it(encoding: str):
    text = json.dumps({"namespace": "ns", "entity_id": "ユーザー"}, ensure_ascii=False)
    raw = text.encode(encoding)
    assert wire.decode(raw, "read") == json.loads(raw) == {"namespace": "ns",
                                                           "entity_id": "ユーザー"}


@pytest.mark.parametrize("raw", [b'{"namespace": NaN, "entity_id": "e"}',
                                 b'{"namespace": "\xff", "entity_id": "e"}',
                                 b'{"namespace": "n", "entity_id": "e"'])
def test_a_body_json_loads_would_refuse_is_a_400(raw: bytes):
    with pytest.raises(Refusal) as refused:
        wire.decode(raw, "read")
    assert (refused.value.status, refused.value.field) == (400, "body")
