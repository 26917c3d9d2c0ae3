"""Schemathesis fuzzes every operation of the OpenAPI document against a served store.

Each operation gets Schemathesis's coverage phase (boundary values, missing and unknown
fields, wrong types, wrong methods and content types: deterministic) and its fuzzing
phase (``MEMCERT_FUZZ_EXAMPLES`` random valid and invalid inputs, seeded). Every call
goes to a real ``memcert serve`` subprocess on a SQLite file, and every answer must:

- never be a 5xx, and conform to the document: status, content type, body schema;
- be a 4xx whenever the input breaks the document (``negative_data_rejection``);
- when it is a 4xx, carry the protocol's error: a message for people, and a ``field``
  naming a field of the request (``body`` for the body as a whole), with ``problem`` and
  ``fix`` on a 422; method errors have no field, as docs/http-protocol.md says;
- when a route that writes refused the request, leave the whole-store export
  byte-identical: a rejection wrote nothing.

Each operation's test ends by checking it really exercised both sides (valid inputs
accepted, invalid ones refused, refusals compared), so a run that checked nothing fails.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.errors import FailureGroup

from reference_store.service import openapi_document

from .calls import call
from .server import Served

EXAMPLES = int(os.environ.get("MEMCERT_FUZZ_EXAMPLES", "25"))
"""Fuzzing-phase examples per operation, valid and invalid together; the coverage phase's
cases come on top. Raise it for a deeper run."""
SEED = int(os.environ.get("MEMCERT_FUZZ_SEED", "6"))
"""Fixed, so CI draws the same cases every run; change it to draw others."""

DOCUMENT = openapi_document()
CONFIG = schemathesis.Config.from_dict({
    "seed": SEED,
    "generation": {"mode": "all", "max-examples": EXAMPLES, "deterministic": True,
                   "database": "none"},
    "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True},
               "fuzzing": {"enabled": True, "error-feedback": {"enabled": False},
                           "extra-data-sources": {"responses": False}},
               "stateful": {"enabled": False}},
})
"""Generation never learns from answers: they hold time-decayed strengths, and a case
drawn from one would differ from run to run."""
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, negative_data_rejection]

WRITING = {"write", "delete", "restore", "touch", "forget", "import", "reset"}
"""Operations that change the store when accepted, so a refusal must have changed nothing."""
WITHOUT_INPUT = {"healthz", "metrics", "openapi"}
SEED_FACT = {"namespace": "fuzz-seed", "entity_id": "u1", "attribute": "coffee",
             "value": "likes americano", "causal_seq": 1, "op_id": "fuzz-seed-1"}


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_context: schemathesis.SerializationContext, value: Any) -> bytes:
    """Import bodies as sent: text as UTF-8 (lone surrogates too), anything else as JSON."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return json.dumps(value).encode()


class Ledger:
    """The store's last known export, re-read only after a call that may have changed it.

    A refused call leaves the export it was compared against current, so a run of
    refusals costs one export each; an accepted call to a writing route costs one more.
    """

    def __init__(self, url: str, session: requests.Session) -> None:
        self.url = url
        self.session = session
        self._known: bytes | None = None

    def export(self) -> bytes:
        answer = self.session.get(f"{self.url}/v1/export")
        assert answer.status_code == 200, answer.text
        return answer.content

    def before(self) -> bytes:
        """The export now; a store that was emptied gets one fact, so a delete shows."""
        if self._known is None:
            self._known = self.export()
        if not self._known:
            answer = self.session.post(f"{self.url}/v1/write", json=SEED_FACT)
            assert answer.status_code == 200, answer.text
            self._known = self.export()
        known, self._known = self._known, None
        return known

    def unchanged_since(self, before: bytes) -> bool:
        after = self.export()
        self._known = after
        return after == before


@pytest.fixture(scope="module")
def session(served: Served) -> Iterator[requests.Session]:
    with requests.Session() as opened:
        served_document = opened.get(f"{served.url}/openapi.json").json()
        assert served_document == DOCUMENT, "the service serves another document than fuzzed"
        yield opened


@pytest.fixture(scope="module")
def ledger(served: Served, session: requests.Session) -> Ledger:
    return Ledger(served.url, session)


@dataclasses.dataclass
class Tally:
    """What one operation's test saw, counted by kind of case and answer."""

    operation: str = ""
    label: str = ""
    seen: Counter[str] = dataclasses.field(default_factory=Counter)
    started: float = dataclasses.field(default_factory=time.monotonic)

    def summary(self) -> str:
        counts = ", ".join(f"{key} {count}" for key, count in sorted(self.seen.items()))
        return f"{counts} in {time.monotonic() - self.started:.1f}s"


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """Fails an operation's test that left a side unexercised, and reports the counts."""
    counted = Tally()
    yield counted
    request.node.user_properties.append(("fuzzed", counted.summary()))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and request.config.get_verbosity() > 0:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"  fuzzed {counted.label}: {counted.summary()}")
    wanted = ["positive 2xx", "negative 4xx"]
    if counted.operation not in WITHOUT_INPUT:
        wanted.append("refused for input")
    if counted.operation in WRITING:
        wanted.append("refusal compared")
    missing = [key for key in wanted if not counted.seen[key]]
    assert not missing, f"{counted.operation} never saw {', '.join(missing)}: {counted.summary()}"


SPANS_EXAMPLES = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
"""``tally`` is function-scoped on purpose: it spans every example of one operation."""


@SCHEMA.exclude(operation_id="reset").parametrize()
@SPANS_EXAMPLES
def test_every_operation_refuses_bad_input_and_conforms(
        case: schemathesis.Case, served: Served, session: requests.Session, ledger: Ledger,
        tally: Tally):
    _fuzz_one(case, served, session, ledger, tally)


