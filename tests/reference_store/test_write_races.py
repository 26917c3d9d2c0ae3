"""Many writers of one key at once, replays among them, on both databases: whatever
order they land in, the answers are those some serial order gives."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from invariants.backend import Ack, Record, Write
from reference_store import ReferenceStore

WRITES = 40
THREADS = 8


def racing_writes(seed: int) -> list[Write]:
    """Writes of one key with seqs 1..WRITES in a shuffled order, writes of a second key
    of that entity, and two writes sent twice (a replay racing its first delivery)."""
    rng = random.Random(seed)
    ops = [Write("race", "e", "city", f"city {seq}", seq, f"w{seq}")
           for seq in range(1, WRITES + 1)]
    ops += [Write("race", "e", "job", f"job {seq}", seq, f"j{seq}") for seq in range(1, 11)]
    ops += [ops[7], ops[23]]
    rng.shuffle(ops)
    return ops


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_racing_writers_of_one_key_get_the_answers_of_a_serial_order(
        db_url: str, seed: int) -> None:
    """Eight handles on eight threads; three shuffles of the same writes."""
    ops = racing_writes(seed=seed)
    local = threading.local()
    handles: list[ReferenceStore] = []
    opening = threading.Lock()

    def write(op: Write) -> tuple[str, Ack]:
        if not hasattr(local, "store"):
            local.store = ReferenceStore(db_url)
            with opening:
                handles.append(local.store)
        return op.op_id, local.store.write(op)

    try:
        with ThreadPoolExecutor(THREADS) as threads:
            answers = list(threads.map(write, ops))
    finally:
        for handle in handles:
            handle.close()
    acks = dict(answers)
    assert sorted(answers) == sorted((op.op_id, acks[op.op_id]) for op in ops), \
        "a write sent twice got two answers"
    with ReferenceStore(db_url) as store:
        assert store.read("race", "e") == [
            Record("e", "job", "job 10", 10, acks["j10"].version),
            Record("e", "city", f"city {WRITES}", WRITES, acks[f"w{WRITES}"].version)]
        rows = store.count_rows()
        with store.engine.connect() as conn:
            history = conn.exec_driver_sql(
                "SELECT attr_key, version, status, superseded_by FROM memories "
                "WHERE namespace = 'race'").all()
    applied = [ack.version for ack in acks.values() if ack.applied]
    assert len(applied) == len(set(applied)), f"two writes got one version: {sorted(applied)}"
    assert {ack.reason for ack in acks.values() if not ack.applied} <= {"stale"}
    assert rows == len(applied), "an applied write made no row, or a refused one made one"
    # Each key's rows form one chain: every superseded row names the next version.
    for key in ("city", "job"):
        chain = sorted((version, status, by) for attr, version, status, by in history
                       if attr == key)
        assert [status for _, status, _ in chain] == ["superseded"] * (len(chain) - 1) + [
            "active"]
        assert [by for _, _, by in chain[:-1]] == [version for version, _, _ in chain[1:]]
