"""A small HTTP service of memcert's protocol, durable or not, to certify under crashes.

    python -m chaos.examples.http_service --port 8700 --data DIR            # async
    python -m chaos.examples.http_service --port 8700 --data DIR --durable  # fixed

It keeps the passing dict store (:mod:`chaos.examples.passing_dict`) in memory and an
operation log in ``DIR/ops.jsonl``, replayed at start, so a restart on the same folder
comes back with every logged operation. What differs is when an operation reaches the
log:

- by default, it is answered at once and a background thread appends the waiting
  operations every 50 ms: the bug. Every run without a crash certifies it; a SIGKILL
  loses what was answered and not yet appended, which ``crash_restart`` sees as lost
  writes and a resurrected entity (``memcert certify URL --service-cmd ...``);
- with ``--durable``, it is appended (and flushed to the operating system, which a
  SIGKILL of the process cannot undo) before the answer.

Only the five contract routes and ``/healthz`` are served, on the standard library's
threading HTTP server, bound to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from invariants.backend import Ack, Delete, Restore, Write

from .passing_dict import PassingDict

__all__ = ["BATCH_S", "Service", "main"]

BATCH_S = 0.05
"""How often the async log is appended to, by default."""

_OPS: dict[str, type[Write] | type[Delete] | type[Restore]] = {
    "write": Write, "delete": Delete, "restore": Restore}


class Service:
    """The store, its log, and the lock that keeps the log in the order of the store."""

    def __init__(self, data: Path, *, durable: bool, batch_s: float = BATCH_S) -> None:
        data.mkdir(parents=True, exist_ok=True)
        self.store = PassingDict()
        self.lock = threading.Lock()
        self.durable = durable
        self.batch_s = batch_s
        self.waiting: list[str] = []
        path = data / "ops.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    self._apply(json.loads(line))
        self.log: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - the process's
        if not durable:
            threading.Thread(target=self._append_every_batch, daemon=True).start()

    def operate(self, route: str, body: dict[str, Any]) -> Ack:
        with self.lock:
            ack = self._apply({"route": route, **body})
            line = json.dumps({"route": route, **body})
            if self.durable:
                self.log.write(line + "\n")
                self.log.flush()
            else:
                self.waiting.append(line)
        return ack

    def reset(self) -> None:
        with self.lock:
            self.store.reset()
            self.waiting.clear()
            self.log.truncate(0)
            self.log.flush()

    def _apply(self, entry: dict[str, Any]) -> Ack:
        fields = dict(entry)
        route = fields.pop("route")
        op = _OPS[route](**fields)
        act: Callable[[Any], Ack] = getattr(self.store, route)
        return act(op)

    def _append_every_batch(self) -> None:
        pause = threading.Event()
        while not pause.wait(self.batch_s):
            with self.lock:
                waiting, self.waiting = self.waiting, []
                if waiting:
                    self.log.write("".join(line + "\n" for line in waiting))
                    self.log.flush()


def _handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._answer(200, {"status": "ok"})
            else:
                self._answer(404, {"error": "not_found", "field": None, "message": self.path})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            route = self.path.rsplit("/", 1)[-1]
            try:
                body = json.loads(raw or b"{}")
                if route in _OPS:
                    ack = service.operate(route, body)
                    self._answer(200, {"applied": ack.applied, "version": ack.version,
                                       "reason": ack.reason})
                elif route == "read":
                    records = service.store.read(body["namespace"], body["entity_id"])
                    self._answer(200, {"records": [
                        {"entity_id": r.entity_id, "attribute": r.attribute, "value": r.value,
                         "causal_seq": r.causal_seq, "version": r.version} for r in records]})
                elif route == "reset":
                    service.reset()
                    self._answer(200, {"reset": True})
                else:
                    self._answer(404, {"error": "not_found", "field": None,
                                       "message": self.path})
            except (KeyError, TypeError, ValueError) as error:
                self._answer(422, {"error": "invalid_input", "field": None,
                                   "message": f"{type(error).__name__}: {error}"})

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: memcert keeps the service's output for errors only."""

    return Handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.examples.http_service",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1")
    parser.add_argument("--data", type=Path, required=True, help="folder of the op log")
    parser.add_argument("--durable", action="store_true",
                        help="log each operation before answering it")
    parser.add_argument("--batch-s", type=float, default=BATCH_S,
                        help="without --durable: how often the log is appended to "
                             f"(default {BATCH_S:g} s)")
    args = parser.parse_args(argv)
    service = Service(args.data, durable=args.durable, batch_s=args.batch_s)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(service))
    server.daemon_threads = True
    print(f"serving on http://127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
