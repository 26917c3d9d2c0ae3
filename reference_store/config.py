"""Settings of one reference store, fixed when the store is opened.

Settings are immutable so that every handle a factory returns behaves the same way:
a store whose limits could change underneath a running certification would make its
verdicts meaningless.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from invariants.errors import InvalidArgument

__all__ = ["DB_URL_ENV", "DEFAULT_MAX_VALUE_BYTES", "StoreConfig", "Synchronous"]

DB_URL_ENV = "MEMCERT_DB_URL"
DEFAULT_MAX_VALUE_BYTES = 64 * 1024

Synchronous = Literal["OFF", "NORMAL", "FULL"]


@dataclass(frozen=True)
class StoreConfig:
    """How a reference store normalizes, limits and persists what it is given.

    ``synchronous`` is SQLite's: ``NORMAL`` in WAL mode survives any process crash
    (the kernel still holds the written pages); ``FULL`` also survives power loss at
    the price of an fsync per commit.
    """

    level: Literal["surface", "lexical", "semantic"] = "lexical"
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    lexicon_path: Path | None = None
    semantic_threshold: float = 0.9
    synchronous: Synchronous = "NORMAL"
    busy_timeout_ms: int = 30_000
    max_retries: int = 8
    default_half_life_seconds: float = 30 * 24 * 3600.0

    def __post_init__(self) -> None:
        if self.level not in ("surface", "lexical", "semantic"):
            raise InvalidArgument(
                f"level={self.level!r} is not a normalization level; "
                "use 'surface', 'lexical' or 'semantic'."
            )
        if not isinstance(self.max_value_bytes, int) or self.max_value_bytes <= 0:
            raise InvalidArgument(
                f"max_value_bytes={self.max_value_bytes!r} must be a positive int "
                "(bytes of UTF-8); the default is 65536."
            )
        if self.synchronous not in ("OFF", "NORMAL", "FULL"):
            raise InvalidArgument(
                f"synchronous={self.synchronous!r} must be 'OFF', 'NORMAL' or 'FULL'."
            )
        if self.max_retries < 0:
            raise InvalidArgument(f"max_retries={self.max_retries!r} must be >= 0.")


def env_db_url() -> str | None:
    """The database named by ``MEMCERT_DB_URL``, if any (empty counts as unset)."""
    value = os.environ.get(DB_URL_ENV, "").strip()
    return value or None
