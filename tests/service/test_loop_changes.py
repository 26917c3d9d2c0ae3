"""On PostgreSQL the service sends a delete's or a restore's transaction from its event
loop: the store's own statements and rules, so every answer is the one a worker thread
would have given, and a delete racing its entity's writes still leaves nothing of them
behind."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from sqlalchemy.exc import OperationalError

from invariants.backend import Ack, Delete, Restore, Write
from reference_store import ReferenceStore, WriteOptions
from reference_store.service.loop_connections import LoopConnections
from reference_store.service.pool import HandlePool

Op = Write | Delete | Restore


def sequence(namespace: str) -> list[Op]:
    """Every rule of a delete and a restore, in order: applied, already deleted, a write
    refused while deleted, a stale restore, a restore, one with nothing to restore, a
    stale delete, and a write after it all."""
    return [
        Write(namespace, "e", "city", "Oslo", 1, "w1"),
        Delete(namespace, "e", 5, "d5"),
        Delete(namespace, "e", 3, "d3"),
        Write(namespace, "e", "city", "Rome", 6, "w6"),
        Restore(namespace, "e", 4, "r4"),
        Restore(namespace, "e", 7, "r7"),
        Restore(namespace, "e", 8, "r8"),
        Delete(namespace, "e", 6, "d6"),
        Write(namespace, "e", "city", "Lima", 9, "w9"),
    ]


def send(pool: HandlePool, op: Op) -> Ack:
    async def one() -> Ack:
        if isinstance(op, Write):
            return await pool.remember(op, WriteOptions())
        return await pool.change(op)

    return anyio.run(one)


def at_once(pool: HandlePool, ops: list[Op]) -> list[tuple[str, Ack]]:
    answers: list[tuple[str, Ack]] = []

    async def one(op: Op) -> None:
        answers.append((op.op_id, await (pool.remember(op, WriteOptions())
                                         if isinstance(op, Write) else pool.change(op))))

    async def all_of_them() -> None:
        async with anyio.create_task_group() as group:
            for op in ops:
                group.start_soon(one, op)

    anyio.run(all_of_them)
    return answers


@pytest.fixture
def pool(fresh_pg_url: str) -> Any:
    handles = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=8)
    handles.warm()
    yield handles
    handles.close()


def test_every_rule_answers_as_the_store_in_a_thread_does(pool: HandlePool,
                                                          fresh_pg_url: str):
    from_loop = [send(pool, op) for op in sequence("loop")]
    with ReferenceStore(fresh_pg_url) as store:
        direct = [store.write(op) if isinstance(op, Write) else
                  store.delete(op) if isinstance(op, Delete) else store.restore(op)
                  for op in sequence("direct")]
        reads = store.read("loop", "e"), store.read("direct", "e")
    assert from_loop == direct
    assert [ack.reason for ack in from_loop] == [
        None, None, "already_deleted", "tombstoned", "stale", None, "not_deleted", "stale",
        None]
    assert [r.value for r in reads[0]] == [r.value for r in reads[1]] == ["Lima"]
    assert pool.opened == 1, "a delete or a restore went to a worker thread"


@pytest.mark.parametrize("seed", range(3))
def test_a_delete_racing_its_entitys_writes_leaves_none_of_them(pool: HandlePool,
                                                              fresh_pg_url: str, seed: int):
    """Writes of three keys of one entity, each key written several times, at once with
    one delete. Whatever the order, the delete archives every write that came before it
    and refuses every one after; a restore brings none back."""
    writes: list[Op] = [Write("race", "e", attribute, f"{attribute} {n}", n,
                              f"{attribute}-{n}")
                        for n in range(1, 9) for attribute in ("city", "job", "pet")]
    delete = Delete("race", "e", 100, "d")
    ops = [*writes[:4 + 6 * seed], delete, *writes[4 + 6 * seed:]]
    answers = dict(at_once(pool, ops))
    deleted = answers["d"]
    assert deleted.applied and deleted.reason is None
    assert deleted.version is not None
    for op in writes:
        ack = answers[op.op_id]
        if ack.applied:
            assert ack.version is not None and ack.version < deleted.version, (op, ack)
        else:
            assert ack.reason in ("stale", "tombstoned"), (op, ack)
    assert send(pool, Restore("race", "e", 101, "r")).applied
    with ReferenceStore(fresh_pg_url) as store:
        assert store.read("race", "e") == []
        assert store.count_rows(status="active") == 0


def test_replays_racing_on_the_loop_get_the_first_outcome(pool: HandlePool):
    send(pool, Write("replay", "e", "city", "Oslo", 1, "w1"))
    answers = at_once(pool, [Delete("replay", "e", 2, "d2")] * 8)
    assert {ack for _, ack in answers} == {Ack(True, 2)}
    answers = at_once(pool, [Restore("replay", "e", 3, "r3")] * 8)
    assert {ack for _, ack in answers} == {Ack(True, 3)}
    assert pool.opened == 1, "a replay went to a worker thread"


def test_a_connection_lost_at_commit_is_answered_from_a_thread_with_the_first_outcome(
        pool: HandlePool, monkeypatch: pytest.MonkeyPatch):
    """The COMMIT reached the server and the answer did not: the outcome is unknown to
    the loop, so a thread sends the delete again, and its op_id finds the committed one."""
    send(pool, Write("lost", "e", "city", "Oslo", 1, "w1"))
    execute = LoopConnections._execute

    async def commit_then_lose(self: Any, connection: Any, statement: Any,
                               params: Any) -> Any:
        rows = await execute(self, connection, statement, params)
        if statement is self._commit:
            raise OperationalError("COMMIT", {}, ConnectionError("server closed the "
                                                                 "connection"),
                                   connection_invalidated=True)
        return rows

    monkeypatch.setattr(LoopConnections, "_execute", commit_then_lose)
    assert send(pool, Delete("lost", "e", 2, "d2")) == Ack(True, 2)
    assert pool.opened == 2, "the delete was not sent again from a thread"
    monkeypatch.undo()
    assert send(pool, Delete("lost", "e", 2, "d2")) == Ack(True, 2)
    assert send(pool, Delete("lost", "e", 3, "d3")) == Ack(True, 3, "already_deleted")


def test_the_entity_stays_locked_from_the_decision_to_the_commit(pool: HandlePool,
                                                                 monkeypatch: pytest.MonkeyPatch):
    """A restore sent while a delete holds the lock it decided under waits for that
    delete's commit, and then finds the entity deleted: it can never land between the
    delete's decision and its changes."""
    send(pool, Write("locked", "e", "city", "Oslo", 1, "w1"))
    handle = pool._loop_side()
    assert handle is not None
    lock_sql = handle._sql.lock_entity.sql
    execute = LoopConnections._execute
    locked, release = anyio.Event(), anyio.Event()

    async def pause_after_the_first_lock(self: Any, connection: Any, statement: Any,
                                         params: Any) -> Any:
        rows = await execute(self, connection, statement, params)
        if statement.sql == lock_sql and not locked.is_set():
            locked.set()
            await release.wait()
        return rows

    monkeypatch.setattr(LoopConnections, "_execute", pause_after_the_first_lock)
    answers: dict[str, Ack] = {}

    async def change(op: Delete | Restore) -> None:
        answers[op.op_id] = await pool.change(op)

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(change, Delete("locked", "e", 5, "d5"))
            await locked.wait()
            group.start_soon(change, Restore("locked", "e", 6, "r6"))
            await anyio.sleep(0.5)
            assert answers == {}, "the restore did not wait for the delete's lock"
            release.set()

    anyio.run(scenario)
    assert answers == {"d5": Ack(True, 2), "r6": Ack(True, 3)}
