"""What ``memcert serve`` is told, checked before anything binds a port or opens a database.

A service reachable from other machines without a token would hand anyone on the
network the power to rewrite or wipe every memory, so the token rule is enforced here,
where a missing token is a usage error, and not discovered by the first stranger.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from invariants.errors import InvalidArgument

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "ServiceOptions", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 1024 * 1024
MAX_IMPORT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ServiceOptions:
    """How to serve: where to bind, which database, and who may call.

    ``db_url`` None means the reference store's default (``MEMCERT_DB_URL``, else a
    SQLite file in a fresh temporary folder). ``handles`` bounds the requests the store
    works on at once: each gets a store handle of its own, because a handle must never
    be used by two threads at the same time.
    """

    db_url: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    handles: int = 8
    max_body_bytes: int = MAX_BODY_BYTES
    max_import_bytes: int = MAX_IMPORT_BYTES

    def __post_init__(self) -> None:
        if isinstance(self.port, bool) or not isinstance(self.port, int) \
                or not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port={self.port!r} must be an int in 0..65535 "
                                  "(0 picks a free port).")
        if isinstance(self.handles, bool) or not isinstance(self.handles, int) \
                or self.handles < 1:
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


def is_loopback(host: str) -> bool:
    """Only ``localhost`` and literal loopback addresses count; any other name might not be."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
