"""Every route of ``memcert serve``, through real HTTP against a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from invariants.errors import InvalidArgument
from reference_store.engine import normalize_url
from reference_store.service import ServiceOptions, openapi_text
from reference_store.service.routes import Routes

from .calls import call, export
from .server import ROOT, Served


def _write(ns: str, entity: str, attribute: str, value: str, seq: int, op_id: str,
           **extra: object) -> dict[str, object]:
    return {"namespace": ns, "entity_id": entity, "attribute": attribute, "value": value,
            "causal_seq": seq, "op_id": op_id, **extra}


def test_write_read_and_a_retry_gets_the_first_outcome(served: Served):
    first = call(served.url, "POST", "/v1/write",
                 _write("routes-w", "u1", "coffee", "likes americano", 5, "op-1"))
    assert (first.status, first.json) == (200, {"applied": True, "version": 1, "reason": None})
    retry = call(served.url, "POST", "/v1/write",
                 _write("routes-w", "u1", "coffee", "likes americano", 5, "op-1"))
    assert retry.json == first.json
    stale = call(served.url, "POST", "/v1/write",
                 _write("routes-w", "u1", "coffee", "likes latte", 4, "op-2"))
    assert stale.json == {"applied": False, "version": 1, "reason": "stale"}
    read = call(served.url, "POST", "/v1/read", {"namespace": "routes-w", "entity_id": "u1"})
    assert read.status == 200
    assert read.json == {"records": [{"entity_id": "u1", "attribute": "coffee",
                                      "value": "likes americano", "causal_seq": 5,
                                      "version": 1}]}
    assert read.headers["content-type"] == "application/json"


def test_delete_refuses_writes_until_restore_which_revives_nothing(served: Served):
    url = served.url
    call(url, "POST", "/v1/write", _write("routes-d", "u1", "city", "Paris", 1, "w1"))
    deleted = call(url, "POST", "/v1/delete", {"namespace": "routes-d", "entity_id": "u1",
                                               "causal_seq": 2, "op_id": "d1",
                                               "reason": "user asked"})
    assert deleted.json == {"applied": True, "version": 2, "reason": None}
    refused = call(url, "POST", "/v1/write", _write("routes-d", "u1", "city", "Rome", 3, "w2"))
    assert refused.json == {"applied": False, "version": None, "reason": "tombstoned"}
    restored = call(url, "POST", "/v1/restore", {"namespace": "routes-d", "entity_id": "u1",
                                                 "causal_seq": 4, "op_id": "r1"})
    assert restored.json["applied"] is True
    again = call(url, "POST", "/v1/restore", {"namespace": "routes-d", "entity_id": "u1",
                                              "causal_seq": 5, "op_id": "r2"})
    assert again.json == {"applied": False, "version": None, "reason": "not_deleted"}
    read = call(url, "POST", "/v1/read", {"namespace": "routes-d", "entity_id": "u1"})
    assert read.json == {"records": []}


def test_search_recall_touch_and_forget(served: Served):
    url = served.url
    call(url, "POST", "/v1/write", _write("routes-s", "u1", "coffee", "likes americano", 1,
                                          "s1", tags=["drinks"], memory_type="semantic"))
    call(url, "POST", "/v1/write", _write("routes-s", "u2", "pet", "has a cat", 1, "s2"))
    search = call(url, "POST", "/v1/search",
                  {"namespace": "routes-s", "query": "americano", "tags": ["drinks"]})
    assert search.status == 200
    assert [(h["entity_id"], h["value"], h["tags"]) for h in search.json["hits"]] == [
        ("u1", "likes americano", ["drinks"])]
    assert search.json["hits"][0]["similarity"] > 0
    recall = call(url, "POST", "/v1/recall", {"namespace": "routes-s", "entity_id": "u2",
                                              "limit": 5})
    assert [h["value"] for h in recall.json["hits"]] == ["has a cat"]
    assert recall.json["hits"][0]["similarity"] is None
    touched = call(url, "POST", "/v1/touch",
                   {"namespace": "routes-s", "entity_id": "u1", "attribute": "Coffee"})
    assert touched.json == {"access_count": 1}
    forgotten = call(url, "POST", "/v1/forget", {"namespace": "routes-s", "entity_id": "u1"})
    assert forgotten.json == {"archived": 1}
    assert call(url, "POST", "/v1/read",
                {"namespace": "routes-s", "entity_id": "u1"}).json == {"records": []}


def test_entities_pages_through_a_namespace_deleted_ones_included(served: Served):
    url = served.url
    for number, entity in enumerate(("u3", "u1", "Ü2", "u10")):
        call(url, "POST", "/v1/write", _write("routes-e", entity, "city", "Paris", 1,
                                              f"e{number}"))
    call(url, "POST", "/v1/write", _write("routes-e-other", "x", "city", "Paris", 1, "eo"))
    call(url, "POST", "/v1/delete", {"namespace": "routes-e", "entity_id": "u3",
                                     "causal_seq": 2, "op_id": "ed"})
    pages, body = [], {"namespace": "routes-e", "limit": 3}
    while True:
        answer = call(url, "POST", "/v1/entities", body)
        assert answer.status == 200, answer.json
        pages.append(answer.json["entity_ids"])
        if answer.json["next"] is None:
            break
        body = {**body, "after": answer.json["next"]}
    assert pages == [["u1", "u10", "u3"], ["Ü2"]]  # code point order, in pages of 3
    assert call(url, "POST", "/v1/entities", {"namespace": "routes-none"}).json == {
        "entity_ids": [], "next": None}
    for bad, field in (({"namespace": "routes-e", "limit": 0}, "limit"),
                       ({"namespace": "routes-e", "after": " "}, "after"),
                       ({"namespace": "bad ns"}, "namespace")):
        refused = call(url, "POST", "/v1/entities", bad)
        assert (refused.status, refused.json["field"]) == (422, field), refused.json


def test_export_reset_import_round_trip_and_an_import_that_clashes_writes_nothing(
        served: Served):
    url = served.url
    call(url, "POST", "/v1/write", _write("routes-x", "u1", "tea", "likes green tea", 1, "x1"))
    one = call(url, "GET", "/v1/export?namespace=routes-x")
    assert one.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line)["kind"] for line in one.body.splitlines()] == [
        "entity", "memory", "operation"]
    everything = export(url)

    clash = call(url, "POST", "/v1/import", raw=one.body,
                 headers={"Content-Type": "application/x-ndjson"})
    assert clash.status == 422
    assert clash.json["error"] == "invalid_input"
    assert clash.json["field"] == "entity_id"
    assert clash.json["imported"] == 0
    assert clash.json["message"] == (
        "line 1: entity 'u1' of namespace 'routes-x' already exists in this store, and one "
        "entity's histories are never merged; import into a store without it, or leave its "
        "lines out")
    assert [r["line"] for r in clash.json["rejected"]] == [1, 2, 3]
    assert export(url) == everything

    assert call(url, "POST", "/v1/reset").json == {"reset": True}
    assert export(url) == b""
    imported = call(url, "POST", "/v1/import", raw=everything)
    assert imported.status == 200
    assert imported.json == {"imported": len(everything.splitlines()), "rejected": []}
    assert export(url) == everything


def test_health_metrics_and_the_api_document(served: Served):
    url = served.url
    assert call(url, "GET", "/healthz").json == {"status": "ok"}
    call(url, "POST", "/v1/write", _write("routes-m", "u1", "a", "b", 1, "m1"))
    call(url, "POST", "/v1/write", _write("routes-m", "u1", "a", "b", -1, "m2"))
    answer = call(url, "GET", "/metrics")
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(answer.body.decode())
               for s in family.samples}
    assert samples[("memcert_http_requests_total", (
        ("method", "POST"), ("route", "/v1/write"), ("status", "422")))] >= 1
    assert samples[("memcert_store_rejections_total", (
        ("op", "write"), ("reason", "invalid_input")))] >= 1
    assert ("memcert_http_request_duration_seconds_bucket", (
        ("le", "0.0001"), ("route", "/v1/write"))) in samples
    assert samples[("memcert_http_store_handles", ())] >= 1
    document = call(url, "GET", "/openapi.json")
    assert document.json == json.loads(openapi_text())
    assert (ROOT / "docs" / "openapi.json").read_text() == openapi_text(), (
        "docs/openapi.json is stale: run memcert serve --openapi > docs/openapi.json")
    printed = subprocess.run([sys.executable, "-m", "chaos.cli", "serve", "--openapi"],
                             cwd=ROOT, capture_output=True, text=True, check=True)
    assert printed.stdout == openapi_text()


def test_the_api_document_names_exactly_the_served_routes(served: Served):
    documented = {(path, method.upper())
                  for path, methods in json.loads(openapi_text())["paths"].items()
                  for method in methods}
    table = Routes(None, None, None, {}).table()  # type: ignore[arg-type]
    assert documented == {(path, method) for path, method, _ in table}
    for path, method in documented:
        answer = call(served.url, method, path, {"unknown": 1} if method == "POST" else None)
        assert answer.status in (200, 422), (method, path, answer)


def test_unknown_routes_and_methods_get_json_errors(served: Served):
    missing = call(served.url, "GET", "/v2/anything")
    assert (missing.status, missing.json) == (404, {
        "error": "not_found", "field": None,
        "message": "no route /v2/anything; see /openapi.json for the routes"})
    wrong = call(served.url, "DELETE", "/v1/write")
    assert (wrong.status, wrong.json["error"]) == (405, "method_not_allowed")
    assert wrong.headers["allow"] == "POST"


def test_what_the_routes_do_not_take_is_answered_by_starlettes_router(served: Served):
    """The service finds its own routes by method and path; a HEAD, a trailing slash or
    a wrong method must still get the router's answers, each counted by the metrics."""
    head = call(served.url, "HEAD", "/healthz")
    assert (head.status, head.body) == (200, b"")
    assert head.headers["content-type"] == "application/json"
    slash = call(served.url, "POST", "/v1/read/", {"namespace": "routes-d", "entity_id": "u"})
    assert (slash.status, slash.headers["location"]) == (307, f"{served.url}/v1/read")
    wrong = call(served.url, "GET", "/v1/read")
    assert (wrong.status, wrong.json["error"], wrong.headers["allow"]) == (
        405, "method_not_allowed", "POST")
    exposition = call(served.url, "GET", "/metrics").body.decode()
    assert 'memcert_http_requests_total{method="HEAD",route="/healthz",status="200"}' in \
        exposition


