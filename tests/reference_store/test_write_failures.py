"""What a write, delete or restore must keep doing when anything fails, on both databases.

On PostgreSQL a write takes two round trips and no transaction: it reads what it decides
on, then sends its changes and the operation log in one statement guarded by the
entity's version (statements.read_state, guarded_write). When the entity changed in
between, every time, it takes the entity lock instead: a transaction of four or five
round trips (statements.lock_current, with_log), as deletes and restores always do. The
tests of a write run both ways (``write_path``). These tests pin what any change of the
write path must not alter: a replay gets the first outcome, even when two connections
race; any other integrity error is raised, as the statement's that failed; transient
failures are retried, in the first statement and in later ones; a connection that dies
mid-transaction is reported and leaves nothing half-written; and the round trips each
kind of operation takes, read from libpq's protocol trace.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from psycopg import pq
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from invariants.backend import Ack, Delete, Record, Restore, Write
from reference_store import ReferenceStore, StoreConfig
from reference_store import store as store_module
from reference_store.metrics import StoreMetrics

T = TypeVar("T")


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _run_sql(store: ReferenceStore, *statements: str) -> None:
    with store.engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)


def _count(store: ReferenceStore, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())


_GUARDED_TRIES = {"guarded": store_module._GUARDED_TRIES, "fallback": 1, "locked": 0}


@pytest.fixture(params=list(_GUARDED_TRIES))
def write_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How writes run on PostgreSQL: guarded; guarded once, then under the entity lock
    if that guard failed (as a write does when its guard keeps failing); or under the
    lock from the start. (SQLite has one way, which each runs.)"""
    monkeypatch.setattr(store_module, "_GUARDED_TRIES", _GUARDED_TRIES[request.param])
    return str(request.param)


def _inserting(store: ReferenceStore, write_path: str) -> str:
    """The statement that inserts a new entity's first memory: on PostgreSQL, with the
    operation log's, and the guard's when the write is guarded."""
    insert = store._sql.insert_memory.sql
    if store.engine.dialect.name != "postgresql":
        return insert
    if write_path != "locked":
        return store._sql.guarded[(True, False, (insert,))].sql
    return store._sql.with_log[(insert,)].sql


def _retries(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("memcert_store_retries_total")


def test_a_replayed_op_id_gets_the_first_outcome(db_url: str) -> None:
    with ReferenceStore(db_url) as store:
        first = [store.write(Write("ns", "e", "city", "Paris", 1, "w1")),
                 store.write(Write("ns", "e", "city", "Oslo", 2, "w2")),
                 store.write(Write("ns", "e", "city", "oslo", 3, "w3")),
                 store.delete(Delete("ns", "e", 4, "d1")),
                 store.restore(Restore("ns", "e", 5, "r1"))]
        assert first == [Ack(True, 1), Ack(True, 2), Ack(True, 2, "merged"), Ack(True, 4),
                         Ack(True, 5)]
        # Each replay would be decided differently now (writes older than the delete, a
        # delete older than the restore, a restore of a live entity) if it ran again.
        again = [store.write(Write("ns", "e", "city", "Paris", 1, "w1")),
                 store.write(Write("ns", "e", "city", "Oslo", 2, "w2")),
                 store.write(Write("ns", "e", "city", "oslo", 3, "w3")),
                 store.delete(Delete("ns", "e", 4, "d1")),
                 store.restore(Restore("ns", "e", 5, "r1"))]
        assert again == first
        assert (_count(store, "operations"), _count(store, "memories")) == (5, 2)
        assert store.write(Write("ns", "e", "city", "Rome", 6, "w4")) == Ack(True, 6)
        assert store.read("ns", "e") == [Record("e", "city", "Rome", 6, 6)]


def test_a_replay_racing_on_two_connections_gets_the_first_outcome(
        fresh_pg_url: str, write_path: str) -> None:
    """Both writers wait for the entity lock, which the test holds; the second to get it
    learns of the replay from the operation log: guarded, in the read it makes again
    after its guard failed; locked, when its insert into the log is refused, after it
    decided on its own (a merge into the first one's record)."""
    op = Write("ns", "e", "city", "Oslo", 2, "w2")
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        acks = _behind_the_lock(fresh_pg_url, lambda: store.write(op), lambda: store.write(op))
        assert acks == [Ack(True, 2), Ack(True, 2)]
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, 2)]
        assert (_count(store, "operations"), _count(store, "memories")) == (2, 2)


