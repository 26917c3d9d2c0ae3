"""Single-writer upsert throughput of the reference store against two sqlite3 baselines.

* The hand-written baseline is the transaction the reference store runs, written with
  ``sqlite3`` and no SQLAlchemy: the same validation, normalization and trust placement,
  and in one ``BEGIN IMMEDIATE`` transaction the same statements against the same
  schema (the entity lock and version; the op_id's logged outcome and the key's
  current record, in one statement; supersede, insert, operation log). The target
  (issue 17: a ratio >= 0.5, p99 <= 1 ms) is judged against it: the gap is what
  SQLAlchemy and the store's plumbing cost.
* The SQLAlchemy floor runs that same transaction, statement for statement, through
  SQLAlchemy Core (``text()`` statements on a ``Connection`` of the store's own engine),
  with none of the store's code around it. It is the fastest any store written with
  SQLAlchemy Core could run these statements: when it is below half of the hand-written
  path, so is every such store, whatever its plumbing.
* The plain baseline does what the cheapest correct-ish memory store would: one
  parameterized upsert per transaction, guarded by causal_seq, on a WAL file with the
  same ``synchronous`` setting. The gap between it and the hand-written path is what
  the store's guarantees cost in SQLite itself, and no plumbing can win that back.

All three run interleaved in one process, so the ratios are fair on a noisy host.
"""

from __future__ import annotations

import re
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, TextClause, text

from invariants.backend import Write
from reference_store import ReferenceStore, StoreConfig
from reference_store.config import DEFAULT_MAX_VALUE_BYTES
from reference_store.engine import make_engine, normalize_url
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


class _Statements(Protocol):
    """Where the hand-written transaction runs its statements."""

    def begin(self) -> None: ...
    def row(self, sql: str, params: Sequence[Any]) -> Sequence[Any]: ...
    def run(self, sql: str, params: Sequence[Any]) -> None: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...


class _Sqlite3:
    """The statements on a bare sqlite3 connection."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = _connect(path, synchronous)

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def row(self, sql: str, params: Sequence[Any]) -> Sequence[Any]:
        found: Sequence[Any] = self.conn.execute(sql, params).fetchone()
        return found

    def run(self, sql: str, params: Sequence[Any]) -> None:
        self.conn.execute(sql, params)

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


class _Core:
    """The statements as SQLAlchemy ``text()`` constructs, each executed by
    ``Connection.execute`` on a connection of the store's own engine, in a transaction
    begun as the store begins one."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.engine = make_engine(normalize_url(str(path)), StoreConfig(synchronous=synchronous))
        self.texts: dict[str, TextClause] = {}
        self.conn: Connection | None = None

    def _text(self, sql: str) -> TextClause:
        clause = self.texts.get(sql)
        if clause is None:
            numbered = iter(range(sql.count("?")))
            clause = self.texts[sql] = text(re.sub(r"\?", lambda _: f":p{next(numbered)}", sql))
        return clause

    def begin(self) -> None:
        self.conn = self.engine.connect()
        self.conn.begin()
        self.conn.exec_driver_sql("BEGIN IMMEDIATE")

    def row(self, sql: str, params: Sequence[Any]) -> Sequence[Any]:
        assert self.conn is not None
        return self.conn.execute(self._text(sql), {f"p{i}": v for i, v in enumerate(params)}).one()

    def run(self, sql: str, params: Sequence[Any]) -> None:
        assert self.conn is not None
        self.conn.execute(self._text(sql), {f"p{i}": v for i, v in enumerate(params)})

    def commit(self) -> None:
        assert self.conn is not None
        self.conn.commit()
        self.conn.close()

    def close(self) -> None:
        self.engine.dispose()