@SCHEMA.include(operation_id="reset").parametrize()
@SPANS_EXAMPLES
def test_reset_last_refuses_bad_input_and_conforms(
        case: schemathesis.Case, served: Served, session: requests.Session, ledger: Ledger,
        tally: Tally):
    """Reset runs after the others, so their refusals were compared on a populated store."""
    _fuzz_one(case, served, session, ledger, tally)


def _fuzz_one(case: schemathesis.Case, served: Served, session: requests.Session,
              ledger: Ledger, tally: Tally) -> None:
    name = case.operation.definition.raw["operationId"]
    tally.operation, tally.label = name, case.operation.label
    writing = name in WRITING
    before = ledger.before() if writing else b""
    response = case.call(base_url=served.url, session=session)
    status = response.status_code
    refused = 400 <= status < 500
    if writing and refused:
        assert ledger.unchanged_since(before), (
            f"{case.operation.label} answered {status} but the store changed: "
            f"{case.as_curl_command(base_url=served.url)}")
        tally.seen["refusal compared"] += 1
    case.validate_response(response, checks=CHECKS, transport_kwargs={"base_url": served.url})
    assert case.meta is not None
    mode = "negative" if case.meta.generation.mode is GenerationMode.NEGATIVE else "positive"
    tally.seen[f"{mode} {status // 100}xx"] += 1
    tally.seen[f"{case.meta.phase.name.value} phase"] += 1
    if refused:
        _assert_protocol_error(case, name, response.json(), dict(response.headers))
        if status in (400, 413, 422):
            tally.seen["refused for input"] += 1


def _assert_protocol_error(case: schemathesis.Case, operation: str, error: dict[str, Any],
                           headers: dict[str, str]) -> None:
    """The error shape of docs/http-protocol.md, with a field the request really has."""
    message, field = error["message"], error["field"]
    assert isinstance(message, str) and message.strip(), error
    if error["error"] == "method_not_allowed":
        assert field is None and "allow" in {name.lower() for name in headers}, error
        return
    assert isinstance(field, str) and field, error
    if error["error"] in ("invalid_input", "value_too_large"):
        assert isinstance(error.get("problem"), str) and error["problem"].strip(), error
        assert isinstance(error.get("fix"), str) and error["fix"].strip(), error
    if operation == "import":
        return  # a rejected line's column, or body: the body is JSON Lines, not an object
    assert field in _request_fields(case) | {"body"}, (field, error)
    assert field in message, error


def _request_fields(case: schemathesis.Case) -> set[str]:
    """The fields the document defines for the operation, and those the case sent."""
    raw = case.operation.definition.raw
    names = {parameter["name"] for parameter in raw.get("parameters", [])}
    reference = (raw.get("requestBody", {}).get("content", {}).get("application/json", {})
                 .get("schema", {}).get("$ref"))
    if reference:
        names.update(DOCUMENT["components"]["schemas"][reference.rsplit("/", 1)[1]]
                     ["properties"])
    sent = [*(case.query or {}), *(case.body if isinstance(case.body, dict) else {})]
    names.update(sent)
    names.update(json.dumps(name) for name in sent)  # how a name that is no identifier shows
    return names


def test_the_checks_catch_a_document_that_omits_a_status(served: Served):
    """The fuzz tests can fail: an answer the document does not list is caught."""
    doctored = openapi_document()
    del doctored["paths"]["/v1/write"]["post"]["responses"]["422"]
    operation = schemathesis.openapi.from_dict(doctored, config=CONFIG)["/v1/write"]["POST"]
    case = operation.Case(body={**SEED_FACT, "causal_seq": -1})
    response = case.call(base_url=served.url)
    assert response.status_code == 422
    with pytest.raises(FailureGroup) as caught:
        case.validate_response(response, checks=CHECKS,
                               transport_kwargs={"base_url": served.url})
    assert [failure.title for failure in caught.value.exceptions] == [
        "Undocumented status code"]


@pytest.mark.parametrize(("path", "raw", "field", "message"), [
    ("/v1/reset", b'{"\\ud800": 1}', '"\\ud800"',
     '"\\ud800" is not a field of a reset request. Use only an empty object.'),
    ("/v1/read", b'{"": 1}', '""',
     '"" is not a field of a read request. Use only namespace, entity_id.'),
    ("/v1/import", b'{"kind": "memory", "\\ud800": 1}', '"\\ud800"',
     "line 1: '\\ud800' is not a field of a memory line; it may come from a newer memcert, "
     "which it would lose"),
], ids=["lone surrogate", "empty", "lone surrogate in an import line"])
def test_a_field_name_no_answer_can_carry_is_shown_as_a_json_string(
        served: Served, ledger: Ledger, path: str, raw: bytes, field: str, message: str):
    """Schemathesis generates UTF-8 only; a lone surrogate as a name once answered 500."""
    before = ledger.before()
    answer = call(served.url, "POST", path, raw=raw)
    assert (answer.status, answer.json["field"], answer.json["message"]) == (422, field, message)
    assert ledger.unchanged_since(before)


def test_a_blank_body_is_not_an_empty_one_and_resets_nothing(served: Served, ledger: Ledger):
    """Found by the fuzzing phase: whitespace once counted as no body, and reset the store."""
    before = ledger.before()
    answer = call(served.url, "POST", "/v1/reset", raw=b" \n")
    assert (answer.status, answer.json) == (400, {
        "error": "invalid_json", "field": "body",
        "message": "the body is only whitespace; a reset request is a JSON object"})
    assert ledger.unchanged_since(before)
