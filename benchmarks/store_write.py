"""Single-writer upsert throughput of the reference store against two sqlite3 baselines.

* The hand-written baseline is the transaction the reference store runs, written with
  ``sqlite3`` and no SQLAlchemy: the same validation, normalization and trust placement,
  and in one ``BEGIN IMMEDIATE`` transaction the same statements against the same
  schema (the entity lock and version; the op_id's logged outcome and the key's
  current record, in one statement; supersede, insert, operation log). The target
  (issue 17: a ratio >= 0.5, p99 <= 1 ms) is judged against it: the gap is what
  SQLAlchemy and the store's plumbing cost.
* The plain baseline does what the cheapest correct-ish memory store would: one
  parameterized upsert per transaction, guarded by causal_seq, on a WAL file with the
  same ``synchronous`` setting. The gap between it and the hand-written path is what
  the store's guarantees cost in SQLite itself, and no plumbing can win that back.

All three run interleaved in one process, so the ratios are fair on a noisy host.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from invariants.backend import Write
from reference_store import ReferenceStore, StoreConfig
from reference_store.config import DEFAULT_MAX_VALUE_BYTES
from reference_store.normalize import Normalizer
from reference_store.trust import place
from reference_store.validation import check_op

from .timing import Sample, best, paired_ratio

ENTITIES = 200
ATTRIBUTES = ("city", "job", "drink", "language", "timezone")

_LOCK = ("INSERT INTO entities (namespace, entity_id, next_version, deleted) "
         "VALUES (?, ?, 1, 0) ON CONFLICT (namespace, entity_id) DO UPDATE "
         "SET next_version = next_version + 1 "
         "RETURNING next_version, deleted, delete_seq, restore_seq")
_READ = ("SELECT operations.applied, operations.version, operations.reason, memories.id, "
         "memories.value, memories.value_key, memories.causal_seq, memories.version "
         "FROM (SELECT 1) AS one LEFT OUTER JOIN operations ON operations.namespace = ? AND "
         "operations.op_id = ? LEFT OUTER JOIN memories ON memories.namespace = ? AND "
         "memories.entity_id = ? AND memories.attr_key = ? AND memories.status = 'active'")
_MERGE = "UPDATE memories SET causal_seq = ?, updated_at = ? WHERE id = ?"
_SUPERSEDE = ("UPDATE memories SET status = 'superseded', superseded_by = ?, updated_at = ? "
              "WHERE id = ?")
_INSERT = ("INSERT INTO memories (namespace, entity_id, attribute, attr_key, value, value_key, "
           "version, causal_seq, op_id, source, trust, memory_type, instruction_like, tags, "
           "score, half_life_seconds, access_count, created_at, updated_at, status) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]', ?, ?, 0, ?, ?, 'active')")
_LOG = ("INSERT INTO operations (namespace, op_id, kind, entity_id, applied, version, reason, "
        "created_at) VALUES (?, ?, 'write', ?, ?, ?, ?, ?)")


def _plan(n: int, offset: int) -> list[tuple[str, str, str, int]]:
    return [(f"user-{i % ENTITIES}", ATTRIBUTES[(i // ENTITIES) % len(ATTRIBUTES)],
             f"fact number {offset + i}", offset + i) for i in range(n)]


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    return conn


def baseline(path: Path, n: int, offset: int, synchronous: str) -> Sample:
    conn = _connect(path, synchronous)
    conn.execute("CREATE TABLE IF NOT EXISTS kv (ns TEXT, entity TEXT, attr TEXT, value TEXT, "
                 "seq INTEGER, PRIMARY KEY (ns, entity, attr))")
    sql = ("INSERT INTO kv VALUES (?, ?, ?, ?, ?) ON CONFLICT (ns, entity, attr) DO UPDATE "
           "SET value = excluded.value, seq = excluded.seq WHERE excluded.seq >= kv.seq")
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        start = time.perf_counter()
        conn.execute("BEGIN")
        conn.execute(sql, ("bench", entity, attr, value, seq))
        conn.execute("COMMIT")
        latencies.append(time.perf_counter() - start)
    conn.close()
    return Sample("plain sqlite3 upsert (baseline)", latencies)


def by_hand(path: Path, n: int, offset: int, synchronous: str) -> Sample:
    """The reference store's write path for these writes, hand-written against sqlite3.

    The plan never deletes, so only the write's own tombstone checks appear; its op_ids
    are fresh, so the operation log never reports a replay (but is asked, as the store
    asks it).
    """
    conn = _connect(path, synchronous)
    normalizer = Normalizer()
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        op = Write("bench", entity, attr, value, seq, f"op-{seq}")
        start = time.perf_counter()
        check_op(op, max_value_bytes=DEFAULT_MAX_VALUE_BYTES)
        attr_key = normalizer.attribute_key(op.attribute)
        value_key = normalizer.value_key(op.value)
        placed = place(op.source, op.value, "semantic", 1.0)
        conn.execute("BEGIN IMMEDIATE")
        version, deleted, delete_seq, _ = conn.execute(_LOCK, ("bench", entity)).fetchone()
        read = conn.execute(_READ, ("bench", op.op_id, "bench", entity, attr_key)).fetchone()
        if read[0] is not None:
            raise AssertionError(f"op_id {op.op_id} replayed")
        current = None if read[3] is None else read[3:]
        now = time.time()
        if deleted or (delete_seq is not None and seq <= delete_seq):
            applied, reason, version = False, "tombstoned" if deleted else "predates_delete", None
        else:
            applied, reason = True, None
            if current is not None and seq < current[3]:
                applied, reason, version = False, "stale", current[4]
            elif current is not None and current[2] == value_key:
                conn.execute(_MERGE, (seq, now, current[0]))
                reason, version = "merged", current[4]
            else:
                if current is not None:
                    conn.execute(_SUPERSEDE, (version, now, current[0]))
                conn.execute(_INSERT, (
                    "bench", entity, attr, attr_key, value, value_key, version, seq, op.op_id,
                    op.source, placed.trust, placed.memory_type, placed.instruction_like,
                    placed.score, 30 * 24 * 3600.0, now, now))
        conn.execute(_LOG, ("bench", op.op_id, entity, applied, version, reason, now))
        conn.execute("COMMIT")
        latencies.append(time.perf_counter() - start)
    conn.close()
    return Sample("same transaction by hand (sqlite3)", latencies)


def reference(store: ReferenceStore, n: int, offset: int) -> Sample:
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        op = Write("bench", entity, attr, value, seq, f"op-{seq}")
        start = time.perf_counter()
        store.write(op)
        latencies.append(time.perf_counter() - start)
    return Sample("reference store write", latencies)


def _rounds(folder: Path, n: int, rounds: int,
            synchronous: str) -> tuple[list[Sample], list[Sample], list[Sample]]:
    config = StoreConfig(synchronous=synchronous)
    with ReferenceStore(folder / "hand.sqlite3", config):
        pass  # creates the reference schema for the hand-written path
    warm = 500
    bases, hands, refs = [], [], []
    with ReferenceStore(folder / "ref.sqlite3", config) as store:
        reference(store, warm, 0)
        baseline(folder / "base.sqlite3", warm, 0, synchronous)
        by_hand(folder / "hand.sqlite3", warm, 0, synchronous)
        for k in range(rounds):
            offset = warm + k * n
            bases.append(baseline(folder / "base.sqlite3", n, offset, synchronous))
            hands.append(by_hand(folder / "hand.sqlite3", n, offset, synchronous))
            refs.append(reference(store, n, offset))
    return bases, hands, refs


def run(n: int = 4000, rounds: int = 5, synchronous: str = "NORMAL") -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="memcert-bench-") as tmp:
        bases, hands, refs = _rounds(Path(tmp), n, rounds, synchronous)
    base, hand, ref = best(bases), best(hands), best(refs)
    ratio = paired_ratio(refs, bases)
    hand_ratio = paired_ratio(refs, hands)
    print(f"\n## Single-writer upserts, SQLite file, WAL, synchronous={synchronous}")
    print(f"{rounds} interleaved rounds of {n} writes each; the median round is shown, and "
          "each ratio is the median of the rounds' ratios.\n")
    print("| run | ops/s | p50 µs | p99 µs |\n|---|---:|---:|---:|")
    print(base.row())
    print(hand.row())
    print(ref.row())
    print(f"\nratio reference / same transaction by hand = {hand_ratio:.2f} (target >= 0.5); "
          f"reference p99 = {ref.percentile(99) * 1e3:.3f} ms (target <= 1 ms)")
    print(f"ratio reference / plain upsert = {ratio:.2f}; "
          f"by hand / plain upsert = {paired_ratio(hands, bases):.2f}")
    return {"ratio": ratio, "hand_ratio": hand_ratio, "p50_ms": ref.percentile(50) * 1e3,
            "p99_ms": ref.percentile(99) * 1e3}
