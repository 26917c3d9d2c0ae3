"""The event loop's asyncpg connections send the store's psycopg-compiled statements as a
handle would, reach the database the store's URL names (with libpq's parameters), and
raise the errors the store judges by as a handle raises them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DataError, IntegrityError

from invariants.backend import Write
from invariants.errors import InvalidArgument
from reference_store import ReferenceStore
from reference_store.service.loop_connections import (
    LoopConnections,
    _Translated,
    asyncpg_arguments,
)
from reference_store.service.pool import HandlePool
from reference_store.statements import prepare
from reference_store.store import _refused_by, _transient

pytestmark = pytest.mark.postgres


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


Send = Callable[..., Sequence[tuple[Any, ...]]]


@pytest.fixture
def send(fresh_pg_url: str) -> Send:
    """Send one statement, compiled as the store compiles its own, on the loop's
    connections (``send(sql, **params)``), and answer its rows."""
    with ReferenceStore(fresh_pg_url) as store:
        dialect = store.engine.dialect
        remote = LoopConnections(store.engine, 2)

    def sent(sql: str, **params: Any) -> Sequence[tuple[Any, ...]]:
        async def on_the_loop() -> Sequence[tuple[Any, ...]]:
            return await remote.all(prepare(text(sql), dialect), params)

        try:
            return anyio.run(on_the_loop)
        finally:
            remote.close()

    return sent


def test_a_percent_sign_and_a_parameter_used_twice_are_sent_as_written(send: Send):
    rows = send("SELECT :a || '%' || :b || :a || '%%'", a="x", b="y")
    assert [tuple(row) for row in rows] == [("x%yx%%",)]


def test_a_refused_row_is_an_integrity_error_naming_its_table(send: Send, fresh_pg_url: str):
    with psycopg.connect(_libpq(fresh_pg_url), autocommit=True) as admin:
        admin.execute("CREATE TABLE once (k int PRIMARY KEY)")
    send("INSERT INTO once VALUES (:k)", k=1)
    with pytest.raises(IntegrityError) as refused:
        send("INSERT INTO once VALUES (:k)", k=1)
    assert _refused_by(refused.value, "once")
    assert _transient(refused.value), "a unique violation is a race a retry resolves"
    assert not refused.value.connection_invalidated
    with pytest.raises(DataError):
        send("SELECT 1 / :zero", zero=0)
    assert [tuple(row) for row in send("SELECT count(*) FROM once")] == [(1,)]


def test_libpq_parameters_of_the_url_reach_the_loops_connections(fresh_pg_url: str):
    """The store's tables live in a schema only ``options`` names: had the loop's
    connections dropped it, their reads would find no table."""
    with psycopg.connect(_libpq(fresh_pg_url), autocommit=True) as admin:
        admin.execute("CREATE SCHEMA elsewhere")
    url = f"{fresh_pg_url}?options=-csearch_path%3Delsewhere&connect_timeout=5"
    with ReferenceStore(url) as store:
        store.write(Write("loop", "u1", "city", "Oslo", 1, "w1"))
    with psycopg.connect(_libpq(fresh_pg_url)) as admin:
        assert admin.execute("SELECT to_regclass('public.memories')").fetchone() == (None,)
    pool = HandlePool(lambda: ReferenceStore(url), size=2)
    pool.warm()
    values: list[str] = []

    async def read() -> None:
        values.extend(record.value for record in await pool.read("loop", "u1"))

    try:
        anyio.run(read)
    finally:
        pool.close()
    assert values == ["Oslo"]


def test_libpqs_own_parameters_become_asyncpgs_arguments():
    dsn, keywords = asyncpg_arguments(make_url(
        "postgresql+psycopg://u:p%40ss@db.example:6543/mem?connect_timeout=7"
        "&options=-c%20a%3D1%20-cb%3D2%20--lock-timeout%3D3s&application_name=svc"))
    assert dsn == "postgresql://u:p%40ss@db.example:6543/mem?application_name=svc"
    assert keywords == {"timeout": 7.0,
                        "server_settings": {"a": "1", "b": "2", "lock_timeout": "3s"}}
    assert asyncpg_arguments(make_url("postgresql+psycopg://u@h/d")) == (
        "postgresql://u@h/d", {})


@pytest.mark.parametrize("options", ["-c", "search_path=x", "-c nothing"])
def test_options_that_are_not_settings_are_refused_by_name(options: str):
    with pytest.raises(InvalidArgument, match="-c name=value") as refused:
        asyncpg_arguments(make_url("postgresql+psycopg://u@h/d").update_query_dict(
            {"options": options}))
    assert repr(options) in str(refused.value)


def test_without_asyncpg_the_pool_says_what_to_install(fresh_pg_url: str,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "asyncpg", None)  # what an import then raises
    monkeypatch.delitem(sys.modules, "reference_store.service.loop_connections")
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=2)
    try:
        with pytest.raises(InvalidArgument, match=r"pip install 'memcert\[postgres\]'"):
            pool.warm()
        assert len(pool._free) == pool.opened == 1, "the handle it opened was not given back"
    finally:
        pool.close()


def test_the_loops_connections_plan_each_statement_once(send: Send):
    assert [tuple(row) for row in send("SELECT current_setting('plan_cache_mode')")] == [
        ("force_generic_plan",)]


def test_the_urls_options_still_choose_how_plans_are_cached(fresh_pg_url: str):
    url = f"{fresh_pg_url}?options=-cplan_cache_mode%3Dauto"
    with ReferenceStore(url) as store:
        remote = LoopConnections(store.engine, 1)
        shown = prepare(text("SELECT current_setting('plan_cache_mode')"), store.engine.dialect)

    async def setting() -> Sequence[tuple[Any, ...]]:
        return await remote.all(shown, {})

    try:
        assert [tuple(row) for row in anyio.run(setting)] == [("auto",)]
    finally:
        remote.close()


def test_a_batched_read_planned_once_looks_each_pair_up_in_the_index(fresh_pg_url: str):
    """Planned without its arrays, as the loop's connections plan it, the batched read
    still finds each pair's active rows by the index. A plain join of the arrays with
    the table was planned as a hash join over a scan of every active row: fine for a
    batch of ten pairs in a small store, a full scan per batch in a large one."""
    with ReferenceStore(fresh_pg_url) as store:
        for n in range(400):
            store.write(Write("plan", f"e{n % 8}", "city", f"city number {n}", n + 1, f"w{n}"))
        statement = store._sql.read_active_many
    assert statement is not None
    batched = _Translated(statement)
    values = batched.pick(statement.values({"p_namespaces": ["plan", "plan"],
                                            "p_entity_ids": ["e1", "e2"]}))
    with psycopg.connect(_libpq(fresh_pg_url), autocommit=True) as admin:
        admin.execute("ANALYZE")
        admin.execute("SET plan_cache_mode = force_generic_plan")
        admin.execute(f"PREPARE batched AS {batched.sql}".encode())
        plan = "\n".join(str(row[0]) for row in admin.execute(
            sql.SQL("EXPLAIN EXECUTE batched({})").format(
                sql.SQL(", ").join(sql.Literal(value) for value in values))))
    assert "Index Scan using memories_one_active on memories" in plan, plan
    assert "Index Cond: (((namespace)::text = (wanted.namespace)::text)" in plan, plan
    assert "Seq Scan" not in plan and "Hash" not in plan, plan
