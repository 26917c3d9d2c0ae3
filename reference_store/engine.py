"""Engines for the two databases the reference store runs on, behind one code path.

SQLite and PostgreSQL differ in how they take write locks, so this module is the one
place that knows: SQLite write transactions start with ``BEGIN IMMEDIATE`` (taking the
database write lock up front, so two writers never deadlock upgrading a read lock),
and PostgreSQL relies on row locks taken by the write path itself.

The write path, the contract read and the agent-facing reads (search, recall, touch)
run prepared statements on the driver's cursor inside a :class:`DriverTransaction`, on
a connection a store handle keeps (:class:`Connections`); everything else goes through
SQLAlchemy ``Connection`` objects as usual.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection, StaticPool

from invariants.errors import InvalidArgument

from .config import DB_URL_ENV, StoreConfig, env_db_url
from .statements import Prepared

__all__ = [
    "IMMEDIATE",
    "Connections",
    "DriverTransaction",
    "begin_sql",
    "default_db_url",
    "is_memory_url",
    "make_engine",
    "normalize_url",
]

IMMEDIATE = "memcert_immediate"
"""Execution option that makes a SQLite transaction take the write lock at BEGIN."""


def begin_sql(dialect_name: str, *, write: bool) -> str | None:
    """The statement that opens a transaction, or None where the driver opens one itself.

    psycopg starts a transaction at the first statement, at the isolation level the
    engine set; Python's sqlite3 is told not to (see ``_on_connect``), so the store
    says when and how.
    """
    if dialect_name != "sqlite":
        return None
    return "BEGIN IMMEDIATE" if write else "BEGIN"


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
        # The driver's own implicit transactions would defeat BEGIN IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={config.synchronous}")
        cursor.execute(f"PRAGMA busy_timeout={int(config.busy_timeout_ms)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        conn.exec_driver_sql(begin_sql("sqlite", write=immediate))

    return engine


class Connections:
    """Where a store handle's driver transactions get their connection.

    A pool checkout costs about as much as a whole SQLite write, so the handle keeps
    one connection checked out for whichever thread is using it. A thread that finds it
    busy checks one out of the pool instead of waiting, so a handle shared by threads
    stays safe and concurrent. A connection found broken is invalidated, and the pool
    replaces it (pre-pinging on PostgreSQL) at the next checkout.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._kept: PoolProxiedConnection | None = None
        self._lock = threading.Lock()

    def acquire(self) -> PoolProxiedConnection:
        if not self._lock.acquire(blocking=False):
            return self.engine.raw_connection()
        try:
            if self._kept is None:
                self._kept = self.engine.raw_connection()
        except BaseException:
            self._lock.release()
            raise
        return self._kept

    def release(self, connection: PoolProxiedConnection) -> None:
        if connection is not self._kept:
            if connection.is_valid:
                connection.close()
            return
        if not connection.is_valid:
            self._kept = None
        self._lock.release()

    def close(self) -> None:
        with self._lock:
            if self._kept is not None:
                self._kept.close()
                self._kept = None


