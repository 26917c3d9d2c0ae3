"""touch counts uses without losing one; forget archives and never deletes."""

from __future__ import annotations

import itertools
import threading

import pytest
from sqlalchemy import select

from invariants.backend import Delete, Write
from invariants.errors import InvalidInput
from reference_store import ReferenceStore
from reference_store.lifecycle import forget
from reference_store.schema import memories

_ids = itertools.count(1)


class Clock:
    def __init__(self, now: float = 5_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(db_url, clock):
    with ReferenceStore(db_url, clock=clock) as handle:
        yield handle


def put(store, entity, attribute, value, ns="ns"):
    seq = next(_ids)
    ack = store.write(Write(ns, entity, attribute, value, seq, f"op{seq}"))
    assert ack.applied, ack
    return ack


def rows(store, entity, ns="ns"):
    query = (select(memories.c.attribute, memories.c.status, memories.c.access_count,
                    memories.c.last_accessed_at, memories.c.updated_at, memories.c.version)
             .where(memories.c.namespace == ns, memories.c.entity_id == entity)
             .order_by(memories.c.version))
    with store.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(query)]


# -- touch ----------------------------------------------------------------------------


def test_touch_counts_and_stamps_the_access(store, clock):
    put(store, "u1", "city", "lives in Oslo")
    clock.now = 6_000.0
    assert store.touch("ns", "u1", "city") == 1
    clock.now = 7_000.0
    assert store.touch("ns", "u1", "city") == 2
    assert rows(store, "u1") == [("city", "active", 2, 7_000.0, 5_000.0, 1)]


def test_touch_finds_the_record_under_any_variant_of_its_name(store):
    put(store, "u1", "coffee_preference", "likes americano")
    assert store.touch("ns", "u1", "Coffee Preference") == 1
    assert store.touch("ns", "u1", "coffee-preference") == 2


def test_touch_changes_nothing_an_agent_reads(store):
    put(store, "u1", "city", "lives in Oslo")
    before = store.read("ns", "u1")
    store.touch("ns", "u1", "city")
    assert store.read("ns", "u1") == before


def test_touch_only_counts_the_active_version(store):
    put(store, "u1", "city", "lives in Oslo")
    store.touch("ns", "u1", "city")
    put(store, "u1", "city", "lives in Rome")
    assert store.touch("ns", "u1", "city") == 1
    assert [(status, count) for _, status, count, *_ in rows(store, "u1")] == [
        ("superseded", 1), ("active", 1)]


@pytest.mark.parametrize("gone", ["never written", "deleted", "forgotten", "other key"])
def test_touch_without_an_active_record_returns_zero(store, gone):
    if gone == "deleted":
        put(store, "u1", "city", "lives in Oslo")
        assert store.delete(Delete("ns", "u1", next(_ids), "del")).applied
    if gone == "forgotten":
        put(store, "u1", "city", "lives in Oslo")
        forget(store, "ns", "u1")
    if gone == "other key":
        put(store, "u1", "job", "nurse")
        put(store, "u1", "city", "lives in Oslo", ns="elsewhere")
    assert store.touch("ns", "u1", "city") == 0
    assert all(count == 0 for _, _, count, *_ in rows(store, "u1"))


def test_no_touch_is_lost_under_concurrency(db_url):
    threads, touches = 16, 50
    with ReferenceStore(db_url) as store:
        put(store, "u1", "city", "lives in Oslo")
    barrier = threading.Barrier(threads)
    results: list[list[int]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            with ReferenceStore(db_url) as handle:
                barrier.wait()
                results[k] = [handle.touch("ns", "u1", "city") for _ in range(touches)]
        except BaseException as error:
            errors.append(error)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    counts = sorted(count for result in results for count in result)
    assert counts == list(range(1, threads * touches + 1))
    with ReferenceStore(db_url) as store:
        assert rows(store, "u1")[0][2] == threads * touches


# -- forget ---------------------------------------------------------------------------


def test_forget_archives_every_active_record_of_an_entity(store, clock):
    put(store, "u1", "city", "lives in Oslo")
    put(store, "u1", "city", "lives in Rome")
    put(store, "u1", "job", "nurse")
    clock.now = 9_000.0
    assert forget(store, "ns", "u1") == 2
    assert store.read("ns", "u1") == []
    assert [(status, updated) for _, status, _, _, updated, _ in rows(store, "u1")] == [
        ("superseded", 5_000.0), ("archived", 9_000.0), ("archived", 9_000.0)]
    assert forget(store, "ns", "u1") == 0


def test_forget_one_attribute_by_any_variant_of_its_name(store):
    put(store, "u1", "coffee_preference", "likes americano")
    put(store, "u1", "job", "nurse")
    assert forget(store, "ns", "u1", "Coffee Preference") == 1
    assert [record.attribute for record in store.read("ns", "u1")] == ["job"]


def test_forget_never_deletes_a_row(store):
    put(store, "u1", "city", "lives in Oslo")
    before = store.count_rows()
    forget(store, "ns", "u1")
    assert store.count_rows() == before
    assert store.count_rows(status="archived") == 1


def test_a_forgotten_entity_can_be_written_again_at_once(store):
    put(store, "u1", "city", "lives in Oslo")
    forget(store, "ns", "u1")
    ack = put(store, "u1", "city", "lives in Oslo")
    assert ack.version == 3  # the forget took version 2: it changed the entity
    assert [record.value for record in store.read("ns", "u1")] == ["lives in Oslo"]


def test_forget_stays_in_its_namespace(store):
    put(store, "u1", "city", "lives in Oslo", ns="alpha")
    put(store, "u1", "city", "lives in Rome", ns="beta")
    assert forget(store, "alpha", "u1") == 1
    assert [record.value for record in store.read("beta", "u1")] == ["lives in Rome"]


@pytest.mark.parametrize(("call", "field"), [
    (lambda s: s.touch("bad ns", "u1", "city"), "namespace"),
    (lambda s: s.touch("ns", " ", "city"), "entity_id"),
    (lambda s: s.touch("ns", "u1", "nul\x00"), "attribute"),
    (lambda s: forget(s, "ns%", "u1"), "namespace"),
    (lambda s: forget(s, "ns", ""), "entity_id"),
    (lambda s: forget(s, "ns", "u1", "   "), "attribute"),
])
def test_bad_input_is_refused_and_changes_nothing(sqlite_url, call, field):
    with ReferenceStore(sqlite_url) as store:
        put(store, "u1", "city", "lives in Oslo")
        with pytest.raises(InvalidInput) as caught:
            call(store)
        assert caught.value.field == field
        assert rows(store, "u1") == [("city", "active", 0, None, rows(store, "u1")[0][4], 1)]
