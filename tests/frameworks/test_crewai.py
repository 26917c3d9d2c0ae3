"""crewai's unified Memory on embedded LanceDB behind the contract: the adapter
translates and adds nothing, the scripted consolidation model answers crewai's real
prompt, ``memcert certify`` leaves a complete, reproducible report on both profiles,
and each reproducer of docs/findings/crewai.md still shows its failure with the pinned
crewai.

Runs in the crewai venv (``pip install -e '.[crewai,testbase]'``); a missing package
fails the module, never skips it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# The adapter first: it turns crewai's telemetry and tracing off before crewai acts.
# isort: off
from invariants.adapters.crewai import CrewaiBackend, CrewaiFactory, ScriptedConsolidationLLM
from crewai.memory.analyze import analyze_for_consolidation
from crewai.memory.types import MemoryRecord
# isort: on
from invariants.adapters.scripted import fact
from invariants.backend import Ack, Delete, Record, Restore, Write
from tests.adapters.reports import assert_complete, assert_reproducible, certify_briefly

REPRO = Path(__file__).resolve().parents[2] / "docs" / "findings" / "repro"


@pytest.fixture(scope="module")
def factories(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, CrewaiFactory]:
    return {scoped: CrewaiFactory(scoped=scoped,
                                  folder=tmp_path_factory.mktemp(f"crewai-{scoped}"))
            for scoped in (False, True)}


@pytest.fixture(params=[False, True], ids=["per-attribute", "scoped"])
def backend(request: pytest.FixtureRequest,
            factories: dict[bool, CrewaiFactory]) -> Iterator[CrewaiBackend]:
    handle = factories[request.param]()
    handle.reset()
    yield handle
    handle.close()


def write(entity: str, attribute: str, value: str, seq: int, namespace: str = "ns") -> Write:
    return Write(namespace, entity, attribute, value, seq, f"w{seq}-{namespace}")


def test_consolidation_replaces_the_slot_whatever_the_causal_order(backend):
    assert backend.write(write("alice", "city", "lives in Paris", 5)) == Ack(True)
    assert backend.write(write("alice", "city", "lives in Rome", 3)) == Ack(True)
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Rome", 3, 0)]


def test_a_repeated_fact_is_kept_once(backend):
    assert backend.write(write("alice", "job", "is a baker", 4)) == Ack(True)
    assert backend.write(write("alice", "job", "is a baker", 6)) == Ack(
        False, reason="duplicate")
    assert backend.read("ns", "alice") == [Record("alice", "job", "is a baker", 4, 0)]


def test_an_alias_of_the_attribute_is_one_slot_only_in_the_scoped_profile(backend):
    backend.write(write("alice", "city", "lives in Paris", 1))
    answer = backend.write(write("alice", "City", "lives in Rome", 2))
    assert answer == Ack(True)
    served = sorted(backend.read("ns", "alice"), key=lambda r: r.causal_seq)
    if backend.scoped:
        assert served == [Record("alice", "City", "lives in Rome", 2, 0)]
    else:
        assert served == [Record("alice", "city", "lives in Paris", 1, 0),
                          Record("alice", "City", "lives in Rome", 2, 0)]


def test_forget_removes_the_entity_and_a_later_write_is_stored_again(backend):
    backend.write(write("alice", "city", "lives in Paris", 1))
    backend.write(write("alice", "city", "lives in Oslo", 2, namespace="other"))
    backend.write(write("bob", "city", "lives in Rome", 3))
    assert backend.delete(Delete("ns", "alice", 4, "d4")) == Ack(True)
    assert backend.read("ns", "alice") == []
    assert backend.read("other", "alice") == [Record("alice", "city", "lives in Oslo", 2, 0)]
    assert backend.read("ns", "bob") == [Record("bob", "city", "lives in Rome", 3, 0)]
    assert backend.write(write("alice", "city", "lives in Paris", 2)) == Ack(True)
    assert backend.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 2, 0)]


def test_an_entity_whose_id_extends_anothers_shares_its_reads_and_its_forget(backend):
    backend.write(write("user-1", "city", "lives in Paris", 1))
    backend.write(write("user-10", "city", "lives in Rome", 2))
    assert backend.read("ns", "user-1") == [Record("user-10", "city", "lives in Rome", 2, 0),
                                            Record("user-1", "city", "lives in Paris", 1, 0)]
    backend.delete(Delete("ns", "user-1", 3, "d3"))
    assert backend.read("ns", "user-10") == []


def test_restore_is_reported_as_missing(backend):
    with pytest.raises(NotImplementedError) as raised:
        backend.restore(Restore("ns", "alice", 1, "r1"))
    assert str(raised.value) == ("crewai forgets memories outright and keeps no tombstone, "
                                 "so there is nothing to restore")


def test_every_handle_of_a_factory_sees_one_store(backend, factories):
    other = factories[backend.scoped]()
    backend.write(write("alice", "city", "lives in Paris", 1))
    assert other.read("ns", "alice") == [Record("alice", "city", "lives in Paris", 1, 0)]
    assert other.memory is backend.memory


def test_a_standalone_remember_does_not_wait_for_the_tracing_handler(backend):
    started = time.perf_counter()
    backend.write(write("alice", "city", "lives in Paris", 1))
    assert time.perf_counter() - started < 4.0


def test_the_script_answers_crewais_own_consolidation_prompt_as_a_perfect_model_would():
    llm = ScriptedConsolidationLLM(model="memcert-scripted")
    records = [MemoryRecord(id="a", content=fact("alice", "city", "lives in Paris"),
                            scope="/ns/alice"),
               MemoryRecord(id="b", content=fact("alice", "job", "is a baker"),
                            scope="/ns/alice")]
    update = analyze_for_consolidation(fact("alice", "City", "lives in Rome"), records, llm)
    assert [(a.action, a.record_id) for a in update.actions] == [("delete", "a"),
                                                                 ("keep", "b")]
    assert update.insert_new is True
    same = analyze_for_consolidation(fact("alice", "city", "resides in Paris"), records, llm)
    assert [(a.action, a.record_id) for a in same.actions] == [("keep", "a"), ("keep", "b")]
    assert same.insert_new is False
    with pytest.raises(RuntimeError, match="consolidation prompt only"):
        llm.call("hello")


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["invariants.adapters.crewai:factory",
                                  "invariants.adapters.crewai:scoped_factory"])
def test_certify_leaves_a_complete_reproducible_report(spec: str, tmp_path: Path):
    saved = certify_briefly(spec, tmp_path / "out")
    assert_complete(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")


@pytest.mark.parametrize("script", sorted(p.name for p in REPRO.glob("crewai_*.py")))
def test_each_reproducer_still_shows_its_failure(script: str):
    page = (REPRO.parent / "crewai.md").read_text("utf-8")
    run = subprocess.run([sys.executable, str(REPRO / script)], capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stdout.strip() and run.stdout.strip() in page, run.stdout
