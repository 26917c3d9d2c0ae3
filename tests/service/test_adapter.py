"""The HTTP adapter: what each server answer becomes, and how the runner records it.

A connection refused, a timeout or a 5xx must be an unknown outcome (``info``), never a
``fail``; only the server's own ``applied: false`` is a ``fail``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chaos.execute import run_plan
from invariants.adapters.http import HttpBackend, HttpFactory, OutcomeUnknown, ProtocolError
from invariants.backend import Ack, Restore, Write
from invariants.errors import FactoryError, InvalidArgument, InvalidInput, ValueTooLarge
from invariants.factory import load_factory
from invariants.history import HistoryRecorder
from reference_store import ReferenceStore
from scenarios.plan import Plan, Step

from .server import Served

WRITE = Write("adapter", "u1", "coffee", "likes tea", 1, "op-1")


def _plan() -> Plan:
    meta = {"fact": "f1", "slot": "coffee"}
    return Plan("adapter", 1, ((Step("write", "adapter", "u1", "coffee", "likes tea", meta),
                                Step("restore", "adapter", "u1")),))


def _completions(factory: HttpFactory) -> list[tuple[str, str, object]]:
    recorder = HistoryRecorder()
    run_plan(factory, _plan(), recorder, budget_s=30)
    return [(e.type, e.f, e.result) for e in recorder.history() if e.type != "invoke"
            and e.f != "read"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_is_an_unknown_outcome_recorded_as_info():
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(OutcomeUnknown) as refused:
        HttpBackend(url).write(WRITE)
    assert str(refused.value) == (
        f"POST {url}/v1/write: ConnectionRefusedError: [Errno 111] Connection refused; the "
        "write may or may not have been applied")
    assert [(kind, f) for kind, f, _ in _completions(HttpFactory(url))] == [
        ("info", "write"), ("info", "restore")]


def test_a_server_that_never_answers_is_a_timeout_recorded_as_info():
    with socket.socket() as silent:  # listens, never accepts: the kernel completes connects
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(OutcomeUnknown) as late:
            HttpBackend(url, timeout_s=0.2).write(WRITE)
        assert str(late.value) == (f"POST {url}/v1/write: no answer within 0.2 s; the write "
                                   "may or may not have been applied")
        completions = _completions(HttpFactory(url, timeout_s=0.2))
    assert [(kind, f) for kind, f, _ in completions] == [("info", "write"), ("info", "restore")]
    assert all("OutcomeUnknown: POST" in str(result) for _, _, result in completions)


def test_a_dead_url_is_a_usage_error_before_any_run():
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(FactoryError) as dead:
        load_factory(url)
    assert str(dead.value) == (
        f"backend {url!r} does not answer ([Errno 111] Connection refused); start the service "
        "(memcert serve) or check the URL")


@pytest.mark.parametrize(("url", "problem"), [
    ("http://user:pw@127.0.0.1:1", "holds credentials; pass the token with --token or "
                                   "MEMCERT_TOKEN, because the URL is written to reports"),
    ("http://127.0.0.1:1/?x=1", "has a query or fragment; give only http://host:port[/prefix]"),
    ("http://:8765", "is not http://host:port[/prefix]; for example http://127.0.0.1:8765"),
])
def test_urls_the_adapter_refuses(url: str, problem: str):
    with pytest.raises(InvalidArgument) as refused:
        HttpFactory(url)
    assert str(refused.value) == f"backend URL {url!r} {problem}"


def test_bad_input_raises_the_same_error_the_store_raises_in_process(served: Served):
    backend = HttpBackend(served.url)
    local = ReferenceStore(":memory:")
    try:
        for op in (Write("adapter", "u1", "coffee", "likes tea", -1, "bad-1"),
                   Write("adapter", "u1", "", "likes tea", 1, "bad-2"),
                   Write("a b", "u1", "coffee", "likes tea", 1, "bad-3"),
                   Write("adapter", "u1", "coffee", "\ud800", 1, "bad-4"),
                   Write("adapter", "u1", "coffee", "x" * 70_000, 1, "bad-5")):
            with pytest.raises(InvalidInput) as here:
                local.write(op)
            with pytest.raises(InvalidInput) as there:
                backend.write(op)
            assert (type(there.value), there.value.field, str(there.value)) == (
                type(here.value), here.value.field, str(here.value))
        assert isinstance(there.value, ValueTooLarge)
    finally:
        backend.close()
        local.close()


def test_contract_answers_round_trip(served: Served):
    backend = HttpBackend(served.url)
    try:
        assert backend.write(Write("adapter-rt", "u1", "coffee", "likes tea", 3, "rt-1")) == \
            Ack(True, 1)
        assert backend.write(Write("adapter-rt", "u1", "coffee", "likes mocha", 2, "rt-2")) == \
            Ack(False, 1, "stale")
        assert backend.restore(Restore("adapter-rt", "u1", 4, "rt-3")) == \
            Ack(False, None, "not_deleted")
        [record] = backend.read("adapter-rt", "u1")
        assert (record.value, record.causal_seq, record.version) == ("likes tea", 3, 1)
    finally:
        backend.close()


class _Canned(BaseHTTPRequestHandler):
    """Answers every POST with the status and body the test put on the server."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        status, body = self.server.answers[self.path.rsplit("/", 1)[1]]  # type: ignore[attr-defined]
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def canned() -> Iterator[tuple[str, dict[str, tuple[int, object]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    server.answers = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.answers  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def test_what_each_server_answer_becomes_in_the_history(canned):
    url, answers = canned
    answers["write"] = (200, {"applied": False, "version": None, "reason": "tombstoned"})
    answers["restore"] = (501, {"error": "not_implemented", "field": None,
                                "message": "no restore here"})
    answers["read"] = (200, {"records": []})
    assert _completions(HttpFactory(url)) == [
        ("fail", "write", Ack(False, None, "tombstoned")),
        ("fail", "restore", f"unsupported: NotImplementedError: {url}/v1/restore does not "
                            "support restore (not_implemented: no restore here)")]
    answers["write"] = (503, {"error": "unavailable", "field": None, "message": "db down"})
    answers["restore"] = (200, b"<html>proxy error</html>")
    [(write, _, said), (restore, _, garbled)] = _completions(HttpFactory(url))
    assert (write, restore) == ("info", "info")
    assert said == (f"OutcomeUnknown: POST {url}/v1/write answered HTTP 503 (unavailable: db "
                    "down); the write may or may not have been applied")
    assert garbled.startswith(f"ProtocolError: POST {url}/v1/restore answered 200 with ")


def test_answers_outside_the_protocol_are_protocol_errors(canned):
    url, answers = canned
    answers["write"] = (200, {"applied": "yes"})
    answers["read"] = (404, {"detail": "Not Found"})
    backend = HttpBackend(url)
    with pytest.raises(ProtocolError, match="an ack needs applied"):
        backend.write(WRITE)
    with pytest.raises(ProtocolError) as missing:
        backend.read("adapter", "u1")
    assert str(missing.value) == (
        f"POST {url}/v1/read answered HTTP 404 ({{'detail': 'Not Found'}}), which the "
        "protocol does not allow for read")
    with pytest.raises(FactoryError, match="does not speak memcert's HTTP protocol v1"):
        HttpFactory(url).check()


def test_a_service_is_listed_a_page_at_a_time_and_audited(served: Served, monkeypatch,
                                                          tmp_path):
    import invariants.adapters.http as http_adapter
    from chaos.audit import AuditOptions, audit_factory
    from invariants.capabilities import enumeration_supported

    monkeypatch.setattr(http_adapter, "ENTITY_PAGE", 2)
    backend = HttpBackend(served.url)
    try:
        for number in range(5):
            backend.write(Write("adapter-list", f"u{number}", "city", f"lives in c{number}",
                                1, f"l{number}"))
        assert enumeration_supported(backend)
        assert list(backend.entities("adapter-list")) == [f"u{n}" for n in range(5)]
        assert list(backend.entities("adapter-list-none")) == []
    finally:
        backend.close()
    result = audit_factory(HttpFactory(served.url), served.url,
                           AuditOptions(namespaces=("adapter-list",), out=tmp_path / "audit"))
    assert (result.entities, result.records, result.findings) == (5, 5, 0)
    assert result.exit_code == 0


def test_a_service_without_the_entities_route_cannot_be_listed(served: Served):
    backend = HttpBackend(served.url + "/elsewhere")
    try:
        with pytest.raises(NotImplementedError, match="audit an export"):
            list(backend.entities("ns"))
    finally:
        backend.close()
