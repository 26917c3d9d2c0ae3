"""The handle pool never lends one store handle to two requests at once, answers reads
where they cost least (on the event loop, for SQLite and PostgreSQL), and never leaves a
write half done when a request is cancelled or the pool closes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import psycopg
import pytest
from sqlalchemy.engine import make_url

from invariants.backend import Record, Write
from reference_store import ReferenceStore
from reference_store.retrieval import plan_recall, plan_search, plan_touch
from reference_store.service.pool import HandlePool
from reference_store.statements import Plan


def test_concurrent_requests_each_get_a_handle_of_their_own(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = HandlePool(lambda: ReferenceStore(url), size=3)
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


def where(seen: dict[str, tuple[int, int]], name: str
          ) -> Callable[[ReferenceStore], Plan[list[Record]]]:
    """A read of u1 that notes which thread planned it, with which handle."""
    def plan(store: ReferenceStore) -> Plan[list[Record]]:
        seen[name] = (threading.get_ident(), id(store))
        return store._plan_read("pool", "u1")

    return plan


def read_then_write(pool: HandlePool) -> dict[str, tuple[int, int]]:
    """A read through ``answer``, then work through ``run``, on a warmed pool that is
    closed afterwards: which thread handled each, with which handle."""
    pool.warm()
    seen: dict[str, tuple[int, int]] = {}

    async def both() -> None:
        await pool.answer(where(seen, "read"))
        await pool.run(lambda store: seen.setdefault("write", (threading.get_ident(),
                                                                id(store))))

    try:
        anyio.run(both)
    finally:
        pool.close()
    return seen


def test_reads_of_an_in_process_database_stay_on_the_event_loop(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = HandlePool(lambda: ReferenceStore(url), size=2, in_process=True)
    seen = read_then_write(pool)
    loop_thread = threading.get_ident()
    assert seen["read"][0] == loop_thread, "a read is not worth a thread hop"
    assert seen["write"][0] != loop_thread
    assert seen["read"][1] != seen["write"][1], "the loop's handle is never lent to a thread"
    assert pool.opened == 2


def test_reads_of_a_private_memory_database_go_to_its_one_handle_in_a_thread():
    pool = HandlePool(lambda: ReferenceStore(":memory:"), size=1)
    seen = read_then_write(pool)
    assert seen["read"][0] != threading.get_ident()
    assert seen["read"][1] == seen["write"][1]
    assert pool.opened == 1


def test_postgresql_reads_are_sent_from_the_loop_and_answer_as_a_handle_does(
        fresh_pg_url: str):
    with ReferenceStore(fresh_pg_url) as store:
        for seq, (entity, value) in enumerate([("u1", "lives in Oslo"), ("u1", "has a cat"),
                                               ("u2", "lives in Rome")], 1):
            store.write(Write("pool", entity, f"a{seq}", value, seq, f"w{seq}"))
        expected = (store.read("pool", "u1"), store.search("pool", "lives", now=5.0),
                    store.recall("pool", entity_id="u1", now=5.0))
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=2)
    pool.warm()
    seen: dict[str, tuple[int, int]] = {}
    answers: list[object] = []

    async def reads() -> None:
        answers.append(await pool.answer(where(seen, "read")))
        answers.append(await pool.answer(lambda s: plan_search(s, "pool", "lives", now=5.0)))
        answers.append(await pool.answer(
            lambda s: plan_recall(s, "pool", entity_id="u1", now=5.0)))
        async with anyio.create_task_group() as group:  # more at once than connections
            for _ in range(8):
                group.start_soon(pool.answer, where(seen, "many"))

    try:
        anyio.run(reads)
    finally:
        pool.close()
    assert tuple(answers) == expected
    assert seen["read"][0] == threading.get_ident(), "no thread hop for a PostgreSQL read"
    assert pool.opened == 1, "reads open no handle beyond the loop's own"


def test_a_loop_connection_the_server_dropped_is_replaced_silently(fresh_pg_url: str):
    libpq = make_url(fresh_pg_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=1)
    values: list[list[str]] = []

    async def read_twice() -> None:
        for _ in range(2):
            records = await pool.answer(lambda store: store._plan_read("pool", "u1"))
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
    pool = HandlePool(lambda: ReferenceStore(url), size=1)
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
    pool = HandlePool(lambda: ReferenceStore(url), size=1)
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


def test_a_closed_pool_runs_nothing(tmp_path: Path):
    pool = HandlePool(lambda: ReferenceStore(str(tmp_path / "store.sqlite3")), size=1,
                      in_process=True)
    pool.warm()
    pool.close()
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        anyio.run(pool.run, lambda store: store.read("pool", "u1"))
    with pytest.raises(RuntimeError, match="cannot schedule new futures after shutdown"):
        anyio.run(pool.answer, lambda store: store._plan_read("pool", "u1"))
    assert pool.opened == 1


def test_touches_through_the_pool_never_lose_a_count(db_url: str):
    """On PostgreSQL the loop sends each touch itself; on a SQLite file, where a write may
    wait for the lock, a worker thread does. Either way no increment is lost."""
    with ReferenceStore(db_url) as store:
        store.write(Write("pool", "u1", "city", "Oslo", 1, "w1"))
    pool = HandlePool(lambda: ReferenceStore(db_url), size=4,
                      in_process=db_url.startswith("sqlite"))
    counts: list[int] = []
    threads: set[int] = set()

    def plan(store: ReferenceStore) -> Plan[int]:
        planned = plan_touch(store, "pool", "u1", "City")
        threads.add(threading.get_ident())
        return planned

    async def touch() -> None:
        counts.append(await pool.answer(plan))

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(touch)

    try:
        anyio.run(many)
    finally:
        pool.close()
    assert sorted(counts) == list(range(1, 41))
    sent_by_loop = threads == {threading.get_ident()}
    assert sent_by_loop == db_url.startswith("postgresql")
