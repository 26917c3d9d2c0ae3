"""The reference store over HTTP: ``memcert serve``, speaking the protocol in docs/http-protocol.md.

Any backend that speaks the same protocol, in any language, can be certified through
``invariants.adapters.http``. This package needs Starlette and uvicorn; importing
``reference_store`` alone does not import it.
"""

from __future__ import annotations

from .app import build_app
from .openapi import PROTOCOL_VERSION, openapi_document, openapi_text
from .options import DEFAULT_HOST, DEFAULT_PORT, ServiceOptions, is_loopback
from .server import serve, url_of

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PROTOCOL_VERSION",
    "ServiceOptions",
    "build_app",
    "is_loopback",
    "openapi_document",
    "openapi_text",
    "serve",
    "url_of",
]