def _behind_the_lock(url: str, *calls: Callable[[], T]) -> list[T]:
    """Hold entity ``e``'s row lock; start each call in a thread of its own once the ones
    before it wait for that lock; release it; return what each call returned, in order."""
    results: dict[int, T] = {}
    failures: list[BaseException] = []

    def run(n: int, call: Callable[[], T]) -> None:
        try:
            results[n] = call()
        except BaseException as error:
            failures.append(error)

    with psycopg.connect(_libpq(url)) as admin, \
            psycopg.connect(_libpq(url), autocommit=True) as watch:
        admin.execute("SELECT 1 FROM entities WHERE entity_id = 'e' FOR UPDATE")
        threads = []
        for n, call in enumerate(calls):
            thread = threading.Thread(target=run, args=(n, call))
            thread.start()
            threads.append(thread)
            _waiting_for_locks(watch, n + 1)
        admin.commit()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return [results[n] for n in range(len(calls))]


def _waiting_for_locks(watch: psycopg.Connection[Any], count: int) -> None:
    deadline = time.monotonic() + 10
    while watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'").fetchone() != (count,):
        assert time.monotonic() < deadline, f"never {count} sessions waiting for a lock"
        time.sleep(0.01)


@pytest.mark.parametrize("recorded", [True, False], ids=["a record", "no record"])
@pytest.mark.parametrize("second", ["newer", "older"])
def test_a_write_that_waited_for_the_lock_decides_on_the_record_it_finds_then(
        fresh_pg_url: str, second: str, recorded: bool, write_path: str) -> None:
    """Two writes of one key wait for the entity lock, which the test holds. Each read
    the key's record (or that it had none) before the other wrote (guarded: in its
    read; locked: in the statement that waits, statements.lock_current); the second to
    get the lock must decide on what the first wrote, not on that: supersede it or lose
    to it, never retry on the unique index."""
    registry = CollectorRegistry()
    newer = Write("ns", "e", "city", "Rome", 3, "w3")
    older = Write("ns", "e", "city", "Oslo", 2, "w2")
    first, then = (older, newer) if second == "newer" else (newer, older)
    with ReferenceStore(fresh_pg_url, metrics=StoreMetrics(registry)) as store:
        store.write(Write("ns", "e", "city" if recorded else "pet", "Paris", 1, "w1"))
        acks = dict(zip((first.op_id, then.op_id),
                        _behind_the_lock(fresh_pg_url, partial(store.write, first),
                                         partial(store.write, then)), strict=True))
        if second == "newer":
            # A guard that found the record changed had already taken a version; one
            # whose insert the unique index refused took none (the statement failed).
            skipped = 1 if recorded and write_path != "locked" else 0
            assert acks == {"w2": Ack(True, 2), "w3": Ack(True, 3 + skipped)}
        else:
            assert acks == {"w3": Ack(True, 2), "w2": Ack(False, 2, "stale")}
        records = store.read("ns", "e")
        assert records[-1] == Record("e", "city", "Rome", 3, acks["w3"].version)
        assert _retries(registry) == 0.0
        # The second's guard missed once, unless it never tried one.
        assert registry.get_sample_value("memcert_store_guard_misses_total") == (
            0.0 if write_path == "locked" else 1.0)
        assert _count(store, "memories") == (3 if second == "newer" else 2)


