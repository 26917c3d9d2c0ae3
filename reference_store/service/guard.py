"""Bearer-token authentication for every route except the health check and the API document.

``/healthz`` and ``/openapi.json`` stay open because a load balancer and a client
generator must reach them without a secret, and they reveal nothing stored. The token
is compared in constant time, so its prefix cannot be guessed from response times; the
scheme name matches in any case, as HTTP says.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Collection

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerGuard"]


class BearerGuard:
    """ASGI middleware answering 401 to any request without ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str, public: Collection[str]) -> None:
        self.app = app
        self._expected = token.encode()
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({
            "error": "unauthorized", "field": "Authorization",
            "message": "this service needs the header 'Authorization: Bearer <token>' "
                       "with the token it was started with",
        }).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="memcert"'),
        ]})
        await send({"type": "http.response.body", "body": body})

    def _allowed(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(
                    credentials.strip(), self._expected)
        return False
