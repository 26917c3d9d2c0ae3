"""Engines for the two databases the reference store runs on, behind one code path.

SQLite and PostgreSQL differ in how they take write locks. Python's sqlite3 is told
here never to open a transaction on its own (its implicit ``BEGIN`` is deferred, which
lets two writers deadlock upgrading their read locks), so the store's write transactions
say ``BEGIN IMMEDIATE`` themselves (:meth:`reference_store.database.Database.transaction`),
taking the database write lock up front. PostgreSQL relies on row locks taken by the write path.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from invariants.errors import InvalidArgument

from .config import DB_URL_ENV, StoreConfig, env_db_url

__all__ = [
    "default_db_url",
    "is_memory_url",
    "make_engine",
    "normalize_url",
]

def normalize_url(target: str) -> URL:
    """Turn what a user may type (a path, ``:memory:``, a libpq URL) into a driver URL."""
    text = target.strip()
    if not text:
        raise InvalidArgument(
            "database URL is empty; give a SQLite path, ':memory:' or a "
            "postgresql:// URL, or unset MEMCERT_DB_URL."
        )
    if text == ":memory:":
        return make_url("sqlite://")
    if "://" not in text:
        return make_url(f"sqlite:///{Path(text).expanduser().resolve()}")
    url = make_url(text)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidArgument(
            f"database URL {url.render_as_string(hide_password=True)!r} uses "
            f"{url.get_backend_name()!r}; the reference store runs on sqlite or postgresql."
        )
    return url


def default_db_url() -> str:
    """The database every handle of this process tree shares when none was named.

    On first use a SQLite file is created in a fresh temporary folder and its URL is
    published in ``MEMCERT_DB_URL``, so worker processes started afterwards inherit it
    and open the same file instead of each making their own.
    """
    named = env_db_url()
    if named is not None:
        return named
    folder = Path(tempfile.mkdtemp(prefix="memcert-store-"))
    url = f"sqlite:///{folder / 'reference.sqlite3'}"
    os.environ[DB_URL_ENV] = url
    return url


def is_memory_url(url: URL) -> bool:
    """Whether this is a private in-process SQLite database."""
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def make_engine(url: URL, config: StoreConfig) -> Engine:
    """Create an engine configured for the store's locking and durability needs."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, config)
    return create_engine(
        url, pool_size=2, max_overflow=8, pool_pre_ping=True, isolation_level="READ COMMITTED"
    )


def _sqlite_engine(url: URL, config: StoreConfig) -> Engine:
    memory = is_memory_url(url)
    kwargs: dict[str, Any] = {
        "connect_args": {"check_same_thread": False, "timeout": config.busy_timeout_ms / 1000},
    }
    if memory:
        kwargs["poolclass"] = StaticPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # The driver's own implicit (deferred) transactions would defeat BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={config.synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={int(config.busy_timeout_ms)}")
        cursor.close()

    return engine