def test_sigterm_stops_gracefully_and_a_restart_serves_the_same_store(tmp_path: Path):
    with Served.start(str(tmp_path / "store.sqlite3")) as running:
        call(running.url, "POST", "/v1/write", _write("routes-r", "u1", "a", "b", 1, "r1"))
        assert running.stop() == 0
        assert running.lines[-1] == "memcert: stopped"
        running.restart()
        read = call(running.url, "POST", "/v1/read", {"namespace": "routes-r",
                                                      "entity_id": "u1"})
        assert [r["value"] for r in read.json["records"]] == ["b"]


def test_a_frozen_service_answers_nothing_until_killed_and_restarted(tmp_path: Path):
    """What the crash nemesis relies on: a request sent after freeze() gets no answer
    (so a kill then cuts it short for certain), and the store is whole after a restart."""
    with Served.start(str(tmp_path / "store.sqlite3")) as running:
        call(running.url, "POST", "/v1/write", _write("routes-f", "u1", "a", "b", 1, "f1"))
        running.freeze()
        with pytest.raises(TimeoutError):
            call(running.url, "POST", "/v1/read", {"namespace": "routes-f", "entity_id": "u1"},
                 timeout_s=0.5)
        running.kill()
        assert not running.running
        running.restart()
        read = call(running.url, "POST", "/v1/read", {"namespace": "routes-f",
                                                      "entity_id": "u1"})
        assert [r["value"] for r in read.json["records"]] == ["b"]


