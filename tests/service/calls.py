"""Raw HTTP calls for the service tests: exact bytes in, status, headers and body out."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "call", "export"]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def call(url: str, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
         token: str | None = None, headers: dict[str, str] | None = None,
         timeout_s: float = 10.0) -> Answer:
    """One request on a fresh connection; ``body`` is sent as JSON unless ``raw`` is given."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    sent = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    wanted = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        wanted["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, sent, wanted)
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()},
                      response.read())
    finally:
        connection.close()


def export(url: str, token: str | None = None) -> bytes:
    """The whole store as the service exports it."""
    answer = call(url, "GET", "/v1/export", token=token)
    assert answer.status == 200, answer
    return answer.body
