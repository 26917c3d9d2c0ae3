"""The event loop's own connections to PostgreSQL, for the HTTP service (``pool.py``).

Kept apart from the pool because they need asyncpg, which only a PostgreSQL install
has (the ``postgres`` extra); the pool imports this module once it meets PostgreSQL.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import AsyncIterator, Generator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import URL, Engine, text
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError, ProgrammingError

from invariants.errors import InvalidArgument

from ..statements import Plan, Prepared, picker, prepare

__all__ = ["LoopConnections", "asyncpg_arguments"]

T = TypeVar("T")


class LoopConnections:
    """Asynchronous connections to PostgreSQL on which the event loop sends single
    statements, each a transaction of its own (autocommit), and the transactions of
    deletes and restores.

    They are asyncpg's, not psycopg's like the store's handles: per statement sent from
    the loop, psycopg's asynchronous cursor cost 47–52 µs of CPU and asyncpg 22–24 (16
    tasks, one simple SELECT each, on uvloop). The statements are the store's, compiled
    for psycopg, and translated once each (:class:`_Translated`). The store's columns are
    text, integers, booleans and floats, which both drivers return as the same Python
    values; rows come back as asyncpg's records, which index, slice, unpack and compare
    as tuples do.

    At most ``size`` connections are in use at once; they open on first need and stay
    open. A connection whose statement failed, or was cancelled midway, is closed
    rather than reused. A connection found dead by its first statement after sitting
    idle (the server restarted, or dropped it) is replaced and the statement sent again,
    as ``engine.DriverTransaction`` does on a handle: a read that never reached the
    server can be sent twice. Failures are raised as SQLAlchemy's ``DBAPIError`` of the
    class psycopg's would have been (``IntegrityError`` for a refused row, and so on),
    so the store and the service judge them as they judge a handle's.
    """

    def __init__(self, engine: Engine, size: int) -> None:
        self._dsn, self._keywords = asyncpg_arguments(engine.url)
        self._keywords["server_settings"] = {**PLANNED_ONCE,
                                             **self._keywords.get("server_settings", {})}
        self._begin = prepare(text("BEGIN"), engine.dialect)
        self._commit = prepare(text("COMMIT"), engine.dialect)
        self._translated: dict[str, _Translated] = {}
        self._size = size
        self._free: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None

    async def all(self, statement: Prepared, params: dict[str, Any]
                  ) -> Sequence[tuple[Any, ...]]:
        async with self._slot():
            idle = bool(self._free)
            connection = self._free.pop() if idle else await self._connect()
            try:
                rows = await self._send(connection, statement, params)
            except _DRIVER_ERRORS as error:
                dead = _lost(error, connection)
                connection.terminate()
                if not (idle and dead):
                    raise _wrapped(error, statement, params, dead) from error
                connection = await self._connect()
                try:
                    rows = await self._send(connection, statement, params)
                except _DRIVER_ERRORS as again:
                    connection.terminate()
                    raise _wrapped(again, statement, params, True) from again
                except BaseException:
                    connection.terminate()
                    raise
            except BaseException:
                connection.terminate()
                raise
            self._free.append(connection)
            return rows

    async def transaction(self, steps: Generator[Plan[Any], Any, T]) -> T:
        """Send the plans of ``steps`` as one transaction on one connection, each plan's
        answer sent back and a statement's refusal thrown in (as SQLAlchemy's
        ``IntegrityError``); commit once they end, and return what they return.

        Whatever goes wrong, the connection is closed rather than reused, and with it
        the transaction is rolled back if it had not committed. A failure other than a
        refusal is raised as ``DBAPIError``; ``connection_invalidated`` then says the
        connection was lost, in which case a COMMIT sent may or may not have applied.
        """
        plan = next(steps)
        async with self._slot():
            connection = self._free.pop() if self._free else await self._connect()
            try:
                await self._execute(connection, self._begin, {})
                while True:
                    refused: IntegrityError | None = None
                    try:
                        rows = await self._execute(connection, plan.statement, plan.params)
                    except IntegrityError as error:
                        refused = error
                    try:
                        plan = (steps.send(plan.finish(rows)) if refused is None
                                else steps.throw(refused))
                    except StopIteration as done:
                        result: T = done.value
                        break
                await self._execute(connection, self._commit, {})
            except BaseException:
                connection.terminate()
                raise
            self._free.append(connection)
            return result

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of the ``size`` connections' turns, on this loop's connections."""
        loop = asyncio.get_running_loop()
        if self._slots is None or loop is not self._loop:
            self.close()
            self._loop, self._slots = loop, asyncio.Semaphore(self._size)
        async with self._slots:
            yield

    async def _execute(self, connection: Any, statement: Prepared, params: dict[str, Any]
                       ) -> Sequence[tuple[Any, ...]]:
        try:
            return await self._send(connection, statement, params)
        except _DRIVER_ERRORS as error:
            raise _wrapped(error, statement, params, _lost(error, connection)) from error

    def close(self) -> None:
        """Close the idle connections; callable with no loop running."""
        free, self._free = self._free, []
        for connection in free:
            try:
                connection.terminate()
            except RuntimeError:
                # Its loop has ended: uvloop closed the socket with it, and asyncio's
                # transport closes it when collected.
                continue

    def probe(self) -> None:
        """Connect once, on a loop of its own, so that a database the loop cannot reach
        (or a URL parameter asyncpg refuses) fails the service's start, not a request."""
        async def connect_once() -> None:
            connection = await self._connect()
            await connection.close()

        asyncio.run(connect_once())

    async def _connect(self) -> Any:
        try:
            return await asyncpg.connect(self._dsn, statement_cache_size=_STATEMENTS_KEPT,
                                         **self._keywords)
        except _DRIVER_ERRORS as error:
            raise _wrapped(error, None, None, True) from error

    async def _send(self, connection: Any, statement: Prepared, params: dict[str, Any]
                    ) -> Sequence[tuple[Any, ...]]:
        translated = self._translated.get(statement.sql)
        if translated is None:
            translated = self._translated[statement.sql] = _Translated(statement)
        rows: Sequence[tuple[Any, ...]] = await connection.fetch(
            translated.sql, *translated.pick(statement.values(params)))
        return rows