def test_a_write_that_waited_for_a_forget_does_not_supersede_what_it_archived(
        fresh_pg_url: str, write_path: str) -> None:
    """The forget takes the entity lock first and archives the record the waiting write
    read before it; the write must find no current record once it holds the lock, and
    leave the archived row archived."""
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        forgot, ack = _behind_the_lock(
            fresh_pg_url, lambda: store.forget("ns", "e"),
            lambda: store.write(Write("ns", "e", "city", "Oslo", 2, "w2")))
        assert forgot == 1
        # The forget took version 2; a guard that found the record archived took 3.
        version = 3 if write_path == "locked" else 4
        assert ack == Ack(True, version)
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, version)]
        assert (store.count_rows(status="archived"), store.count_rows(status="superseded"),
                store.count_rows(status="active")) == (1, 0, 1)


def test_a_write_that_waited_for_a_delete_is_refused_as_tombstoned(
        fresh_pg_url: str, write_path: str) -> None:
    """The write read the entity live; the delete takes the entity lock first and
    deletes it; the write must find it deleted, not revive it. It writes a key the
    entity has no record of, so only the entity's tombstone state can tell."""
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        deleted, ack = _behind_the_lock(
            fresh_pg_url, lambda: store.delete(Delete("ns", "e", 2, "d1")),
            lambda: store.write(Write("ns", "e", "job", "nurse", 3, "w2")))
        assert deleted == Ack(True, 2)
        assert ack == Ack(False, reason="tombstoned")
        assert store.read("ns", "e") == []
        assert store.count_rows(status="active") == 0


@pytest.mark.parametrize("constraint", ["check", "unique"])
def test_an_integrity_error_that_is_not_a_replay_is_raised(db_url: str, constraint: str,
                                                           write_path: str) -> None:
    """Refused by the memory insert, which comes before the operation log's insert; a
    unique violation there has the replay's SQLSTATE, and is still no replay (it is
    retried as transient, then raised)."""
    registry = CollectorRegistry()
    with ReferenceStore(db_url, StoreConfig(max_retries=1),
                        metrics=StoreMetrics(registry)) as store:
        if constraint == "unique":
            _run_sql(store, "CREATE UNIQUE INDEX one_value ON memories (value)")
            store.write(Write("ns", "other", "city", "Paris", 1, "w0"))
            refused = Write("ns", "e", "city", "Paris", 2, "w1")
        elif store.engine.dialect.name == "postgresql":
            _run_sql(store, "ALTER TABLE memories ADD CONSTRAINT no_secrets "
                            "CHECK (value <> 'secret')")
            refused = Write("ns", "e", "city", "secret", 2, "w1")
        else:
            _run_sql(store, "CREATE TRIGGER no_secrets BEFORE INSERT ON memories "
                            "WHEN NEW.value = 'secret' "
                            "BEGIN SELECT RAISE(ABORT, 'no secrets'); END")
            refused = Write("ns", "e", "city", "secret", 2, "w1")
        before = (_count(store, "operations"), _count(store, "memories"),
                  _count(store, "entities"))
        with pytest.raises(IntegrityError) as caught:
            store.write(refused)
        assert caught.value.statement == _inserting(store, write_path)
        assert _retries(registry) == (1.0 if constraint == "unique" else 0.0)
        assert (_count(store, "operations"), _count(store, "memories"),
                _count(store, "entities")) == before
        assert store.write(Write("ns", "e", "city", "Oslo", 3, "w2")) == Ack(True, 1)


def test_a_lock_timeout_on_the_entity_lock_is_retried(fresh_pg_url: str) -> None:
    with psycopg.connect(_libpq(fresh_pg_url), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {make_url(fresh_pg_url).database} "
                      "SET lock_timeout = '40ms'")
    registry = CollectorRegistry()
    with ReferenceStore(fresh_pg_url, metrics=StoreMetrics(registry)) as store, \
            psycopg.connect(_libpq(fresh_pg_url)) as admin:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        admin.execute("SELECT 1 FROM entities WHERE entity_id = 'e' FOR UPDATE")
        release = threading.Timer(0.15, admin.commit)
        release.start()
        try:
            assert store.write(Write("ns", "e", "city", "Oslo", 2, "w2")) == Ack(True, 2)
        finally:
            release.join()
        retries = _retries(registry)
        assert retries is not None and retries >= 1
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, 2)]


