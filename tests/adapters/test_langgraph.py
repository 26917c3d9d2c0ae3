"""LangGraph's stores behind the contract: the adapter translates and adds nothing, and
``memcert certify`` leaves a complete, reproducible report on each store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chaos.audit import AuditOptions, audit_factory
from invariants.adapters import langgraph
from invariants.adapters.langgraph import LangGraphBackend, StoreFactory, entity_namespace
from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import FactoryError

from .reports import assert_complete, assert_reproducible, certify_briefly

STORES = ["inmemory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path) -> Iterator[StoreFactory]:
    """A fresh factory per test: its own InMemoryStore, SQLite file or database."""
    if request.param == "inmemory":
        yield langgraph.inmemory()
    elif request.param == "sqlite":
        yield langgraph.sqlite(tmp_path / "store.sqlite3")
    else:
        yield langgraph.postgres(request.getfixturevalue("fresh_pg_url"))


@pytest.fixture
def backend(stores: StoreFactory) -> Iterator[LangGraphBackend]:
    handle = stores()
    yield handle
    handle.close()


def write(entity: str, attribute: str, value: str, seq: int, namespace: str = "ns") -> Write:
    return Write(namespace, entity, attribute, value, seq, f"w{seq}-{value}")


def test_a_stale_write_replaces_a_newer_one_as_langgraph_does(backend):
    assert backend.write(write("alice", "city", "lives in Paris", 5)) == Ack(True)
    assert backend.write(write("alice", "city", "lives in Rome", 3)) == Ack(True)
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Rome", 3, 0)]


def test_attribute_variants_are_separate_keys(backend):
    backend.write(write("alice", "coffee_preference", "likes americano", 1))
    backend.write(write("alice", "Coffee Preference", "likes americano", 2))
    assert sorted(r.attribute for r in backend.read("ns", "alice")) == [
        "Coffee Preference", "coffee_preference"]


def test_delete_forgets_every_item_and_a_later_write_brings_the_entity_back(backend):
    backend.write(write("alice", "city", "lives in Paris", 1))
    backend.write(write("alice", "job", "works as a doctor", 2))
    backend.write(write("bob", "city", "lives in Oslo", 3))
    assert backend.delete(Delete("ns", "alice", 4, "d4")) == Ack(True)
    assert backend.read("ns", "alice") == []
    assert backend.read("ns", "bob") == [Record("bob", "city", "lives in Oslo", 3, 0)]
    assert backend.write(write("alice", "city", "lives in Rome", 2)) == Ack(True)
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Rome", 2, 0)]


def test_restore_is_reported_as_missing(backend):
    with pytest.raises(NotImplementedError) as raised:
        backend.restore(Restore("ns", "alice", 1, "r1"))
    name = type(backend.store).__name__
    assert str(raised.value) == (f"{name} deletes items outright and keeps no tombstone, so "
                                 "there is nothing to restore")


def test_dots_in_names_are_encoded_so_entities_never_merge(backend):
    assert entity_namespace("a.b", "x%y") == ("memcert", "a%2Eb", "x%25y")
    backend.write(write("x.y", "city", "lives in Paris", 1, namespace="a.b"))
    backend.write(write("y", "city", "lives in Rome", 2, namespace="a.b.x"))
    assert backend.read("a.b", "x.y") == [Record("x.y", "city", "lives in Paris", 1, 0)]
    assert backend.read("a.b.x", "y") == [Record("y", "city", "lives in Rome", 2, 0)]
    assert backend.read("a", "b.x.y") == []


def test_every_handle_sees_one_store_and_outlives_the_others(stores):
    first, second = stores(), stores()
    first.write(write("alice", "city", "lives in Paris", 1))
    first.close()
    assert second.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 1, 0)]
    second.close()


def test_reset_empties_what_memcert_wrote_and_nothing_else(backend):
    backend.write(write("alice", "city", "lives in Paris", 1))
    backend.write(write("bob", "city", "lives in Oslo", 1, namespace="other"))
    backend.store.put(("app", "user-1"), "prefs", {"theme": "dark"})
    backend.reset()
    assert backend.read("ns", "alice") == [] and backend.read("other", "bob") == []
    kept = backend.store.get(("app", "user-1"), "prefs")
    assert kept is not None and kept.value == {"theme": "dark"}


def test_postgres_without_a_url_names_the_variable(monkeypatch):
    monkeypatch.delenv(langgraph.PG_URL_ENV, raising=False)
    with pytest.raises(FactoryError) as raised:
        langgraph.postgres()()
    assert str(raised.value) == (
        "PostgresStore needs a database: set MEMCERT_LANGGRAPH_PG_URL to a URL such as "
        "postgresql://user:password@localhost:5432/memcert, or build a factory with "
        "invariants.adapters.langgraph.postgres(url)")


@pytest.mark.slow
def test_certify_inmemory_leaves_a_complete_reproducible_report(tmp_path):
    spec = "invariants.adapters.langgraph:inmemory_factory"
    saved = certify_briefly(spec, tmp_path / "out")
    assert_complete(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")


@pytest.mark.slow
def test_certify_sqlite_leaves_a_complete_reproducible_report(tmp_path, monkeypatch):
    monkeypatch.setenv(langgraph.SQLITE_PATH_ENV, str(tmp_path / "store.sqlite3"))
    spec = "invariants.adapters.langgraph:sqlite_factory"
    saved = certify_briefly(spec, tmp_path / "out")
    assert_complete(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")


@pytest.mark.slow
def test_certify_postgres_leaves_a_complete_reproducible_report(tmp_path, monkeypatch,
                                                                 fresh_pg_url):
    monkeypatch.setenv(langgraph.PG_URL_ENV, fresh_pg_url)
    spec = "invariants.adapters.langgraph:postgres_factory"
    saved = certify_briefly(spec, tmp_path / "out")
    assert_complete(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")


# -- enumeration, for memcert audit --------------------------------------------------------


def test_entities_lists_each_entity_of_a_namespace_once(backend):
    backend.write(write("alice", "city", "lives in Paris", 1))
    backend.write(write("alice", "job", "works as a doctor", 2))
    backend.write(write("a.l%ce\x00", "city", "lives in Rome", 3))  # labels LangGraph escapes
    backend.write(write("bob", "city", "lives in Oslo", 4, namespace="other"))
    assert sorted(backend.entities("ns")) == sorted(["alice", "a.l%ce\x00"])
    assert list(backend.entities("other")) == ["bob"]
    assert list(backend.entities("nobody")) == []
    backend.delete(Delete("ns", "alice", 5, "d5"))
    assert list(backend.entities("ns")) == ["a.l%ce\x00"]


def test_entities_pages_past_one_listing(backend, monkeypatch):
    monkeypatch.setattr(langgraph, "LISTING_LIMIT", 2)
    for n in range(5):
        backend.write(write(f"user-{n}", "city", f"lives in city {n}", n + 1))
    assert sorted(backend.entities("ns")) == [f"user-{n}" for n in range(5)]


def test_a_real_store_is_audited_and_its_aliased_records_found(stores, tmp_path):
    handle = stores()
    handle.write(write("alice", "coffee_preference", "drinks americano", 1))
    handle.write(write("alice", "Coffee Preference", "drinks espresso", 2))
    handle.write(write("bob", "city", "lives in Oslo", 1))
    handle.close()
    result = audit_factory(stores, "langgraph", AuditOptions(namespaces=("ns",), out=tmp_path))
    assert result.entities == 2 and result.records == 3
    uniqueness = result.report.invariants["uniqueness"]
    assert uniqueness.verdict == "fail" and uniqueness.causes["alias"] == 1
    assert result.exit_code == 1
