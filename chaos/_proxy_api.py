"""A small JSON control API over fault proxies, shaped like Toxiproxy's, on loopback.

It lets a process that is not the one running the proxies (a Locust worker, a shell
script, a Toxiproxy client library) add and remove toxics and take proxies down. The
proxies themselves are created in Python and handed over; the API does not create or
delete them. Routes, all JSON:

    GET    /proxies                              every proxy, with its toxics
    GET    /proxies/NAME                         one proxy
    POST   /proxies/NAME        {"enabled": b}   disable or enable it (PATCH too)
    GET    /proxies/NAME/toxics                  its toxics, in order
    POST   /proxies/NAME/toxics {toxic}          add one: name (default TYPE_STREAM),
                                                 type, stream, toxicity, attributes
    GET    /proxies/NAME/toxics/T                one toxic
    POST   /proxies/NAME/toxics/T {changes}      update toxicity and attributes (PATCH too)
    DELETE /proxies/NAME/toxics/T                remove it
    POST   /reset                                heal every proxy
    GET    /counters                             memcert's counters, per proxy

A refused request gets ``{"error": message, "status": code}``: 400 for a bad toxic
(the message names the field), 404 for an unknown proxy or toxic, 409 for a toxic name
already in use.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from invariants.errors import InvalidArgument
from scenarios.network_plan import KINDS, Toxic

if TYPE_CHECKING:
    from .proxy import FaultProxy

__all__ = ["ControlServer"]

_MAX_BODY = 1 << 16


class ControlServer:
    """Serves the control API for ``proxies`` (by name) on ``host:port`` (0: any free)."""

    def __init__(
        self, proxies: Mapping[str, FaultProxy], *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.proxies = proxies
        self._server = http.server.ThreadingHTTPServer((host, port), _handler(proxies))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return (str(host), int(port))

    def start(self) -> ControlServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="memcert-proxy-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _handler(proxies: Mapping[str, FaultProxy]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def do_PATCH(self) -> None:
            self._answer("POST")

        def do_DELETE(self) -> None:
            self._answer("DELETE")

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a chaos run's output is its report, not an access log."""

        def _answer(self, method: str) -> None:
            try:
                status, body = _route(proxies, method, self._parts(), self._body(method))
            except _Refused as refused:
                status, body = refused.status, {"error": str(refused), "status": refused.status}
            except InvalidArgument as error:
                status, body = 400, {"error": str(error), "status": 400}
            payload = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _parts(self) -> list[str]:
            path = self.path.split("?", 1)[0]
            return [unquote(part) for part in path.split("/") if part]

        def _body(self, method: str) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            if method != "POST" or length == 0:
                return {}
            if length > _MAX_BODY:
                raise _Refused(400, f"body of {length} bytes is over {_MAX_BODY}")
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError as error:
                raise _Refused(400, f"body is not JSON: {error}") from None
            if not isinstance(body, dict):
                raise _Refused(400, "body is not a JSON object. Send {...}.")
            return body

    return Handler


def _route(
    proxies: Mapping[str, FaultProxy], method: str, parts: list[str], body: dict[str, Any]
) -> tuple[int, Any]:
    match method, parts:
        case "GET", ["proxies"]:
            return 200, {name: _proxy_json(proxy) for name, proxy in proxies.items()}
        case "GET", ["counters"]:
            return 200, {name: proxy.counters() for name, proxy in proxies.items()}
        case "POST", ["reset"]:
            for proxy in proxies.values():
                proxy.heal()
            return 204, None
        case "GET", ["proxies", name]:
            return 200, _proxy_json(_proxy(proxies, name))
        case "POST", ["proxies", name]:
            proxy = _proxy(proxies, name)
            enabled = body.get("enabled")
            if not isinstance(enabled, bool):
                raise _Refused(400, f"enabled={enabled!r} is not a boolean. Send true or false.")
            if enabled:
                proxy.enable()
            else:
                proxy.disable()
            return 200, _proxy_json(proxy)
        case "GET", ["proxies", name, "toxics"]:
            return 200, [toxic.to_json() for toxic in _proxy(proxies, name).toxics()]
        case "POST", ["proxies", name, "toxics"]:
            proxy = _proxy(proxies, name)
            toxic = _toxic_from(body)
            if any(existing.name == toxic.name for existing in proxy.toxics()):
                raise _Refused(409, f"toxic {toxic.name!r} already exists on proxy {name!r}")
            return 200, proxy.add(toxic).to_json()
        case "GET", ["proxies", name, "toxics", toxic_name]:
            return 200, _toxic(_proxy(proxies, name), toxic_name).to_json()
        case "POST", ["proxies", name, "toxics", toxic_name]:
            proxy = _proxy(proxies, name)
            _toxic(proxy, toxic_name)
            attributes = body.get("attributes", {})
            if not isinstance(attributes, dict):
                raise _Refused(400, f"attributes={attributes!r} is not a JSON object.")
            updated = proxy.update_toxic(toxic_name, toxicity=body.get("toxicity"), **attributes)
            return 200, updated.to_json()
        case "DELETE", ["proxies", name, "toxics", toxic_name]:
            proxy = _proxy(proxies, name)
            _toxic(proxy, toxic_name)
            proxy.remove_toxic(toxic_name)
            return 204, None
    raise _Refused(404, f"no route {method} /{'/'.join(parts)}")


def _proxy(proxies: Mapping[str, FaultProxy], name: str) -> FaultProxy:
    proxy = proxies.get(name)
    if proxy is None:
        raise _Refused(404, f"proxy {name!r} not found; proxies: {', '.join(proxies) or 'none'}")
    return proxy


def _toxic(proxy: FaultProxy, name: str) -> Toxic:
    for toxic in proxy.toxics():
        if toxic.name == name:
            return toxic
    raise _Refused(404, f"toxic {name!r} not found on proxy {proxy.name!r}")


def _toxic_from(body: dict[str, Any]) -> Toxic:
    unknown = set(body) - {"name", "type", "stream", "toxicity", "attributes"}
    if unknown:
        raise _Refused(400, f"unknown toxic fields: {', '.join(sorted(unknown))}")
    kind = body.get("type")
    if not isinstance(kind, str):
        raise _Refused(400, f"type={kind!r} is not a toxic type. Give one of {', '.join(KINDS)}.")
    stream = body.get("stream", "downstream")
    return Toxic(
        body.get("name", f"{kind}_{stream}"),
        kind,
        stream,
        body.get("toxicity", 1.0),
        body.get("attributes", {}),
    )


def _proxy_json(proxy: FaultProxy) -> dict[str, Any]:
    counters = proxy.counters()
    return {
        "name": proxy.name,
        "listen": counters["listen"],
        "upstream": counters["upstream"],
        "enabled": proxy.enabled,
        "toxics": [toxic.to_json() for toxic in proxy.toxics()],
    }
