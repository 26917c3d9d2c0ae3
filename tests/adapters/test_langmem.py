"""LangMem's manage-memory tool behind the contract: the tools' own calls, no chat model,
nothing added; and ``memcert certify`` leaves a complete, reproducible report."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from invariants.adapters import langgraph, langmem
from invariants.adapters.langmem import LangMemBackend
from invariants.backend import Ack, Delete, Record, Restore, Write

from .reports import assert_complete, assert_reproducible, certify_briefly


@pytest.fixture
def backend() -> Iterator[LangMemBackend]:
    handle = langmem.over(langgraph.inmemory())()
    yield handle
    handle.close()


def write(attribute: str, value: str, seq: int, entity: str = "alice") -> Write:
    return Write("ns", entity, attribute, value, seq, f"w{seq}")


def memories(backend: LangMemBackend, entity: str = "alice") -> list[dict]:
    """The memories as LangGraph holds them, read past the tools."""
    items = backend.store.search(("memcert", "ns", entity), limit=100)
    return [{"key": item.key, **item.value} for item in items]


def test_a_write_creates_a_memory_and_the_next_write_of_its_attribute_updates_it(backend):
    assert backend.write(write("city", "lives in Paris", 5)) == Ack(True)
    [created] = memories(backend)
    assert created["content"] == {"attribute": "city", "value": "lives in Paris",
                                  "causal_seq": 5, "op_id": "w5"}
    assert backend.write(write("city", "lives in Rome", 3)) == Ack(True)
    [updated] = memories(backend)
    assert updated["key"] == created["key"]
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Rome", 3, 0)]


def test_an_attribute_variant_creates_a_second_memory(backend):
    backend.write(write("coffee_preference", "likes americano", 1))
    backend.write(write("Coffee Preference", "likes americano", 2))
    assert [r.attribute for r in backend.read("ns", "alice")] == [
        "coffee_preference", "Coffee Preference"]


def test_delete_removes_each_memory_and_a_later_write_creates_a_new_one(backend):
    backend.write(write("city", "lives in Paris", 1))
    backend.write(write("job", "works as a doctor", 2))
    backend.write(write("city", "lives in Oslo", 3, entity="bob"))
    before = {m["key"] for m in memories(backend)}
    assert backend.delete(Delete("ns", "alice", 4, "d4")) == Ack(True)
    assert backend.read("ns", "alice") == []
    assert len(memories(backend, "bob")) == 1
    backend.write(write("city", "lives in Rome", 2))
    [again] = memories(backend)
    assert again["key"] not in before
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Rome", 2, 0)]


def test_restore_is_reported_as_missing(backend):
    with pytest.raises(NotImplementedError) as raised:
        backend.restore(Restore("ns", "alice", 1, "r1"))
    assert str(raised.value) == ("LangMem's manage_memory tool deletes memories outright and "
                                 "has no restore")


def test_a_read_is_what_the_search_tool_serves(backend):
    backend.write(write("city", "lives in Paris", 1))
    served = json.loads(backend.search_tool.invoke(
        {"query": ""}, config={"configurable": {"memcert_namespace": "ns",
                                                 "memcert_entity": "alice"}}))
    assert [m["value"]["content"]["value"] for m in served] == ["lives in Paris"]
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 1, 0)]


def test_factory_handles_share_the_store_of_their_store_factory():
    shared = langmem.over(langgraph.inmemory())
    first, second = shared(), shared()
    first.write(write("city", "lives in Paris", 1))
    assert second.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 1, 0)]
    assert shared.shares_across_processes is False


@pytest.mark.slow
def test_certify_langmem_leaves_a_complete_reproducible_report(tmp_path):
    spec = "invariants.adapters.langmem:factory"
    saved = certify_briefly(spec, tmp_path / "out")
    assert_complete(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")


@pytest.fixture(scope="module")
def index():
    from invariants.adapters.langgraph import vector_index
    from reference_store.normalize import minilm

    return vector_index(minilm.load(), [])


def test_the_search_profile_serves_each_memory_once_through_both_reads(index):
    from langgraph.store.memory import InMemoryStore

    from invariants.adapters.langgraph import LangGraphBackend

    handle = LangMemBackend(LangGraphBackend(InMemoryStore(index=index)), search=True)
    handle.write(write("city", "lives in Paris", 1))
    handle.write(write("City", "lives in Rome", 2))
    handle.write(write("job", "works as a doctor", 3))
    assert handle.read("ns", "alice") == [
        Record("alice", "city", "lives in Paris", 1, 0),
        Record("alice", "City", "lives in Rome", 2, 0),
        Record("alice", "job", "works as a doctor", 3, 0)]
    handle.delete(Delete("ns", "alice", 4, "d4"))
    assert handle.read("ns", "alice") == []


def test_a_memory_only_the_search_serves_reaches_the_records(index):
    """A store whose semantic search keeps serving deleted memories: the read passes them
    on, so the checkers see the resurrection; the listing profile never asks."""
    from langgraph.store.base import PutOp, SearchItem, SearchOp
    from langgraph.store.memory import InMemoryStore

    from invariants.adapters.langgraph import LangGraphBackend

    class RemembersDeleted(InMemoryStore):
        def __init__(self, **kwargs) -> None:
            super().__init__(**kwargs)
            self.ghosts: list = []

        def batch(self, ops):
            ops = list(ops)
            for op in ops:
                if isinstance(op, PutOp) and op.value is None:
                    gone = self.get(op.namespace, op.key)
                    if gone is not None:
                        self.ghosts.append(gone)
            results = super().batch(ops)
            for k, op in enumerate(ops):
                if isinstance(op, SearchOp) and op.query:
                    results[k] = [*results[k], *(
                        SearchItem(g.namespace, g.key, g.value, g.created_at, g.updated_at,
                                   score=0.0)
                        for g in self.ghosts if g.namespace[:len(op.namespace_prefix)]
                        == op.namespace_prefix)]
            return results

    store = RemembersDeleted(index=index)
    searching = LangMemBackend(LangGraphBackend(store), search=True)
    listing = LangMemBackend(LangGraphBackend(store))
    searching.write(write("city", "lives in Paris", 1))
    searching.delete(Delete("ns", "alice", 2, "d2"))
    assert listing.read("ns", "alice") == []
    assert searching.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 1, 0)]
