"""Requests the service works on at once, through its store pool, on both databases: each
gets the answer a handle of its own would give, racing writers of one entity get the
answers of some serial order, racing replays get the first outcome, and a delete
racing its entity's writes leaves none of them behind."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from invariants.backend import Ack, Delete, Record, Restore, Write
from reference_store import ReferenceStore, WriteOptions
from reference_store.service.pool import StorePool
from tests.reference_store.test_write_races import WRITES, racing_writes

Op = Write | Delete | Restore
ENTITIES = [f"u{n}" for n in range(24)]


@pytest.fixture
def pool(db_url: str) -> Iterator[StorePool]:
    handles = StorePool(lambda: ReferenceStore(db_url), size=4)
    handles.warm()
    yield handles
    handles.close()


def applied(store: ReferenceStore, op: Op) -> Ack:
    if isinstance(op, Write):
        return store.remember(op, WriteOptions())
    return store.delete(op) if isinstance(op, Delete) else store.restore(op)


def at_once(pool: StorePool, ops: list[Op]) -> list[tuple[str, Ack]]:
    """Send every operation at once through the pool: (op_id, ack) for each."""
    answers: list[tuple[str, Ack]] = []

    async def one(op: Op) -> None:
        answers.append((op.op_id, await pool.run(lambda store: applied(store, op))))

    async def all_of_them() -> None:
        async with anyio.create_task_group() as group:
            for op in ops:
                group.start_soon(one, op)

    anyio.run(all_of_them)
    return answers


def send(pool: StorePool, op: Op) -> Ack:
    ((_, ack),) = at_once(pool, [op])
    return ack


def stocked(url: str) -> dict[str, list[Record]]:
    """Entities with one, two or three active records, a deleted one and one never
    written; what a handle reads for each."""
    with ReferenceStore(url) as store:
        seq = 0
        for n, entity in enumerate(ENTITIES):
            for attribute in ("city", "job", "pet")[: 1 + n % 3]:
                seq += 1
                store.write(Write("many", entity, attribute, f"{attribute} {n}", seq, f"w{seq}"))
        store.delete(Delete("many", ENTITIES[5], seq + 1, "d1"))
        return {entity: store.read("many", entity) for entity in [*ENTITIES, "nobody"]}


def test_reads_at_once_each_get_their_own_answer(db_url: str, pool: StorePool):
    expected = stocked(db_url)
    asked = [*expected, *expected, "nobody"]
    answers: dict[int, list[Record]] = {}

    async def read(k: int) -> None:
        answers[k] = await pool.run(lambda store: store.read("many", asked[k]))

    async def all_at_once() -> None:
        async with anyio.create_task_group() as group:
            for k in range(len(asked)):
                group.start_soon(read, k)

    anyio.run(all_at_once)
    assert [answers[k] for k in range(len(asked))] == [expected[e] for e in asked]
    assert expected[ENTITIES[5]] == [] and expected["nobody"] == []
    assert sum(len(records) for records in expected.values()) == 45


def test_search_and_recall_answer_as_a_handle_does(db_url: str, pool: StorePool):
    with ReferenceStore(db_url) as store:
        for seq, (entity, value) in enumerate([("u1", "lives in Oslo"), ("u1", "has a cat"),
                                               ("u2", "lives in Rome")], 1):
            store.write(Write("pool", entity, f"a{seq}", value, seq, f"w{seq}"))
        expected = (store.search("pool", "lives", now=5.0),
                    store.recall("pool", entity_id="u1", now=5.0))

    async def both() -> tuple[object, object]:
        return (await pool.run(lambda store: store.search("pool", "lives", now=5.0)),
                await pool.run(lambda store: store.recall("pool", entity_id="u1", now=5.0)))

    assert anyio.run(both) == expected


def test_a_read_asked_after_a_write_was_acknowledged_sees_it(db_url: str, pool: StorePool):
    """Readers keep reading while writes are acknowledged one after another: a read
    asked after an acknowledgement never answers with an older value."""
    with ReferenceStore(db_url) as store:
        store.write(Write("fresh", "u1", "count", "value 0", 1, "w0"))
    acknowledged = [0]
    stale: list[tuple[int, int]] = []
    reads = [0]

    async def reader() -> None:
        while acknowledged[0] < 40:
            floor = acknowledged[0]
            (record,) = await pool.run(lambda store: store.read("fresh", "u1"))
            reads[0] += 1
            seen = int(record.value.split()[1])
            if seen < floor:
                stale.append((floor, seen))

    async def writer() -> None:
        for k in range(1, 41):
            await pool.run(lambda store, k=k: store.write(
                Write("fresh", "u1", "count", f"value {k}", k + 1, f"w{k}")))
            acknowledged[0] = k

    async def race() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(reader)
            group.start_soon(writer)

    anyio.run(race)
    assert stale == []
    assert reads[0] > 40


def test_requests_cancelled_while_they_wait_leave_the_others_answered(db_url: str,
                                                                     pool: StorePool):
    expected = stocked(db_url)
    answers: dict[str, list[Record]] = {}

    async def read(entity: str) -> None:
        answers[entity] = await pool.run(lambda store: store.read("many", entity))

    async def cancelled(entity: str) -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            await read(entity)

    async def some_cancelled() -> None:
        async with anyio.create_task_group() as group:
            for n, entity in enumerate(ENTITIES):
                group.start_soon(cancelled if n % 4 == 3 else read, entity)
        await read("nobody")  # and the pool still answers afterwards

    anyio.run(some_cancelled)
    assert answers == {e: expected[e] for n, e in enumerate([*ENTITIES, "nobody"]) if n % 4 != 3}


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


def test_every_rule_answers_as_a_handle_does(db_url: str, pool: StorePool):
    served = [send(pool, op) for op in sequence("served")]
    with ReferenceStore(db_url) as store:
        direct = [applied(store, op) for op in sequence("direct")]
        reads = store.read("served", "e"), store.read("direct", "e")
    assert served == direct
    assert [ack.reason for ack in served] == [
        None, None, "already_deleted", "tombstoned", "stale", None, "not_deleted", "stale",
        None]
    assert [r.value for r in reads[0]] == [r.value for r in reads[1]] == ["Lima"]


@pytest.mark.parametrize("seed", range(2))
def test_racing_writes_of_one_entity_get_the_answers_of_a_serial_order(
        db_url: str, pool: StorePool, seed: int):
    ops: list[Op] = list(racing_writes(seed))
    answers = at_once(pool, ops)
    acks = dict(answers)
    assert sorted(answers) == sorted((op.op_id, acks[op.op_id]) for op in ops), \
        "a write sent twice got two answers"
    with ReferenceStore(db_url) as store:
        final = store.read("race", "e")
        rows = store.count_rows()
    assert final == [Record("e", "job", "job 10", 10, acks["j10"].version),
                     Record("e", "city", f"city {WRITES}", WRITES, acks[f"w{WRITES}"].version)]
    versions = sorted(ack.version for ack in acks.values() if ack.applied)
    assert len(versions) == len(set(versions)), f"two writes got one version: {versions}"
    assert {ack.reason for ack in acks.values() if not ack.applied} <= {"stale"}
    assert rows == len(versions)


def test_racing_replays_get_the_first_outcome(pool: StorePool):
    """Eight deliveries of one operation at once get one answer, the one a later replay
    gets too: a refused write, a delete, a restore."""
    send(pool, Write("replay", "e", "city", "Rome", 5, "w5"))
    for op, applies in [(Write("replay", "e", "city", "Oslo", 2, "w2"), False),
                        (Delete("replay", "e", 6, "d6"), True),
                        (Restore("replay", "e", 7, "r7"), True)]:
        answers = {ack for _, ack in at_once(pool, [op] * 8)}
        assert len(answers) == 1, (op, answers)
        (ack,) = answers
        assert ack.applied is applies, (op, ack)
        assert send(pool, op) == ack


@pytest.mark.parametrize("seed", range(3))
def test_a_delete_racing_its_entitys_writes_leaves_none_of_them(db_url: str, pool: StorePool,
                                                              seed: int):
    """Writes of three keys of one entity, each key written several times, at once with
    one delete. Whatever the order, the delete archives every write that came before it
    and refuses every one after; a restore brings none back."""
    writes: list[Op] = [Write("race", "e", attribute, f"{attribute} {n}", n,
                              f"{attribute}-{n}")
                        for n in range(1, 9) for attribute in ("city", "job", "pet")]
    delete = Delete("race", "e", 100, "d")
    answers = dict(at_once(pool, [*writes[:4 + 6 * seed], delete, *writes[4 + 6 * seed:]]))
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
    with ReferenceStore(db_url) as store:
        assert store.read("race", "e") == []
        assert store.count_rows(status="active") == 0


@pytest.mark.parametrize("seed", range(4))
def test_a_restore_racing_a_delete_gets_the_answer_of_a_serial_order(db_url: str,
                                                                    pool: StorePool,
                                                                    seed: int):
    """A restore never lands between a delete's decision and its changes: sent at once,
    the pair's answers and the entity's state are those of one order or the other."""
    def pair(namespace: str) -> list[Op]:
        return [Write(namespace, "e", "city", "Oslo", 1, "w1"),
                Delete(namespace, "e", 5, "d5"), Restore(namespace, "e", 6, "r6")]

    serial: list[tuple[dict[str, Ack], list[Record]]] = []
    with ReferenceStore(db_url) as store:
        for order in ([0, 1, 2], [0, 2, 1]):
            namespace = f"serial{seed}-{order[1]}"
            ops = pair(namespace)
            answers = {ops[k].op_id: applied(store, ops[k]) for k in order}
            serial.append((answers, store.read(namespace, "e")))
    assert serial[0][0] != serial[1][0], "the two orders cannot be told apart"
    write, *racing = pair(f"raced{seed}")
    if seed % 2:
        racing.reverse()
    answers = {"w1": send(pool, write), **dict(at_once(pool, racing))}
    with ReferenceStore(db_url) as store:
        assert (answers, store.read(f"raced{seed}", "e")) in serial, answers
