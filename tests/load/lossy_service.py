"""A known-bad memory service speaking memcert's HTTP protocol: it acknowledges every write
and silently drops every third one.

Small on purpose (the standard library's HTTP server, a dict under a lock), so a test
of ``memcert load`` can prove that a load run finds lost writes through Locust, merged
histories and all, rather than only ever passing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LossyStore:
    """Last-writer-wins by causal_seq, with tombstones, that forgets every third write."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        self.deleted: set[tuple[str, str]] = set()
        self.writes = 0

    def answer(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            key = (body.get("namespace", ""), body.get("entity_id", ""))
            if route == "write":
                self.writes += 1
                if key in self.deleted:
                    return {"applied": False, "version": None, "reason": "tombstoned"}
                if self.writes % 3 == 0:
                    return {"applied": True, "version": 1, "reason": None}  # the bug
                slot = self.records.setdefault(key, {})
                current = slot.get(body["attribute"])
                if current is not None and current["causal_seq"] > body["causal_seq"]:
                    return {"applied": False, "version": None, "reason": "stale"}
                slot[body["attribute"]] = {
                    "entity_id": key[1], "attribute": body["attribute"], "value": body["value"],
                    "causal_seq": body["causal_seq"], "version": 1}
                return {"applied": True, "version": 1, "reason": None}
            if route == "delete":
                self.records.pop(key, None)
                self.deleted.add(key)
                return {"applied": True, "version": None, "reason": None}
            if route == "restore":
                applied = key in self.deleted
                self.deleted.discard(key)
                return {"applied": applied, "version": None,
                        "reason": None if applied else "not_deleted"}
            if route == "read":
                records = sorted(self.records.get(key, {}).values(),
                                 key=lambda r: r["causal_seq"])
                return {"records": records}
            return {"hits": [], "access_count": 0, "archived": 0}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store: LossyStore

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route = self.path.rsplit("/", 1)[-1]
        self._send(self.store.answer(route, json.loads(raw or b"{}")))

    def do_GET(self) -> None:
        self._send({})

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@contextmanager
def lossy_service() -> Iterator[str]:
    """The service on a free loopback port, for the length of the block; yields its URL."""
    handler = type("Handler", (_Handler,), {"store": LossyStore()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