def test_a_serialization_failure_after_the_lock_is_retried(fresh_pg_url: str) -> None:
    registry = CollectorRegistry()
    with ReferenceStore(fresh_pg_url, metrics=StoreMetrics(registry)) as store:
        _run_sql(store,
                 "CREATE SEQUENCE inserts",
                 "CREATE FUNCTION fail_first() RETURNS trigger LANGUAGE plpgsql AS $$ "
                 "BEGIN IF nextval('inserts') = 1 THEN RAISE EXCEPTION 'injected' "
                 "USING ERRCODE = 'serialization_failure'; END IF; RETURN NEW; END $$",
                 "CREATE TRIGGER fail_first BEFORE INSERT ON memories "
                 "FOR EACH ROW EXECUTE FUNCTION fail_first()")
        assert store.write(Write("ns", "e", "city", "Paris", 1, "w1")) == Ack(True, 1)
        assert _retries(registry) == 1.0
        assert (_count(store, "operations"), _count(store, "memories")) == (1, 1)


def _killing_clock(url: str, doomed: list[int]) -> Callable[[], float]:
    """A clock that terminates the backends in ``doomed`` when read: the store reads its
    clock once it has what it decides on (holding the entity lock, unless guarded)."""
    def clock() -> float:
        if doomed:
            with psycopg.connect(_libpq(url), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", doomed)
                while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                    doomed).fetchone():
                    time.sleep(0.01)
        return time.time()
    return clock


def _doom_kept_connection(store: ReferenceStore, doomed: list[int]) -> None:
    kept = store._connections.acquire()
    doomed.append(kept.driver_connection.info.backend_pid)
    store._connections.release(kept)


def test_a_connection_killed_mid_transaction_raises_and_writes_nothing(
        fresh_pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_GUARDED_TRIES", 0)  # a write under the lock
    doomed: list[int] = []
    with ReferenceStore(fresh_pg_url, clock=_killing_clock(fresh_pg_url, doomed)) as store:
        store.write(Write("ns", "other", "city", "Paris", 1, "w0"))
        _doom_kept_connection(store, doomed)
        with pytest.raises(OperationalError) as caught:
            store.write(Write("ns", "e", "city", "Oslo", 2, "w1"))
        doomed.clear()
        assert caught.value.connection_invalidated
        assert caught.value.statement == _inserting(store, "locked")
        assert store.read("ns", "e") == []
        assert (_count(store, "operations"), _count(store, "entities")) == (1, 1)
        # The entity row's upsert was undone too: its first version is handed out again.
        assert store.write(Write("ns", "e", "city", "Oslo", 2, "w1")) == Ack(True, 1)


def test_a_guarded_write_whose_connection_died_after_its_read_is_applied_once(
        fresh_pg_url: str) -> None:
    """Nothing of the write has reached the server when its connection dies, so its
    guarded statement goes on a fresh connection, as any statement that finds its
    connection dead before anything was sent does."""
    doomed: list[int] = []
    with ReferenceStore(fresh_pg_url, clock=_killing_clock(fresh_pg_url, doomed)) as store:
        store.write(Write("ns", "other", "city", "Paris", 1, "w0"))
        _doom_kept_connection(store, doomed)
        assert store.write(Write("ns", "e", "city", "Oslo", 2, "w1")) == Ack(True, 1)
        doomed.clear()
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, 1)]
        assert (_count(store, "operations"), _count(store, "entities")) == (2, 2)