def test_sigterm_as_soon_as_the_service_is_announced_stops_it_gracefully(tmp_path: Path):
    """The announcement comes before uvicorn takes the signals over; a script that stops
    the service at once must not meet a handler that ignores SIGTERM, or kills it with
    its store open."""
    for _ in range(3):
        with Served.start(str(tmp_path / "store.sqlite3")) as running:
            assert running.stop() == 0
            assert running.lines[-1] == "memcert: stopped"


def test_a_sqlite_file_is_served_by_two_handles_unless_told_otherwise(served: Served):
    """Writers beyond the second would only sleep in SQLite's busy handler."""
    def writes(worker: int) -> None:
        for n in range(6):
            call(served.url, "POST", "/v1/write",
                 _write("routes-h", f"u{worker}", "city", f"c{n}", n + 1, f"h{worker}-{n}"))

    threads = [threading.Thread(target=writes, args=(w,)) for w in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    answer = call(served.url, "GET", "/metrics")
    opened = next(s.value for family in text_string_to_metric_families(answer.body.decode())
                  for s in family.samples if s.name == "memcert_http_store_handles")
    assert opened == 2


@pytest.mark.parametrize(("handles", "db", "expected"), [
    (None, "store.sqlite3", 2),
    (None, "postgresql://memcert@127.0.0.1/memcert", 8),
    (None, ":memory:", 1),
    (5, "store.sqlite3", 5),
    (5, "postgresql://memcert@127.0.0.1/memcert", 5),
    (5, ":memory:", 1),
])
def test_the_handles_follow_the_database_unless_given(handles, db, expected):
    assert ServiceOptions(handles=handles).handles_for(normalize_url(db)) == expected


@pytest.mark.parametrize("handles", [0, -1, True, 2.0])
def test_handles_must_be_a_positive_int(handles):
    with pytest.raises(InvalidArgument) as refused:
        ServiceOptions(handles=handles)
    assert str(refused.value) == f"handles={handles!r} must be an int >= 1."
