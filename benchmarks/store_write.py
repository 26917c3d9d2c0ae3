"""Single-writer upsert throughput of the reference store against plain sqlite3.

The baseline does what the cheapest correct-ish memory store would: one parameterized
upsert per transaction, guarded by causal_seq, on a WAL file with the same
``synchronous`` setting. The reference store does its whole write path (validation,
normalization, tombstone and staleness checks, superseding, the operation log) in one
transaction. Both run interleaved in one process, so the ratio is fair on a noisy host.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from invariants.backend import Write
from reference_store import ReferenceStore, StoreConfig

from .timing import Sample, best

ENTITIES = 200
ATTRIBUTES = ("city", "job", "drink", "language", "timezone")


def _plan(n: int, offset: int) -> list[tuple[str, str, str, int]]:
    return [(f"user-{i % ENTITIES}", ATTRIBUTES[(i // ENTITIES) % len(ATTRIBUTES)],
             f"fact number {offset + i}", offset + i) for i in range(n)]


def baseline(path: Path, n: int, offset: int, synchronous: str) -> Sample:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
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


def reference(store: ReferenceStore, n: int, offset: int) -> Sample:
    latencies = []
    for entity, attr, value, seq in _plan(n, offset):
        op = Write("bench", entity, attr, value, seq, f"op-{seq}")
        start = time.perf_counter()
        store.write(op)
        latencies.append(time.perf_counter() - start)
    return Sample("reference store write", latencies)


def run(n: int = 4000, rounds: int = 5, synchronous: str = "NORMAL") -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="memcert-bench-"))
    store = ReferenceStore(folder / "ref.sqlite3", StoreConfig(synchronous=synchronous))
    warm = 500
    reference(store, warm, 0)
    baseline(folder / "base.sqlite3", warm, 0, synchronous)
    bases, refs = [], []
    for k in range(rounds):
        offset = warm + k * n
        bases.append(baseline(folder / "base.sqlite3", n, offset, synchronous))
        refs.append(reference(store, n, offset))
    store.close()
    base, ref = best(bases), best(refs)
    ratio = ref.ops_per_second / base.ops_per_second
    print(f"\n## Single-writer upserts, SQLite file, WAL, synchronous={synchronous}")
    print(f"{rounds} interleaved rounds of {n} writes each; the median round is shown.\n")
    print("| run | ops/s | p50 µs | p99 µs |\n|---|---:|---:|---:|")
    print(base.row())
    print(ref.row())
    print(f"\nratio reference / baseline = {ratio:.2f} (target >= 0.5); "
          f"reference p99 = {ref.percentile(99) * 1e3:.3f} ms (target <= 1 ms)")
    return {"ratio": ratio, "p50_ms": ref.percentile(50) * 1e3, "p99_ms": ref.percentile(99) * 1e3}
