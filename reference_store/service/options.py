"""What ``memcert serve`` is told, checked before anything binds a port or opens a database.

A service reachable from other machines without a token would hand anyone on the
network the power to rewrite or wipe every memory, so the token rule is enforced here,
where a missing token is a usage error, and not discovered by the first stranger.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from sqlalchemy.engine import URL

from invariants.errors import InvalidArgument

from ..engine import is_memory_url

__all__ = ["DEFAULT_HANDLES", "DEFAULT_HOST", "DEFAULT_PORT", "ServiceOptions", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_HANDLES = {"sqlite": 2, "postgresql": 8}
"""Handles when none are asked for, by database. SQLite takes one writer at a time, and
writers beyond the second only wait in its busy handler, which sleeps in steps of up to
100 ms, so more handles lengthen the tail of a write-heavy load without serving it
faster (docs/performance.md, "HTTP service"). PostgreSQL writers wait on row locks of
their own entity, so more of them overlap."""
MAX_BODY_BYTES = 1024 * 1024
MAX_IMPORT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ServiceOptions:
    """How to serve: where to bind, which database, and who may call.

    ``db_url`` None means the reference store's default (``MEMCERT_DB_URL``, else a
    SQLite file in a fresh temporary folder). ``handles`` bounds the requests the store
    works on at once: each gets a store handle of its own, because a handle must never
    be used by two threads at the same time. None takes :data:`DEFAULT_HANDLES` for the
    database (a private in-memory one always has exactly one).
    """

    db_url: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    handles: int | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_import_bytes: int = MAX_IMPORT_BYTES

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) \
                or not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port={self.port!r} must be an int in 0..65535 "
                                  "(0 picks a free port).")
        if self.handles is not None and (isinstance(self.handles, bool)
                                         or not isinstance(self.handles, int)
                                         or self.handles < 1):
            raise InvalidArgument(f"handles={self.handles!r} must be an int >= 1.")
        if self.token is not None and not self.token.strip():
            raise InvalidArgument("the token is empty; pass a non-blank --token, or none at "
                                  "all on a loopback address.")
        if self.token is None and not is_loopback(self.host):
            raise InvalidArgument(
                f"--host {self.host} is not a loopback address, so anyone who can reach it "
                "could rewrite or wipe the store; pass --token T (or set MEMCERT_TOKEN), or "
                "bind 127.0.0.1.")
        for name in ("max_body_bytes", "max_import_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
                raise InvalidArgument(f"{name}={value!r} must be an int >= 1024.")

    def handles_for(self, url: URL) -> int:
        """The handles to open onto ``url``: those asked for, else the database's
        default; a private in-memory database lives in one connection, so one."""
        if is_memory_url(url):
            return 1
        return self.handles or DEFAULT_HANDLES[url.get_backend_name()]


def is_loopback(host: str) -> bool:
    """Only ``localhost`` and literal loopback addresses count; any other name might not be."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
