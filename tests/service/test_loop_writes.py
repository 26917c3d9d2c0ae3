"""On PostgreSQL the service sends a write's guarded statements from its event loop, and
takes the entity lock in a worker thread only when the guard keeps missing; whichever
way, racing writers of one key get the answers some serial order gives."""

from __future__ import annotations

import anyio
import pytest

from invariants.backend import Ack, Record, Write
from reference_store import ReferenceStore, StoreConfig, WriteOptions
from reference_store import store as store_module
from reference_store.service.pool import HandlePool
from tests.reference_store.test_write_races import WRITES, racing_writes


def race(pool: HandlePool, ops: list[Write]) -> dict[str, Ack]:
    """Send every write at once through the pool; the acks by op_id, where a write sent
    twice must have got one answer twice."""
    answers: list[tuple[str, Ack]] = []

    async def write(op: Write) -> None:
        answers.append((op.op_id, await pool.remember(op, WriteOptions())))

    async def all_at_once() -> None:
        async with anyio.create_task_group() as group:
            for op in ops:
                group.start_soon(write, op)

    anyio.run(all_at_once)
    acks = dict(answers)
    assert sorted(answers) == sorted((op.op_id, acks[op.op_id]) for op in ops)
    return acks


@pytest.mark.parametrize("tries", [store_module._GUARDED_TRIES, 1])
def test_racing_writes_of_one_key_get_consistent_answers(fresh_pg_url: str, tries: int,
                                                         monkeypatch: pytest.MonkeyPatch):
    """With one guarded try, every write whose guard misses goes to a thread and takes
    the lock: both paths race each other."""
    monkeypatch.setattr(store_module, "_GUARDED_TRIES", tries)
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=4)
    pool.warm()
    try:
        acks = race(pool, racing_writes(seed=tries))
        with ReferenceStore(fresh_pg_url) as store:
            final = store.read("race", "e")
            rows = store.count_rows()
    finally:
        pool.close()
    assert final == [Record("e", "job", "job 10", 10, acks["j10"].version),
                     Record("e", "city", f"city {WRITES}", WRITES, acks[f"w{WRITES}"].version)]
    applied = sorted(ack.version for ack in acks.values() if ack.applied)
    assert len(applied) == len(set(applied)), f"two writes got one version: {applied}"
    assert {ack.reason for ack in acks.values() if not ack.applied} <= {"stale"}
    assert rows == len(applied)
    if tries == 1:
        assert pool.opened > 1, "no write fell back to a thread: the race made no miss"


def test_writes_go_from_the_loop_and_take_no_thread(fresh_pg_url: str):
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=4)
    pool.warm()
    try:
        acks = race(pool, [Write("loop", f"e{n}", "city", "Oslo", 1, f"w{n}")
                           for n in range(20)])
    finally:
        pool.close()
    assert set(acks.values()) == {Ack(True, 1)}
    assert pool.opened == 1, "a write went to a worker thread, which opened a handle"


def test_at_the_semantic_level_writes_go_to_a_thread(fresh_pg_url: str):
    """Deciding there may ask the embedder, which the loop must not wait for."""
    def embed(texts: list[str]) -> list[list[float]]:
        return [[1.0, float(len(text))] for text in texts]

    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url, StoreConfig(level="semantic"),
                                             embedder=embed), size=4)
    pool.warm()
    try:
        acks = race(pool, [Write("loop", "e", "city", "Oslo", 1, "w1")])
    finally:
        pool.close()
    assert acks == {"w1": Ack(True, 1)}
    assert pool.opened == 2


def test_replays_racing_on_the_loop_are_answered_there(fresh_pg_url: str):
    """Eight deliveries of one write, refused as stale, at once: each decides alone, so
    all but the first learn of the replay when the operation log refuses their entry,
    and get the first outcome without leaving the loop."""
    pool = HandlePool(lambda: ReferenceStore(fresh_pg_url), size=8)
    pool.warm()
    try:
        race(pool, [Write("loop", "e", "city", "Rome", 5, "w5")])
        acks = race(pool, [Write("loop", "e", "city", "Oslo", 2, "w2")] * 8)
    finally:
        pool.close()
    assert acks == {"w2": Ack(False, 1, "stale")}
    assert pool.opened == 1, "a replay went to a worker thread"
