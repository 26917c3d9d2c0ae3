"""autogen-ext's ``ChromaDBVectorMemory`` and Chroma used directly, behind the contract:
the adapter translates and adds nothing, ``memcert certify`` leaves a recorded,
reproducible report on both profiles, and each reproducer in docs/findings/repro still
shows its failure with the pinned versions.

Runs in the autogen venv (`make test-frameworks FRAMEWORKS=autogen`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The adapter first: it turns Chroma's telemetry off before chromadb is imported.
from invariants.adapters.autogen import (  # isort: skip
    AutoGenChromaBackend,
    AutoGenFactory,
    ChromaBackend,
    HashEmbedding,
)
from invariants.backend import Ack, Delete, Record, Restore, Write

from ..adapters import reports
from ..adapters.reports import RECORDED_BUDGET_S, assert_reproducible, certify_briefly
from .conftest import assert_still_fails


@pytest.fixture(params=[True, False], ids=["autogen", "chroma"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> AutoGenFactory:
    return AutoGenFactory(autogen=request.param, folder=tmp_path)


def write(entity: str, attribute: str, value: str, seq: int, namespace: str = "ns") -> Write:
    return Write(namespace, entity, attribute, value, seq, f"w{seq}")


def by_seq(records: list[Record]) -> list[Record]:
    return sorted(records, key=lambda r: r.causal_seq)


def test_the_embedding_is_deterministic_normalized_and_needs_no_model():
    embed = HashEmbedding()
    first, again, other = embed(["lives in Paris", "lives in Paris", "works as a nurse"])
    assert first.tolist() == again.tolist() and first.tolist() != other.tolist()
    assert abs(float((first**2).sum()) - 1.0) < 1e-5


def test_namespaces_and_entities_are_kept_apart_and_reset_empties_the_store(factory):
    backend, other = factory(), factory()
    backend.write(write("alice", "city", "lives in Paris", 1))
    backend.write(write("alice", "city", "lives in Oslo", 2, namespace="other"))
    backend.write(write("bob", "city", "lives in Rome", 3))
    assert other.read("other", "alice") == [Record("alice", "city", "lives in Oslo", 2, 0)]
    assert other.read("ns", "bob") == [Record("bob", "city", "lives in Rome", 3, 0)]
    other.reset()
    assert backend.read("ns", "alice") == []


def test_restore_is_reported_as_missing(factory):
    with pytest.raises(NotImplementedError, match="keeps no tombstone"):
        factory().restore(Restore("ns", "alice", 1, "r1"))


def test_autogen_memory_adds_every_write_and_has_no_delete(tmp_path):
    backend = AutoGenFactory(autogen=True, folder=tmp_path)()
    assert isinstance(backend, AutoGenChromaBackend)
    assert backend.write(write("alice", "city", "lives in Paris", 5)) == Ack(True)
    assert backend.write(write("alice", "city", "lives in Paris", 6)) == Ack(True)
    assert backend.write(write("alice", "city", "lives in Rome", 3)) == Ack(True)
    assert by_seq(backend.read("ns", "alice")) == [
        Record("alice", "city", "lives in Rome", 3, 0),
        Record("alice", "city", "lives in Paris", 5, 0),
        Record("alice", "city", "lives in Paris", 6, 0)]
    with pytest.raises(NotImplementedError, match="only clear"):
        backend.delete(Delete("ns", "alice", 7, "d7"))


def test_chroma_upsert_keeps_the_last_write_of_a_slot_and_delete_forgets_it(tmp_path):
    backend = AutoGenFactory(autogen=False, folder=tmp_path)()
    assert isinstance(backend, ChromaBackend)
    backend.write(write("alice", "city", "lives in Paris", 5))
    backend.write(write("alice", "city", "lives in Rome", 3))
    backend.write(write("alice", "job", "works as a nurse", 4))
    assert by_seq(backend.read("ns", "alice")) == [
        Record("alice", "city", "lives in Rome", 3, 0),
        Record("alice", "job", "works as a nurse", 4, 0)]
    assert backend.delete(Delete("ns", "alice", 6, "d6")) == Ack(True)
    assert backend.read("ns", "alice") == []
    assert backend.write(write("alice", "city", "lives in Oslo", 2)) == Ack(True)
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Oslo", 2, 0)]


@pytest.mark.parametrize("spec", ["invariants.adapters.autogen:factory",
                                  "invariants.adapters.autogen:chroma_factory"])
def test_certify_leaves_a_recorded_reproducible_report(spec: str, tmp_path: Path):
    saved = certify_briefly(spec, tmp_path / "out", RECORDED_BUDGET_S)
    reports.assert_recorded(saved, spec)
    reports.assert_restores_refused(tmp_path / "out")
    assert saved["restore_supported"] is False
    assert_reproducible(saved, tmp_path / "out")


def test_repro_autogen_memory_stores_one_fact_twice():
    assert_still_fails("autogen_duplicate", "memories for one fact: ['alice lives in Paris', "
                       "'alice lives in Paris']")


def test_repro_chroma_upsert_lets_an_older_fact_replace_a_newer_one():
    assert_still_fails("chromadb_stale_overwrite",
                       "after seq 5 then a late seq 3: ['lives in Paris']")
