"""The store pool runs every request's work in a worker thread, never lends one store
handle to two requests at once, opens handles only as they are needed, and never leaves
a write half done when a request is cancelled or the pool closes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio
import anyio.to_thread
import psycopg
import pytest
from sqlalchemy.engine import make_url

from invariants.backend import Write
from reference_store import ReferenceStore
from reference_store.service.pool import StorePool


def test_concurrent_requests_each_get_a_handle_of_their_own(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = StorePool(lambda: ReferenceStore(url), size=3)
    lock = threading.Lock()
    busy: set[int] = set()
    shared: list[int] = []
    most = 0

    def work(store: ReferenceStore) -> int:
        nonlocal most
        with lock:
            if id(store) in busy:
                shared.append(id(store))
            busy.add(id(store))
            most = max(most, len(busy))
        time.sleep(0.02)
        records = store.read("pool", "u1")
        with lock:
            busy.discard(id(store))
        return len(records)

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(24):
                group.start_soon(pool.run, work)

    try:
        anyio.run(many)
    finally:
        pool.close()
    assert shared == []
    assert most == 3
    assert pool.opened == 3


def one_after_another(pool: StorePool) -> dict[str, tuple[int, int]]:
    """A read, then a write, through a warmed pool that is closed afterwards: which
    thread ran each, with which handle."""
    pool.warm()
    seen: dict[str, tuple[int, int]] = {}

    def noted(name: str, store: ReferenceStore) -> None:
        seen[name] = (threading.get_ident(), id(store))

    async def both() -> None:
        await pool.run(lambda store: (noted("read", store), store.read("pool", "u1")))
        await pool.run(lambda store: (noted("write", store), store.write(
            Write("pool", "u1", "city", "Oslo", 1, "w1"))))

    try:
        anyio.run(both)
    finally:
        pool.close()
    return seen


def test_work_runs_in_a_worker_thread_on_one_idle_handle(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = StorePool(lambda: ReferenceStore(url), size=2)
    seen = one_after_another(pool)
    loop_thread = threading.get_ident()
    assert seen["read"][0] != loop_thread, "the event loop waited on the database"
    assert seen["write"][0] != loop_thread
    assert seen["read"][1] == seen["write"][1], "an idle handle is lent again"
    assert pool.opened == 1, "a handle was opened that no work needed"


def test_a_private_memory_database_is_served_by_its_one_handle_in_a_thread():
    pool = StorePool(lambda: ReferenceStore(":memory:"), size=1)
    seen = one_after_another(pool)
    assert seen["read"][0] != threading.get_ident()
    assert seen["read"][1] == seen["write"][1]
    assert pool.opened == 1


def test_a_closed_pool_runs_nothing(tmp_path: Path):
    pool = StorePool(lambda: ReferenceStore(str(tmp_path / "store.sqlite3")), size=1)
    pool.warm()
    pool.close()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        anyio.run(pool.run, lambda store: store.read("pool", "u1"))
    assert pool.opened == 1


def test_a_database_that_cannot_be_opened_fails_warm_and_opens_nothing(tmp_path: Path):
    def unreachable() -> ReferenceStore:
        raise ConnectionRefusedError("no database here")

    pool = StorePool(unreachable, size=2)
    try:
        with pytest.raises(ConnectionRefusedError):
            pool.warm()
        assert pool.opened == 0
    finally:
        pool.close()


def test_a_connection_the_server_dropped_is_replaced_silently(fresh_pg_url: str):
    libpq = make_url(fresh_pg_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
    pool = StorePool(lambda: ReferenceStore(fresh_pg_url), size=1)
    values: list[list[str]] = []

    async def read_twice() -> None:
        for _ in range(2):
            records = await pool.run(lambda store: store.read("pool", "u1"))
            values.append([record.value for record in records])
            with psycopg.connect(libpq, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid()")

    try:
        anyio.run(read_twice)
    finally:
        pool.close()
    assert values == [["Oslo"], ["Oslo"]]


def test_a_cancelled_request_never_cuts_its_write_in_half(tmp_path: Path):
    """Cancelled while its write runs: the request ends at once, the write commits whole,
    and close() waits for it before closing the handles."""
    url = str(tmp_path / "store.sqlite3")
    pool = StorePool(lambda: ReferenceStore(url), size=1)
    started, finish, done = threading.Event(), threading.Event(), threading.Event()
    ended_at: list[bool] = []

    def slow_write(store: ReferenceStore) -> None:
        started.set()
        finish.wait(10)
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
        done.set()

    async def cancel_midway() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(pool.run, slow_write)
                await anyio.to_thread.run_sync(started.wait, 10)
                scope.cancel()
        ended_at.append(done.is_set())

    try:
        anyio.run(cancel_midway)
        assert ended_at == [False], "the cancelled request waited for its work"
        finish.set()
    finally:
        pool.close()
    with ReferenceStore(url) as store:
        assert [r.value for r in store.read("pool", "u1")] == ["Oslo"]


def test_work_a_cancelled_request_queued_never_runs(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = StorePool(lambda: ReferenceStore(url), size=1)
    started, finish = threading.Event(), threading.Event()
    ran: list[str] = []

    def occupy(store: ReferenceStore) -> None:
        started.set()
        finish.wait(10)
        ran.append("first")

    def queued(store: ReferenceStore) -> None:
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
        ran.append("queued")

    async def cancel_queued() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(pool.run, occupy)
            await anyio.to_thread.run_sync(started.wait, 10)
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as inner:
                    inner.start_soon(pool.run, queued)
                    await anyio.sleep(0.05)
                    scope.cancel()
            finish.set()

    try:
        anyio.run(cancel_queued)
    finally:
        pool.close()
    assert ran == ["first"]
    with ReferenceStore(url) as store:
        assert store.read("pool", "u1") == []


def test_touches_through_the_pool_never_lose_a_count(db_url: str):
    with ReferenceStore(db_url) as store:
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
    pool = StorePool(lambda: ReferenceStore(db_url), size=4)
    counts: list[int] = []

    async def touch() -> None:
        counts.append(await pool.run(lambda store: store.touch("pool", "u1", "City")))

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(touch)

    try:
        anyio.run(many)
    finally:
        pool.close()
    assert sorted(counts) == list(range(1, 41))
