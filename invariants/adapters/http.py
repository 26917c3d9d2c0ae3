"""Certify any backend that speaks memcert's HTTP protocol (docs/http-protocol.md).

Each handle keeps one persistent HTTP/1.1 connection from the standard library, so this
adapter adds no dependency and no behaviour of its own: every contract call is one
request, never retried, never reordered. What the server says decides the result:

- ``200`` with ``applied: false`` is the only ``Ack(applied=False)``: the server said
  the operation did not take effect.
- ``422`` raises the store's own :class:`~invariants.errors.InvalidInput` (or
  :class:`~invariants.errors.ValueTooLarge`), rebuilt from the field the server named.
- ``501`` from restore raises ``NotImplementedError``: the capability is absent.
- ``401``/``403`` raise :class:`~invariants.errors.InvalidArgument`: the token is wrong,
  which no retry will fix.
- A refused or reset connection, a timeout, a ``5xx``, or an answer that is not the
  protocol raises :class:`OutcomeUnknown`: the operation may or may not have been
  applied, and memcert's runner records it as ``info``, never as ``fail``.

A connection left idle longer than :data:`IDLE_RECONNECT_S` is replaced before the next
request instead of being reused, because a server may have closed it meanwhile, and a
request lost on a closed connection would be an unknown outcome for no reason.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import fields
from typing import Any, Final, TypeGuard

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import FactoryError, InvalidArgument, InvalidInput, ValueTooLarge

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ENTITY_PAGE",
    "IDLE_RECONNECT_S",
    "HttpBackend",
    "HttpFactory",
    "OutcomeUnknown",
    "ProtocolError",
    "is_http_url",
]

DEFAULT_TIMEOUT_S: Final = 10.0
IDLE_RECONNECT_S: Final = 2.0
"""Reconnect before reusing a connection idle this long; servers keep one at least 5 s."""

ENTITY_PAGE: Final = 1000
"""Entity ids asked for per request when a service is listed."""

PROBE: Final = ("memcert-probe", "probe")
"""The entity :meth:`HttpFactory.check` reads to prove the service answers."""

_SCHEMES: Final = ("http", "https")


class OutcomeUnknown(Exception):
    """The request may or may not have taken effect: no answer, or no usable one."""


class ProtocolError(OutcomeUnknown):
    """The server answered, but not in memcert's HTTP protocol."""


def is_http_url(spec: str) -> bool:
    """Whether a backend spec names a service rather than a ``package.module:callable``."""
    return spec.lower().startswith(("http://", "https://"))


