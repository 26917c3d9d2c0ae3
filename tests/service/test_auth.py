"""The bearer token: required off loopback, checked on every route but two."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from invariants.errors import FactoryError
from invariants.factory import http_factory

from .calls import call
from .server import ROOT, Served, serve_command

TOKEN = "s3cret-token-for-tests"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("guarded")
    with Served.start(str(folder / "store.sqlite3"), token=TOKEN) as running:
        yield running


def test_a_public_address_without_a_token_is_refused_before_binding(tmp_path: Path):
    started = time.monotonic()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(serve_command(str(tmp_path / "never.sqlite3"), host="0.0.0.0"),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "memcert: --host 0.0.0.0 is not a loopback address, so anyone who can reach it could "
        "rewrite or wipe the store; pass --token T (or set MEMCERT_TOKEN), or bind "
        "127.0.0.1.\n")
    assert not (tmp_path / "never.sqlite3").exists()
    assert time.monotonic() - started < 30


def test_requests_without_the_right_token_get_401(guarded: Served):
    body = {"namespace": "auth", "entity_id": "u1"}
    for token in (None, "wrong", TOKEN + "x", ""):
        answer = call(guarded.url, "POST", "/v1/read", body, token=token)
        assert answer.status == 401, token
        assert answer.headers["www-authenticate"] == 'Bearer realm="memcert"'
        assert answer.json == {
            "error": "unauthorized", "field": "Authorization",
            "message": "this service needs the header 'Authorization: Bearer <token>' with "
                       "the token it was started with"}
    assert call(guarded.url, "GET", "/metrics").status == 401
    assert call(guarded.url, "GET", "/v1/export", token="wrong").status == 401
    assert call(guarded.url, "POST", "/v1/read", body, token=TOKEN).json == {"records": []}
    lower = call(guarded.url, "POST", "/v1/read", body,
                 headers={"Authorization": f"bearer {TOKEN}"})
    assert lower.status == 200
    assert call(guarded.url, "GET", "/metrics", token=TOKEN).status == 200


def test_health_and_the_api_document_need_no_token(guarded: Served):
    assert call(guarded.url, "GET", "/healthz").status == 200
    assert call(guarded.url, "GET", "/openapi.json").status == 200


def test_the_adapter_factory_reports_a_refused_token(guarded: Served,
                                                     monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MEMCERT_TOKEN", "wrong")
    with pytest.raises(FactoryError) as refused:
        http_factory(guarded.url)
    assert str(refused.value) == (
        f"backend {guarded.url!r}: {guarded.url}/v1/read refused the token (HTTP 401); pass "
        "the service's token with --token T or MEMCERT_TOKEN")
    monkeypatch.setenv("MEMCERT_TOKEN", TOKEN)
    backend = http_factory(guarded.url)()
    try:
        assert backend.read("auth", "nobody") == []
    finally:
        backend.close()
