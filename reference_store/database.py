"""The store's database: its engine, its transactions, its retries and its clock.

This is the small public interface the store's modules share (``store``, ``retrieval``,
``lifecycle``, ``transfer``), so none of them needs another's private names. Every
write is a function of a connection that :meth:`Database.transaction` runs and retries
whole after a transient failure (lock contention, serialization failures, unique-index
races), so no caller can forget to retry. A write transaction holds the database write
lock on SQLite from its start (it says ``BEGIN IMMEDIATE`` itself, see
:mod:`reference_store.engine`); on PostgreSQL the write path takes the entity's row lock.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from .config import StoreConfig
from .engine import is_memory_url, make_engine
from .schema import metadata

if TYPE_CHECKING:
    from .metrics import StoreMetrics

__all__ = ["Database", "transient"]

T = TypeVar("T")

_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "23505"})
_SCHEMA_LOCK = 726710001
"""The advisory lock that serializes schema creation across processes on PostgreSQL."""


class Database:
    """One store handle's engine, with the transactions and retries its calls run in.

    ``engine`` is created from ``url`` unless given (and then not disposed by
    :meth:`close`). ``clock`` is what every operation stamps its rows with; tests pass
    a fake one.
    """

    def __init__(self, url: URL, config: StoreConfig, *, engine: Engine | None = None,
                 clock: Callable[[], float] = time.time,
                 metrics: StoreMetrics | None = None) -> None:
        self.config = config
        self.clock = clock
        self.metrics = metrics
        self.owns_engine = engine is None
        self.engine = make_engine(url, config) if engine is None else engine
        self.dialect = self.engine.dialect.name
        # SQLite's driver opens no transaction of its own (engine.py): each says BEGIN.
        self.says_begin = self.dialect == "sqlite"
        # A private in-memory database is one connection, shared: one thread at a time.
        self.serial = threading.RLock() if is_memory_url(url) else None
        self.jitter = random.Random()
        self.create_schema()

    def transaction(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in a write transaction, committed when it returns and rolled back
        if it raises; after a transient failure it runs again, whole, with bounded
        jittered backoff."""
        for tries in range(self.config.max_retries + 1):
            try:
                with self._connection("BEGIN IMMEDIATE") as conn:
                    return work(conn)
            except DBAPIError as error:
                if tries == self.config.max_retries or not transient(error):
                    raise
                if self.metrics is not None:
                    self.metrics.retried()
                time.sleep(min(0.1, 0.002 * 2**tries) * self.jitter.random())
        raise AssertionError("unreachable")

    def read(self) -> AbstractContextManager[Connection]:
        """A read-only transaction: one snapshot on SQLite; on PostgreSQL (READ
        COMMITTED) one per statement unless the caller raises the isolation level."""
        return self._connection("BEGIN")

    @contextmanager
    def _connection(self, begin: str) -> Iterator[Connection]:
        with self.serial or nullcontext(), self.engine.connect() as conn, conn.begin():
            if self.says_begin:
                conn.exec_driver_sql(begin)
            yield conn

    def create_schema(self) -> None:
        """Create the tables once, even when many processes open the store at once."""
        def create(conn: Connection) -> None:
            if self.dialect == "postgresql":
                conn.execute(text(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})"))
            metadata.create_all(conn)

        self.transaction(create)

    def close(self) -> None:
        if self.owns_engine:
            self.engine.dispose()


def transient(error: DBAPIError) -> bool:
    """Lock, serialization and unique-index races, which a fresh attempt resolves."""
    if isinstance(error, OperationalError) and error.orig is not None:
        message = str(error.orig).lower()
        if "locked" in message or "busy" in message:
            return True
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate in _TRANSIENT_SQLSTATES or (
        isinstance(error, IntegrityError) and "unique" in str(error.orig).lower()
    )