class _Base:
    """A parsed service URL: scheme, host, port and the path prefix routes hang under."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in _SCHEMES or not parts.hostname:
            raise InvalidArgument(f"backend URL {url!r} is not http://host:port[/prefix]; "
                                  "for example http://127.0.0.1:8765")
        if parts.username is not None or parts.password is not None:
            raise InvalidArgument(f"backend URL {url!r} holds credentials; pass the token "
                                  "with --token or MEMCERT_TOKEN, because the URL is written "
                                  "to reports")
        if parts.query or parts.fragment:
            raise InvalidArgument(f"backend URL {url!r} has a query or fragment; give only "
                                  "http://host:port[/prefix]")
        try:
            port = parts.port
        except ValueError as error:
            raise InvalidArgument(f"backend URL {url!r}: {error}") from None
        self.url = url
        self.secure = parts.scheme.lower() == "https"
        self.host = parts.hostname
        self.port = port if port is not None else (443 if self.secure else 80)
        self.prefix = parts.path.rstrip("/")

    def connect(self, timeout_s: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.secure else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=timeout_s)

    def where(self, route: str) -> str:
        return f"{self.url.rstrip('/')}/v1/{route}"


class HttpBackend:
    """A :class:`~invariants.backend.MemoryBackend` handle onto a service, one connection each.

    Like any handle it may be called from another thread than the one that made it, but
    never from two at once.
    """

    def __init__(self, url: str, *, token: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        if not timeout_s > 0:
            raise InvalidArgument(f"timeout_s={timeout_s!r} must be > 0 seconds.")
        self._base = _Base(url)
        self._timeout_s = timeout_s
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "User-Agent": "memcert-http-adapter/1"}
        if token is not None:
            self._headers["Authorization"] = f"Bearer {token}"
        self._connection: http.client.HTTPConnection | None = None
        self._last_used = 0.0

    @property
    def url(self) -> str:
        return self._base.url

    # -- the contract -------------------------------------------------------------------

    def write(self, op: Write) -> Ack:
        return _ack(self._call("write", _fields(op)))

    def delete(self, op: Delete) -> Ack:
        return _ack(self._call("delete", _fields(op)))

    def restore(self, op: Restore) -> Ack:
        return _ack(self._call("restore", _fields(op)))

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        body = self._call("read", {"namespace": namespace, "entity_id": entity_id})
        records = body.get("records")
        if not isinstance(records, list):
            raise ProtocolError(f"{self._base.where('read')} answered {body!r}, which has no "
                                "'records' array")
        return [_record(item, self._base.where("read")) for item in records]

    def reset(self) -> None:
        self._call("reset", {})

    def entities(self, namespace: str) -> Iterator[str]:
        """Every entity id of ``namespace``, a page at a time through ``POST /v1/entities``
        (docs/http-protocol.md): the optional capability ``memcert audit`` lists a service
        by. A service without the route raises NotImplementedError."""
        body: dict[str, Any] = {"namespace": namespace, "limit": ENTITY_PAGE}
        while True:
            page = self._call("entities", body)
            ids, after = page.get("entity_ids"), page.get("next")
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or not (
                    after is None or isinstance(after, str)):
                raise ProtocolError(f"{self._base.where('entities')} answered {page!r}; a page "
                                    "needs entity_ids (strings) and next (a string or null)")
            yield from ids
            if after is None:
                return
            body = {**body, "after": after}

    def close(self) -> None:
        self._drop()

    # -- one request ----------------------------------------------------------------------

    def _call(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``route`` and return the JSON object of a 200, or raise."""
        where = self._base.where(route)
        connection = self._connect()
        try:
            connection.request("POST", f"{self._base.prefix}/v1/{route}", _encode(body),
                               self._headers)
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as error:
            self._drop()
            raise OutcomeUnknown(f"POST {where}: {_describe(error, self._timeout_s)}; the "
                                 f"{route} may or may not have been applied") from error
        self._last_used = time.monotonic()
        if response.will_close:
            self._drop()
        answer = _decode(raw)
        if response.status == 200:
            if not isinstance(answer, dict):
                raise ProtocolError(f"POST {where} answered 200 with {raw[:200]!r}, not a "
                                    "JSON object; the outcome is unknown")
            return answer
        raise _refusal(response.status, answer, where, route, body)

    def _connect(self) -> http.client.HTTPConnection:
        idle = time.monotonic() - self._last_used
        if self._connection is not None and idle > IDLE_RECONNECT_S:
            self._drop()
        if self._connection is None:
            self._connection = self._base.connect(self._timeout_s)
        return self._connection

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class HttpFactory:
    """A backend factory for a service URL: every call opens a new handle onto it."""

    shares_across_processes = True

    def __init__(self, url: str, *, token: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        _Base(url)
        self.url = url
        self.token = token
        self.timeout_s = timeout_s

    def __call__(self) -> HttpBackend:
        return HttpBackend(self.url, token=self.token, timeout_s=self.timeout_s)

    def check(self) -> None:
        """Read once, so a service that is down, or refuses the token, fails before a run."""
        backend = self()
        try:
            backend.read(*PROBE)
        except ProtocolError as error:
            raise FactoryError(f"backend {self.url!r} does not speak memcert's HTTP protocol "
                               f"v1 ({error}); see docs/http-protocol.md") from error
        except OutcomeUnknown as error:
            raise FactoryError(f"backend {self.url!r} does not answer ({error.__cause__ or error}"
                               "); start the service (memcert serve) or check the URL") from error
        except InvalidArgument as error:
            raise FactoryError(f"backend {self.url!r}: {error}") from error
        finally:
            backend.close()


def _fields(op: Write | Delete | Restore) -> dict[str, Any]:
    body = {field.name: getattr(op, field.name) for field in fields(op)}
    for optional in ("source", "reason"):
        if optional in body and body[optional] is None:
            del body[optional]
    return body


def _encode(body: dict[str, Any]) -> bytes:
    """JSON with non-ASCII escaped, so even a lone surrogate reaches the server to refuse."""
    for name, value in body.items():
        if value is not None and not isinstance(value, str | int):
            raise InvalidInput(name, value, "cannot be sent as JSON text or a number",
                               "Pass str for text and int for causal_seq.")
    return json.dumps(body, allow_nan=False).encode("ascii")


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _refusal(status: int, answer: Any, where: str, route: str,
             sent: dict[str, Any]) -> Exception:
    error = answer if isinstance(answer, dict) else {}
    code = error.get("error")
    message = error.get("message") if isinstance(error.get("message"), str) else None
    said = f"{code}: {message}" if message else repr(answer)
    if status == 422:
        field = error.get("field")
        field = field if isinstance(field, str) else "body"
        problem = error.get("problem")
        fix = error.get("fix")
        if not isinstance(problem, str) or not isinstance(fix, str):
            problem, fix = f"was refused by the server ({message or 'no message'})", \
                "See docs/http-protocol.md for the field's rules."
        kind = ValueTooLarge if code == "value_too_large" else InvalidInput
        return kind(field, sent.get(field), problem, fix)
    if status in (401, 403):
        return InvalidArgument(f"{where} refused the token (HTTP {status}); pass the service's "
                               "token with --token T or MEMCERT_TOKEN")
    if status == 501 and route == "restore":
        return NotImplementedError(f"{where} does not support restore ({said})")
    if status == 404 and route == "entities":
        return NotImplementedError(f"{where} has no such route, so the service's entities "
                                   "cannot be listed; audit an export of its data instead")
    if status >= 500:
        return OutcomeUnknown(f"POST {where} answered HTTP {status} ({said}); the {route} may "
                              "or may not have been applied")
    return ProtocolError(f"POST {where} answered HTTP {status} ({said}), which the protocol "
                         f"does not allow for {route}")


def _ack(body: dict[str, Any]) -> Ack:
    applied, version, reason = body.get("applied"), body.get("version"), body.get("reason")
    if not isinstance(applied, bool) or not _int_or_none(version) or not (
            reason is None or isinstance(reason, str)):
        raise ProtocolError(f"an ack needs applied (bool), version (int or null) and reason "
                            f"(str or null); the server answered {body!r}")
    return Ack(applied, version, reason)


def _record(item: Any, where: str) -> Record:
    if isinstance(item, dict):
        entity_id, attribute, value = item.get("entity_id"), item.get("attribute"), \
            item.get("value")
        causal_seq, version = item.get("causal_seq"), item.get("version")
        if isinstance(entity_id, str) and isinstance(attribute, str) and isinstance(
                value, str) and _int(causal_seq) and _int(version):
            return Record(entity_id, attribute, value, causal_seq, version)
    raise ProtocolError(f"{where} answered a record {item!r}; a record needs entity_id, "
                        "attribute and value (str), causal_seq and version (int)")


def _int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_none(value: Any) -> bool:
    return value is None or _int(value)


def _describe(error: BaseException, timeout_s: float) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return f"{type(error).__name__}: {error}"
