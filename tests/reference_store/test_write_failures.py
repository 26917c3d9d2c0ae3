"""What a write, delete or restore must keep doing when anything fails, on both databases.

Every operation is one transaction that takes the entity's lock first. These tests pin
what any change of the write path must not alter: a replay gets the first outcome, even
when two connections race; an operation that waited for the lock decides on what it
finds once it holds it; any other integrity error is raised, as the statement's that
failed; transient failures are retried, in the first statement and in later ones; a
connection that dies mid-transaction is reported and leaves nothing half-written, and
one the server dropped while idle is replaced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from invariants.backend import Ack, Delete, Record, Restore, Write
from reference_store import ReferenceStore, StoreConfig
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
        fresh_pg_url: str) -> None:
    """Both writers wait for the entity lock, which the test holds; the second to get it
    finds the first one's outcome in the operation log, under the lock."""
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
        fresh_pg_url: str, second: str, recorded: bool) -> None:
    """Two writes of one key wait for the entity lock, which the test holds, both sent
    when the key had the record (or no record) it had before either wrote; the second
    to get the lock must decide on what the first wrote: supersede it or lose to it,
    never retry on the unique index."""
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
            assert acks == {"w2": Ack(True, 2), "w3": Ack(True, 3)}
        else:
            assert acks == {"w3": Ack(True, 2), "w2": Ack(False, 2, "stale")}
        records = store.read("ns", "e")
        assert records[-1] == Record("e", "city", "Rome", 3, acks["w3"].version)
        assert _retries(registry) == 0.0
        assert _count(store, "memories") == (3 if second == "newer" else 2)


def test_a_write_that_waited_for_a_forget_does_not_supersede_what_it_archived(
        fresh_pg_url: str) -> None:
    """The forget takes the entity lock first and archives the record the waiting write
    read before it; the write must find no current record once it holds the lock, and
    leave the archived row archived."""
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        forgot, ack = _behind_the_lock(
            fresh_pg_url, lambda: store.forget("ns", "e"),
            lambda: store.write(Write("ns", "e", "city", "Oslo", 2, "w2")))
        assert forgot == 1
        # The forget took version 2.
        assert ack == Ack(True, 3)
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, 3)]
        assert (store.count_rows(status="archived"), store.count_rows(status="superseded"),
                store.count_rows(status="active")) == (1, 0, 1)


def test_a_write_that_waited_for_a_delete_is_refused_as_tombstoned(
        fresh_pg_url: str) -> None:
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
def test_an_integrity_error_that_is_not_a_replay_is_raised(db_url: str,
                                                           constraint: str) -> None:
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
        assert _inserts_a_memory(caught.value.statement)
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


def _inserts_a_memory(statement: str | None) -> bool:
    return statement is not None and statement.startswith("INSERT INTO memories ")


def _terminate_others(url: str) -> int:
    """End every session of the database but this call's own; return how many."""
    with psycopg.connect(_libpq(url), autocommit=True) as admin:
        (ended,) = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
        while admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchone():
            time.sleep(0.01)
    return int(ended)


def _killing_clock(url: str, armed: list[bool]) -> Callable[[], float]:
    """A clock that, while ``armed``, ends the store's sessions when read: the store
    reads its clock under the entity lock, once it has what it decides on."""
    def clock() -> float:
        if armed:
            _terminate_others(url)
        return time.time()
    return clock


def test_a_connection_killed_mid_transaction_raises_and_writes_nothing(
        fresh_pg_url: str) -> None:
    armed: list[bool] = []
    with ReferenceStore(fresh_pg_url, clock=_killing_clock(fresh_pg_url, armed)) as store:
        store.write(Write("ns", "other", "city", "Paris", 1, "w0"))
        armed.append(True)
        with pytest.raises(OperationalError) as caught:
            store.write(Write("ns", "e", "city", "Oslo", 2, "w1"))
        armed.clear()
        assert caught.value.connection_invalidated
        assert _inserts_a_memory(caught.value.statement)
        assert store.read("ns", "e") == []
        assert (_count(store, "operations"), _count(store, "entities")) == (1, 1)
        # The entity row's upsert was undone too: its first version is handed out again.
        assert store.write(Write("ns", "e", "city", "Oslo", 2, "w1")) == Ack(True, 1)


def test_a_connection_the_server_dropped_while_idle_is_replaced_silently(
        fresh_pg_url: str) -> None:
    with ReferenceStore(fresh_pg_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))
        assert _terminate_others(fresh_pg_url) >= 1
        assert store.write(Write("ns", "e", "city", "Oslo", 2, "w2")) == Ack(True, 2)
        assert store.read("ns", "e") == [Record("e", "city", "Oslo", 2, 2)]
        assert (_count(store, "operations"), _count(store, "entities")) == (2, 1)