PLANNED_ONCE = {"plan_cache_mode": "force_generic_plan"}
"""The server plans each of the loop's statements once, not once per execution, unless
the URL's ``options`` say otherwise. Left to choose, it re-planned the batched read
every time (63–110 µs of planning, against 15–50 µs to run it), since the arrays' sizes
are visible only to a plan made for them; and after each ANALYZE it re-planned the
others a few times over. Every statement the store sends finds its rows by namespace,
entity and key (and the literal ``'active'``, which a generic plan sees too), and the
batched read pins its per-pair index lookups with a fence (``statements.read_active_many``),
so a plan made without the parameters' values is the one made with them."""

_STATEMENTS_KEPT = 512
"""Statements each connection keeps prepared: more than the store has shapes (its fixed
statements, the write path's combinations, and search's and recall's prefilters)."""

_DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
"""What asyncpg raises: the server's errors, its own, and the socket's."""

_NAMED_PARAMETER = re.compile(r"%\((\w+)\)s|%%")


class _Translated:
    """A statement compiled for psycopg (``%(name)s`` parameters, ``%%`` for a percent
    sign) as asyncpg takes it: ``$1``, ``$2``... with each name numbered once, in order
    of first use, and a picker of the values in that order."""

    __slots__ = ("pick", "sql")

    def __init__(self, statement: Prepared) -> None:
        names = statement.keys if statement.names is None else statement.names
        order: list[str] = []

        def numbered(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "%"
            if name not in order:
                order.append(name)
            return f"${order.index(name) + 1}"

        self.sql = _NAMED_PARAMETER.sub(numbered, statement.sql)
        self.pick = picker(tuple(names.index(name) for name in order))


def _lost(error: BaseException, connection: Any) -> bool:
    """Whether ``error`` says the connection is gone: asyncpg has closed it, the socket
    failed, or the server said it is shutting the session down (class 57P) or lost the
    connection (class 08)."""
    sqlstate = getattr(error, "sqlstate", None) or ""
    return (connection.is_closed() or isinstance(error, (OSError, asyncpg.InterfaceError))
            or sqlstate.startswith(("08", "57P")))


_ERROR_CLASSES: dict[str, type[DBAPIError]] = {
    "22": DataError, "23": IntegrityError, "42": ProgrammingError}
"""SQLSTATE classes to the DBAPIError psycopg's error would have become; anything else,
like psycopg's, becomes an OperationalError."""


def _wrapped(error: BaseException, statement: Prepared | None,
             params: dict[str, Any] | None, dead: bool) -> DBAPIError:
    """``error`` as SQLAlchemy's exception, as a handle's would be raised; without a
    statement when connecting failed."""
    sqlstate = getattr(error, "sqlstate", None) or ""
    kind = _ERROR_CLASSES.get(sqlstate[:2], OperationalError)
    return kind(None if statement is None else statement.sql, params, error,
                connection_invalidated=dead)


def asyncpg_arguments(url: URL) -> tuple[str, dict[str, Any]]:
    """The store's URL as asyncpg takes it: a libpq URL, and keyword arguments for the
    two libpq parameters that asyncpg would otherwise send to the server as settings
    of those names, which the server refuses: ``connect_timeout`` (asyncpg's
    ``timeout``) and ``options`` (its ``-c name=value`` pairs, asyncpg's
    ``server_settings``, so that a ``search_path`` set there reaches the loop's
    connections as it reaches the handles')."""
    query = {name: value if isinstance(value, str) else value[-1]
             for name, value in url.query.items()}
    keywords: dict[str, Any] = {}
    timeout = query.pop("connect_timeout", None)
    if timeout is not None:
        keywords["timeout"] = float(timeout)
    options = query.pop("options", None)
    if options is not None:
        keywords["server_settings"] = _settings(options)
    dsn = url.set(drivername="postgresql", query=query).render_as_string(hide_password=False)
    return dsn, keywords


def _settings(options: str) -> dict[str, str]:
    """libpq's ``options`` (``-c name=value``, ``-cname=value`` or ``--name=value``,
    separated by spaces) as settings."""
    settings: dict[str, str] = {}
    words = iter(shlex.split(options))
    for given in words:
        if given == "-c":
            word = next(words, "")
        elif given.startswith("-c"):
            word = given[2:]
        elif given.startswith("--"):
            word = given[2:].replace("-", "_")
        else:
            word = ""
        name, equals, value = word.partition("=")
        if not (name and equals):
            raise InvalidArgument(
                f"the database URL's options {options!r} hold {given!r}, which is not a "
                "setting: write each one as -c name=value")
        settings[name] = value
    return settings