class DriverTransaction:
    """One transaction running prepared statements straight on the driver's cursor.

    Use it as a context manager: it commits when the block ends and rolls back when the
    block raises. A write transaction holds the database write lock on SQLite from its
    start; on PostgreSQL the statements themselves take row locks. ``serial``, when
    given, is held for the whole transaction (a private in-memory database has a single
    connection).

    A ``single`` transaction is one statement, which the database runs as a transaction
    of its own (autocommit): no BEGIN and no COMMIT, so one round trip to PostgreSQL
    instead of three. Nothing a caller can see changes: one statement reads one
    snapshot on both databases (PostgreSQL's READ COMMITTED takes a snapshot per
    statement even inside a transaction), and a writing statement commits whole or not
    at all, taking the locks it would take after BEGIN (on SQLite, a writing statement
    takes the write lock when it starts, as ``BEGIN IMMEDIATE`` does). A second
    statement is refused rather than run in a transaction of its own. Its rows are
    always fetched to the end: on SQLite, that is when the statement commits, and when
    a failure to commit is reported.

    Driver errors are raised as SQLAlchemy's, as ``Connection.execute`` would raise
    them, so retries and callers see one set of exceptions whichever way a statement
    ran. A connection found dead by the first statement (the server restarted, or
    dropped it while it sat idle) is replaced and the statement sent again, which is
    what the pool's pre-ping does at checkout: nothing of the transaction has happened.
    """

    __slots__ = ("_autocommit", "_begin", "_broken", "_connection", "_connections",
                 "_cursor", "_dbapi_error", "_dialect", "_driver", "_fresh", "_held",
                 "_sent", "_serial", "_single")

    def __init__(self, connections: Connections, *, write: bool,
                 serial: threading.RLock | None = None, single: bool = False) -> None:
        self._connections = connections
        self._dialect = connections.engine.dialect
        self._single = single
        self._begin = None if single else begin_sql(self._dialect.name, write=write)
        # Python's sqlite3 already runs a statement outside BEGIN as a transaction of
        # its own (see _on_connect); psycopg has to be told.
        self._autocommit = single and self._dialect.name == "postgresql"
        self._serial = serial
        self._dbapi_error: type[Exception] = self._dialect.loaded_dbapi.Error
        self._broken = False
        self._held = False
        self._sent = False

    def __enter__(self) -> DriverTransaction:
        if self._serial is not None:
            self._serial.acquire()
        try:
            self._open()
        except BaseException:
            if self._serial is not None:
                self._serial.release()
            raise
        if self._begin is not None:
            try:
                self._execute(self._begin, ())
            except BaseException as error:
                self.__exit__(type(error), error, error.__traceback__)
                raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            if exc_type is not None:
                self._rollback()
            elif not self._single:
                try:
                    self._driver.commit()
                except self._dbapi_error as error:
                    self._rollback()
                    raise self._wrap(error, "COMMIT", None) from error
        finally:
            self._close()
            if self._serial is not None:
                self._serial.release()

    def run(self, statement: Prepared, params: dict[str, Any]) -> None:
        self._send(statement, params)
        if self._single:
            self._cursor.fetchall()

    def first(self, statement: Prepared, params: dict[str, Any]) -> tuple[Any, ...] | None:
        self._send(statement, params)
        if self._single:
            rows = self._cursor.fetchall()
            return rows[0] if rows else None
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        return row

    def one(self, statement: Prepared, params: dict[str, Any]) -> tuple[Any, ...]:
        row = self.first(statement, params)
        assert row is not None, statement.sql
        return row

    def all(self, statement: Prepared, params: dict[str, Any]) -> Sequence[tuple[Any, ...]]:
        self._send(statement, params)
        return self._cursor.fetchall()

    def _send(self, statement: Prepared, params: dict[str, Any]) -> None:
        if self._single and self._sent:
            raise RuntimeError(
                f"a single-statement transaction was given a second statement "
                f"({statement.sql!r}); open the DriverTransaction with single=False")
        self._sent = True
        self._execute(statement.sql, statement.parameters(params))

    def _open(self) -> None:
        self._connection = self._connections.acquire()
        self._driver: Any = cast(Any, self._connection.driver_connection)
        self._cursor = self._connection.cursor()
        self._held = True
        self._fresh = True
        if self._autocommit:
            try:
                self._driver.autocommit = True
            except self._dbapi_error as error:
                # Left inside a transaction, or closed: discarded, never lent again.
                wrapped = self._wrap(error, "SET autocommit", None)
                self._broken = True
                self._close()
                raise wrapped from error

    def _close(self) -> None:
        """Give the connection back, once (a failed reconnect may already have)."""
        if not self._held:
            return
        self._held = False
        try:
            self._cursor.close()
        finally:
            if self._autocommit and not self._broken:
                # Back to transactions for whoever uses the connection next; one that
                # cannot be told is discarded instead.
                try:
                    self._driver.autocommit = False
                except self._dbapi_error:
                    self._broken = True
            if self._broken:
                self._connection.invalidate()
            self._connections.release(self._connection)

    def _reconnect(self) -> None:
        self._broken = True
        self._close()
        self._broken = False
        self._open()

    def _execute(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> None:
        try:
            self._cursor.execute(sql, params)
        except self._dbapi_error as error:
            if not self._fresh or not self._disconnected(error):
                raise self._wrap(error, sql, params) from error
            self._reconnect()
            self._fresh = False  # a second dead connection in a row is an error, not a loop
            self._execute(sql, params)
        self._fresh = False

    def _rollback(self) -> None:
        """Undo, on a connection that may be broken: then it is discarded, not reused."""
        if not self._held:
            return
        try:
            self._driver.rollback()
        except self._dbapi_error:
            self._broken = True

    def _disconnected(self, error: Exception) -> bool:
        return self._dialect.is_disconnect(cast(Any, error), self._connection.dbapi_connection,
                                           self._cursor)

    def _wrap(self, error: Exception, sql: str, params: Any) -> Exception:
        self._broken = self._broken or self._disconnected(error)
        wrapped = DBAPIError.instance(sql, params, error, self._dbapi_error,
                                      dialect=self._dialect, connection_invalidated=self._broken)
        assert isinstance(wrapped, Exception)
        return wrapped
