"""The driver transactions: shared handles, dead connections, query plans, and single
statements.

The write path and the one-statement calls (read, search, recall, touch) run prepared
statements on a connection each handle keeps; these tests pin what that must not
change: a handle shared by threads, a server that dropped the kept connection, SQLite
using the partial indexes, and a single statement's transaction of its own that leaves
the connection as it found it.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading

import psycopg
import pytest
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


def test_the_candidates_of_search_use_the_partial_index(sqlite_url: str) -> None:
    with ReferenceStore(sqlite_url) as store:
        sql = store._sql.candidates.get(entity=False, memory_type=False, tags=0).sql
        path = make_url(sqlite_url).database
    with sqlite3.connect(path) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {sql}", ("ns",)).fetchall()
    assert "memories_one_active" in plan[0][3]


def test_a_single_statement_transaction_refuses_a_second_one(db_url: str) -> None:
    key = {"p_namespace": "ns", "p_entity_id": "e"}
    with ReferenceStore(db_url) as store:
        with pytest.raises(RuntimeError) as caught, \
                store._driver(write=False, single=True) as tx:
            tx.all(store._sql.read_active, key)
            tx.all(store._sql.read_active, key)
        assert store.read("ns", "e") == []
    assert str(caught.value) == (
        f"a single-statement transaction was given a second statement "
        f"({store._sql.read_active.sql!r}); open the DriverTransaction with single=False")


def test_a_single_statement_leaves_the_kept_connection_to_transactions(
        fresh_pg_url: str) -> None:
    """Reads run in autocommit; the write that follows on the same connection must
    still be one transaction, or a failed write would leave half its rows."""
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        assert store.touch("ns", "e", "city") == 1
        assert [r.value for r in store.read("ns", "e")] == ["Paris"]
        kept = store._connections.acquire()
        try:
            assert kept.driver_connection.autocommit is False
        finally:
            store._connections.release(kept)