def _exchanges(trace: str) -> list[list[str]]:
    """The trace cut into round trips: the messages the client sent before each wait.

    The client waits after asking for answers (Flush, Sync, or a simple Query, which
    implies a Sync) and receiving some. An answer read without asking (an error the
    server sends at once, picked up while the client is still sending) is no wait.
    """
    exchanges: list[list[str]] = []
    sent: list[str] = []
    for line in trace.splitlines():
        side, _, message = line.partition("\t")
        if side == "F":
            sent.append(message)
        elif side == "B" and sent and sent[-1].split("\t")[1] in ("Flush", "Sync", "Query"):
            exchanges.append(sent)
            sent = []
    return exchanges


def _round_trips(store: ReferenceStore, call: Callable[[], object]) -> list[list[str]]:
    """The exchanges ``call`` has with the server on the handle's kept connection."""
    kept = store._connections.acquire()
    pgconn = kept.driver_connection.pgconn
    store._connections.release(kept)
    with tempfile.TemporaryFile("w+") as out:
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            call()
        finally:
            pgconn.untrace()  # which flushes libpq's buffer into the file
        out.seek(0)
        return _exchanges(out.read())


@pytest.mark.parametrize(("path", "expected"), [
    ("guarded", {"new key": 2, "supersede": 2, "merge": 2, "stale": 2, "delete": 4,
                 "restore": 4, "replayed write": 1, "replayed delete": 5}),
    ("locked", {"new key": 4, "supersede": 5, "merge": 4, "stale": 4, "delete": 4,
                "restore": 4, "replayed write": 5, "replayed delete": 5}),
])
def test_round_trips_of_each_operation_on_postgresql(
        fresh_pg_url: str, monkeypatch: pytest.MonkeyPatch, path: str,
        expected: dict[str, int]) -> None:
    """A guarded write: its read, then its changes with the operation log (a replay
    already logged: the read alone). Under the lock, and every delete and restore:
    BEGIN, the entity lock (with a write's current record), a supersede's own statement,
    the changes with the operation log, and COMMIT. A replay there adds psycopg's
    ROLLBACK (and its DEALLOCATE ALL, when it has prepared statements to forget, not
    counted here) and the read of the first outcome, a statement of its own."""
    if path == "locked":
        monkeypatch.setattr(store_module, "_GUARDED_TRIES", 0)
    with ReferenceStore(fresh_pg_url) as store:
        for n in range(6):  # past psycopg's prepare threshold, whose PREPAREs take a trip
            w = f"warm{n}"
            store.write(Write("ns", w, "city", "Paris", 1, f"{w}-1"))
            store.write(Write("ns", w, "city", "Oslo", 2, f"{w}-2"))
            store.write(Write("ns", w, "city", "oslo", 3, f"{w}-3"))
            store.delete(Delete("ns", w, 4, f"{w}-4"))
            store.restore(Restore("ns", w, 5, f"{w}-5"))
        counts = {}
        for label, call in [
            ("new key", lambda: store.write(Write("ns", "e", "city", "Paris", 1, "w1"))),
            ("supersede", lambda: store.write(Write("ns", "e", "city", "Oslo", 2, "w2"))),
            ("merge", lambda: store.write(Write("ns", "e", "city", "oslo", 3, "w3"))),
            ("stale", lambda: store.write(Write("ns", "e", "city", "Rome", 1, "w4"))),
            ("delete", lambda: store.delete(Delete("ns", "e", 5, "d1"))),
            ("restore", lambda: store.restore(Restore("ns", "e", 6, "r1"))),
            ("replayed write", lambda: store.write(Write("ns", "e", "city", "Oslo", 2, "w2"))),
            ("replayed delete", lambda: store.delete(Delete("ns", "e", 5, "d1"))),
        ]:
            counts[label] = len([sent for sent in _round_trips(store, call)
                                 if sent != ['19\tQuery\t "DEALLOCATE ALL"']])
        assert counts == expected
