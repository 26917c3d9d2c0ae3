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