def by_hand(path: Path, n: int, offset: int, synchronous: str, *,
            core: bool = False) -> Sample:
    """The reference store's write path for these writes, hand-written against sqlite3,
    or (``core``) its statements through SQLAlchemy Core with none of the store's code.

    The plan never deletes, so only the write's own tombstone checks appear; its op_ids
    are fresh, so the operation log never reports a replay (but is asked, as the store
    asks it).
    """
    db: _Statements = _Core(path, synchronous) if core else _Sqlite3(path, synchronous)
    normalizer = Normalizer()
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        op = Write("bench", entity, attr, value, seq, f"op-{seq}")
        start = time.perf_counter()
        check_op(op, max_value_bytes=DEFAULT_MAX_VALUE_BYTES)
        attr_key = normalizer.attribute_key(op.attribute)
        value_key = normalizer.value_key(op.value)
        placed = place(op.source, op.value, "semantic", 1.0)
        db.begin()
        version, deleted, delete_seq, _ = db.row(_LOCK, ("bench", entity))
        read = db.row(_READ, ("bench", op.op_id, "bench", entity, attr_key))
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
                db.run(_MERGE, (seq, now, current[0]))
                reason, version = "merged", current[4]
            else:
                if current is not None:
                    db.run(_SUPERSEDE, (version, now, current[0]))
                db.run(_INSERT, (
                    "bench", entity, attr, attr_key, value, value_key, version, seq, op.op_id,
                    op.source, placed.trust, placed.memory_type, placed.instruction_like,
                    placed.score, 30 * 24 * 3600.0, now, now))
        db.run(_LOG, ("bench", op.op_id, entity, applied, version, reason, now))
        db.commit()
        latencies.append(time.perf_counter() - start)
    db.close()
    return Sample("same transaction through SQLAlchemy Core, no store code (floor)" if core
                  else "same transaction by hand (sqlite3)", latencies)


def reference(store: ReferenceStore, n: int, offset: int) -> Sample:
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        op = Write("bench", entity, attr, value, seq, f"op-{seq}")
        start = time.perf_counter()
        store.write(op)
        latencies.append(time.perf_counter() - start)
    return Sample("reference store write", latencies)


def _rounds(folder: Path, n: int, rounds: int, synchronous: str
            ) -> tuple[list[Sample], list[Sample], list[Sample], list[Sample]]:
    config = StoreConfig(synchronous=synchronous)
    for name in ("hand.sqlite3", "core.sqlite3"):
        with ReferenceStore(folder / name, config):
            pass  # creates the reference schema for the hand-written paths
    warm = 500
    bases, hands, cores, refs = [], [], [], []
    with ReferenceStore(folder / "ref.sqlite3", config) as store:
        reference(store, warm, 0)
        baseline(folder / "base.sqlite3", warm, 0, synchronous)
        by_hand(folder / "hand.sqlite3", warm, 0, synchronous)
        by_hand(folder / "core.sqlite3", warm, 0, synchronous, core=True)
        for k in range(rounds):
            offset = warm + k * n
            bases.append(baseline(folder / "base.sqlite3", n, offset, synchronous))
            hands.append(by_hand(folder / "hand.sqlite3", n, offset, synchronous))
            cores.append(by_hand(folder / "core.sqlite3", n, offset, synchronous, core=True))
            refs.append(reference(store, n, offset))
    return bases, hands, cores, refs


def run(n: int = 4000, rounds: int = 5, synchronous: str = "NORMAL") -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="memcert-bench-") as tmp:
        bases, hands, cores, refs = _rounds(Path(tmp), n, rounds, synchronous)
    base, hand, core, ref = best(bases), best(hands), best(cores), best(refs)
    ratio = paired_ratio(refs, bases)
    hand_ratio = paired_ratio(refs, hands)
    floor = paired_ratio(cores, hands)
    print(f"\n## Single-writer upserts, SQLite file, WAL, synchronous={synchronous}")
    print(f"{rounds} interleaved rounds of {n} writes each; the median round is shown, and "
          "each ratio is the median of the rounds' ratios.\n")
    print("| run | ops/s | p50 µs | p99 µs |\n|---|---:|---:|---:|")
    print(base.row())
    print(hand.row())
    print(core.row())
    print(ref.row())
    print(f"\nratio reference / same transaction by hand = {hand_ratio:.2f} (target >= 0.5); "
          f"reference p99 = {ref.percentile(99) * 1e3:.3f} ms (target <= 1 ms)")
    print(f"SQLAlchemy Core floor / same transaction by hand = {floor:.2f}: the most any "
          f"store issuing these statements through SQLAlchemy Core reaches; reference / "
          f"floor = {paired_ratio(refs, cores):.2f}")
    print(f"ratio reference / plain upsert = {ratio:.2f}; "
          f"by hand / plain upsert = {paired_ratio(hands, bases):.2f}")
    return {"ratio": ratio, "hand_ratio": hand_ratio, "floor_ratio": floor,
            "p50_ms": ref.percentile(50) * 1e3,
            "p99_ms": ref.percentile(99) * 1e3}
