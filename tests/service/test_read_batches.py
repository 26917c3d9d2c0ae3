"""Contract reads that wait at the same time reach PostgreSQL as one statement, and each
still gets exactly its own answer, as fresh as a statement of its own would give."""

from __future__ import annotations

import time
from typing import Any

import anyio
import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from invariants.backend import Delete, Record, Write
from reference_store import ReferenceStore
from reference_store.service.pool import HandlePool

ENTITIES = [f"u{n}" for n in range(24)]


def stocked(url: str) -> dict[str, list[Record]]:
    """Entities with one, two or three active records, a deleted one and one never
    written; what a handle reads for each."""
    with ReferenceStore(url) as store:
        seq = 0
        for n, entity in enumerate(ENTITIES):
            for attribute in ("city", "job", "pet")[: 1 + n % 3]:
                seq += 1
                store.write(Write("batch", entity, attribute, f"{attribute} {n}", seq, f"w{seq}"))
        store.delete(Delete("batch", ENTITIES[5], seq + 1, "d1"))
        return {entity: store.read("batch", entity) for entity in [*ENTITIES, "nobody"]}


def counting_statements(pool: HandlePool) -> list[int]:
    """Count the statements the pool's loop sends to PostgreSQL."""
    remote = pool._remote
    assert remote is not None, "reads on PostgreSQL are sent from the loop"
    sent: list[int] = []
    send = remote.all

    async def all(statement: Any, params: dict[str, Any]) -> Any:
        sent.append(1)
        return await send(statement, params)

    remote.all = all  # type: ignore[method-assign]
    return sent


def test_reads_waiting_together_go_as_one_statement_each_with_its_own_answer(db_url: str):
    expected = stocked(db_url)
    asked = [*expected, *expected, "nobody"]  # every entity twice: some batches hold both
    pool = HandlePool(lambda: ReferenceStore(db_url), size=4)
    pool.warm()
    postgres = pool._remote is not None
    sent = counting_statements(pool) if postgres else []
    answers: dict[int, list[Record]] = {}

    async def read(k: int) -> None:
        answers[k] = await pool.read("batch", asked[k])

    async def all_at_once() -> None:
        async with anyio.create_task_group() as group:
            for k in range(len(asked)):
                group.start_soon(read, k)

    try:
        anyio.run(all_at_once)
    finally:
        pool.close()
    assert [answers[k] for k in range(len(asked))] == [expected[e] for e in asked]
    assert expected[ENTITIES[5]] == [] and expected["nobody"] == []
    assert sum(len(records) for records in expected.values()) == 45
    if postgres:
        # The first two go alone, at once; the rest wait for them and go together.
        assert len(sent) <= 4, f"{len(asked)} reads took {len(sent)} statements"


def test_a_read_asked_after_a_write_was_acknowledged_sees_it(fresh_pg_url: str):
    """Readers keep reading while writes are acknowledged one after another: a read
    asked after an acknowledgement never answers with an older value."""
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("batch", "u1", "count", "value 0", 1, "w0"))
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=4)
    pool.warm()
    acknowledged = [0]
    stale: list[tuple[int, int]] = []
    reads = [0]

    async def reader() -> None:
        while acknowledged[0] < 40:
            floor = acknowledged[0]
            (record,) = await pool.read("batch", "u1")
            reads[0] += 1
            seen = int(record.value.split()[1])
            if seen < floor:
                stale.append((floor, seen))

    async def writer() -> None:
        for k in range(1, 41):
            await pool.run(lambda store, k=k: store.write(
                Write("batch", "u1", "count", f"value {k}", k + 1, f"w{k}")))
            acknowledged[0] = k

    async def race() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(reader)
            group.start_soon(writer)

    try:
        anyio.run(race)
    finally:
        pool.close()
    assert stale == []
    assert reads[0] > 40


def test_a_request_cancelled_while_its_read_waits_leaves_the_others_answered(
        fresh_pg_url: str):
    expected = stocked(fresh_pg_url)
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=4)
    pool.warm()
    answers: dict[str, list[Record]] = {}

    async def read(entity: str) -> None:
        answers[entity] = await pool.read("batch", entity)

    async def cancelled(entity: str) -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await read(entity)

    async def some_cancelled() -> None:
        async with anyio.create_task_group() as group:
            for n, entity in enumerate(ENTITIES):
                group.start_soon(cancelled if n % 4 == 3 else read, entity)
        await read("nobody")  # and the pool still answers afterwards

    try:
        anyio.run(some_cancelled)
    finally:
        pool.close()
    assert answers == {e: expected[e] for n, e in enumerate([*ENTITIES, "nobody"]) if n % 4 != 3}


def test_a_failed_batch_fails_each_of_its_reads_and_the_next_one_is_answered(
        fresh_pg_url: str):
    """The server cancels batches that wait for a lock: every read in them gets the
    error (the service answers 503), and reads asked afterwards are answered."""
    libpq = make_url(fresh_pg_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    expected = stocked(fresh_pg_url)
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=4)
    pool.warm()
    outcomes: dict[str, object] = {}

    async def read(entity: str) -> None:
        try:
            outcomes[entity] = await pool.read("batch", entity)
        except DBAPIError as error:
            outcomes[entity] = error

    async def cancelled_while_locked(admin: psycopg.Connection[Any],
                                     watch: psycopg.Connection[Any]) -> None:
        admin.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        try:
            # Reads still waiting when the lock goes would wait for it for ever: fail.
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    for entity in ENTITIES[:2]:  # each alone, at once
                        group.start_soon(read, entity)
                    await waiting_for_the_lock(watch, count=2)
                    for entity in ENTITIES[2:8]:  # these wait for them, then go together
                        group.start_soon(read, entity)
                    await anyio.sleep(0.05)
                    cancel_the_waiting(watch)
                    # A cancel takes effect a moment later: the lock's next waiter is
                    # the batch sent once the first two reads have failed.
                    while not all(entity in outcomes for entity in ENTITIES[:2]):
                        await anyio.sleep(0.01)
                    await waiting_for_the_lock(watch, count=1)
                    cancel_the_waiting(watch)
        finally:
            admin.rollback()
        await read("nobody")
        await read(ENTITIES[9])

    with psycopg.connect(libpq) as admin, psycopg.connect(libpq, autocommit=True) as watch:
        anyio.run(cancelled_while_locked, admin, watch)
    pool.close()
    failed = [e for e in ENTITIES[:8] if isinstance(outcomes[e], DBAPIError)]
    assert failed == ENTITIES[:8]
    assert all("cancel" in str(outcomes[e]).lower() for e in failed)
    assert outcomes["nobody"] == [] and outcomes[ENTITIES[9]] == expected[ENTITIES[9]]


def cancel_the_waiting(watch: psycopg.Connection[Any]) -> None:
    watch.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                  "WHERE wait_event_type = 'Lock' AND datname = current_database()")


async def waiting_for_the_lock(watch: psycopg.Connection[Any], count: int) -> None:
    """Wait until ``count`` statements wait for a lock."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        (waiting,) = watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()").fetchone() or (0,)
        if waiting >= count:
            return
        await anyio.sleep(0.01)
    pytest.fail(f"the reads never waited for the lock ({count} statements expected)")
