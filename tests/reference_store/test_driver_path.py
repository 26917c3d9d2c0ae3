"""The write path's driver transactions: shared handles, dead connections, query plans.

The write path runs prepared statements on a connection each handle keeps; these tests
pin what that must not change: a handle shared by threads, a server that dropped the
kept connection, and SQLite using the partial index for the current-record lookup.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading

import psycopg
from sqlalchemy.engine import make_url

from invariants.backend import Delete, Restore, Write
from reference_store import ReferenceStore
from tests.reference_store.test_concurrency import _op, verify


def test_one_handle_shared_by_16_threads_keeps_every_invariant(db_url: str) -> None:
    seqs, seq_lock = itertools.count(1), threading.Lock()
    logs: list[list[tuple]] = [[] for _ in range(16)]
    errors: list[BaseException] = []

    with ReferenceStore(db_url) as store:
        calls = {Write: store.write, Delete: store.delete, Restore: store.restore}

        def work(k: int) -> None:
            rng = random.Random(k)
            try:
                for i in range(40):
                    with seq_lock:
                        seq = next(seqs)
                    op = _op(rng, seq, f"t{k}-{i}")
                    ack = calls[type(op)](op)
                    assert calls[type(op)](op) == ack, f"a replay of {op} changed its outcome"
                    logs[k].append((op, ack, store.read("ns", op.entity_id)))
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    verify(db_url, [entry for log in logs for entry in log])


def test_a_kept_connection_the_server_dropped_is_replaced_silently(fresh_pg_url: str) -> None:
    libpq = make_url(fresh_pg_url).set(drivername="postgresql").render_as_string(
        hide_password=False)
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        with psycopg.connect(libpq, autocommit=True) as admin:
            (dropped,) = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
        assert dropped >= 1
        assert store.write(Write("ns", "e", "city", "Oslo", 2, "w2")).version == 2
        assert [r.value for r in store.read("ns", "e")] == ["Oslo"]


def test_the_current_record_lookup_uses_the_partial_index(sqlite_url: str) -> None:
    with ReferenceStore(sqlite_url) as store:
        sql = store._sql.current_record.sql
        path = make_url(sqlite_url).database
    assert "status = 'active'" in sql
    with sqlite3.connect(path) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}", ("ns", "e", "city")).fetchall()
    assert "memories_one_active" in plan[0][3]
