"""The in-memory backend makes the reference store's decisions; each known-bad one shows
its bug in a small direct scenario."""

from __future__ import annotations

import threading

import pytest

import chaos.examples as examples
from chaos.examples import KNOWN_BAD, InMemoryBackend, MemoryStore, SharedFactory
from chaos.examples.known_bad import (
    DropsWrites,
    ExpiringTombstone,
    FoldsNegation,
    LastArrivalWins,
    LeakyNamespaces,
    NoRestore,
    PhantomRecords,
    RacyUpsert,
    RawAttributeKeys,
    RestoreAcceptsLateWrites,
    RestoreRevives,
    SurfaceOnly,
    UnsortedReads,
)
from invariants.backend import Ack, MemoryBackend, Record
from invariants.causes import CAUSES
from invariants.errors import InvalidArgument
from tests.contract_cases import ContractCases, d, r, values, w


@pytest.fixture
def store() -> InMemoryBackend:
    return InMemoryBackend()


# -- the correct backend: the reference store's cases -----------------------------------


class TestInMemoryBackend(ContractCases):
    pass


def test_the_surface_level_does_not_fold_lexical_paraphrases():
    store = InMemoryBackend("surface")
    store.write(w("ned", "drink", "喜欢美式", 1))
    assert store.write(w("ned", "drink", "偏好美式咖啡", 2)) == Ack(True, 2)
    assert values(store, "ned") == ["偏好美式咖啡"]


def test_concurrent_writers_to_one_slot_leave_one_record():
    factory = SharedFactory()
    handles = [factory() for _ in range(8)]
    barrier = threading.Barrier(len(handles))

    def work(k: int) -> None:
        barrier.wait()
        for i in range(50):
            handles[k].write(w("sam", "city", f"city {k}-{i}", i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(handles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = handles[0].read("t", "sam")
    assert len(records) == 1 and records[0].causal_seq == 49


# -- factories ------------------------------------------------------------------------


def test_a_factory_hands_out_handles_onto_one_store():
    factory = SharedFactory(level="surface")
    first, second = factory(), factory()
    assert first is not second and first.store is second.store
    assert first.normalizer.level == "surface"
    first.write(w("tom", "city", "lives in Oslo", 1))
    assert values(second, "tom") == ["lives in Oslo"]
    second.close()
    second.reset()
    assert first.read("t", "tom") == []


def test_separate_factories_have_separate_stores():
    one, other = SharedFactory(), SharedFactory()
    one().write(w("uma", "city", "lives in Oslo", 1))
    assert other().read("t", "uma") == []


def test_a_handle_refuses_a_store_of_another_level():
    with pytest.raises(InvalidArgument) as caught:
        InMemoryBackend("lexical", store=MemoryStore("surface"))
    assert str(caught.value) == (
        "level='lexical' does not match the store's level 'surface'. Pass level='surface', "
        "or a store built with MemoryStore('lexical')."
    )


def test_every_known_bad_name_is_a_factory_of_this_module():
    checkers = {"uniqueness", "causal_monotonicity", "deletion_monotonicity",
                "semantic_normalization", "durability", "isolation", "phantom"}
    for spec, broken in KNOWN_BAD.items():
        module, name = spec.split(":")
        assert module == "chaos.examples"
        factory = getattr(examples, name)
        assert isinstance(factory, SharedFactory)
        assert isinstance(factory(), MemoryBackend)
        assert broken and set(broken) <= checkers
    assert covered(KNOWN_BAD) == checkers
    assert isinstance(examples.in_memory, SharedFactory)
    assert "chaos.examples:in_memory" not in KNOWN_BAD
    assert "chaos.examples:no_restore" not in KNOWN_BAD


def test_every_known_bad_backend_names_a_cause_of_each_checker_it_breaks():
    assert set(examples.KNOWN_BAD_CAUSES) == set(KNOWN_BAD)
    for spec, causes in examples.KNOWN_BAD_CAUSES.items():
        assert set(causes) == set(KNOWN_BAD[spec]), spec
        for checker, cause in causes.items():
            assert cause in CAUSES[checker], (spec, checker, cause)


def covered(known_bad) -> set[str]:
    return {name for broken in known_bad.values() for name in broken}


# -- known-bad backends, each showing its bug -------------------------------------------


def test_racy_upsert_serves_two_facts_for_one_slot_only_under_concurrency():
    sequential = RacyUpsert()
    sequential.write(w("vic", "city", "lives in Oslo", 1))
    sequential.write(w("vic", "city", "lives in Rome", 2))
    assert values(sequential, "vic") == ["lives in Rome"]

    def collide(factory: SharedFactory, entity: str) -> int:
        first, second = factory(), factory()
        barrier = threading.Barrier(2)

        def put(handle: InMemoryBackend, city: str, seq: int) -> None:
            barrier.wait()
            handle.write(w(entity, "city", f"lives in {city}", seq))

        threads = [threading.Thread(target=put, args=(first, "Oslo", 1)),
                   threading.Thread(target=put, args=(second, "Rome", 2))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return len(first.read("t", entity))

    racy, correct = SharedFactory(RacyUpsert), SharedFactory()
    assert any(collide(racy, f"e{i}") == 2 for i in range(20))
    assert all(collide(correct, f"e{i}") == 1 for i in range(20))


def test_last_arrival_wins_lets_an_older_write_replace_a_newer_one():
    bad = LastArrivalWins()
    bad.write(w("wes", "city", "lives in Paris", 10))
    assert bad.write(w("wes", "city", "lives in Rome", 9)) == Ack(True, 2)
    assert bad.read("t", "wes") == [Record("wes", "city", "lives in Rome", 9, 2)]


def test_unsorted_reads_list_records_in_insertion_order():
    bad = UnsortedReads()
    bad.write(w("xia", "city", "lives in Oslo", 30))
    bad.write(w("xia", "job", "pilot", 10))
    assert [x.causal_seq for x in bad.read("t", "xia")] == [30, 10]


def test_expiring_tombstone_resurrects_only_some_operations_after_the_delete():
    bad = ExpiringTombstone()
    bad.write(w("yan", "city", "lives in Oslo", 1))
    bad.delete(d("yan", 2))
    assert bad.read("t", "yan") == []
    assert bad.write(w("yan", "city", "lives in Rome", 3)).reason == "tombstoned"
    for _ in range(ExpiringTombstone.after_ops):
        bad.read("t", "someone else")
    assert values(bad, "yan") == ["lives in Oslo"]
    assert bad.write(w("yan", "job", "pilot", 4)).applied
    assert values(bad, "yan") == ["lives in Oslo", "pilot"]


def test_restore_revives_brings_back_records_from_before_the_delete():
    bad = RestoreRevives()
    bad.write(w("zed", "city", "lives in Oslo", 1))
    bad.delete(d("zed", 2))
    assert bad.read("t", "zed") == []
    assert bad.restore(r("zed", 3)) == Ack(True, 3)
    assert values(bad, "zed") == ["lives in Oslo"]


def test_restore_accepts_late_writes_serves_a_write_from_before_the_delete():
    bad = RestoreAcceptsLateWrites()
    bad.delete(d("abe", 5))
    assert bad.write(w("abe", "city", "lives in Oslo", 4)).reason == "tombstoned"
    bad.restore(r("abe", 6))
    assert bad.write(w("abe", "city", "lives in Rome", 4)) == Ack(True, 4)
    assert values(bad, "abe") == ["lives in Rome"]


def test_surface_only_keeps_lexical_paraphrases_and_different_facts_side_by_side():
    bad = SurfaceOnly()
    bad.write(w("bea", "coffee", "喜欢美式", 1))
    assert bad.write(w("bea", "coffee", "Likes Americano.", 2)).applied
    assert bad.write(w("bea", "coffee", "likes americano", 3)) == Ack(True, 2, "merged")
    bad.write(w("bea", "coffee", "likes latte", 4))
    assert values(bad, "bea") == ["喜欢美式", "Likes Americano.", "likes latte"]


def test_raw_attribute_keys_file_spellings_of_one_attribute_apart():
    bad = RawAttributeKeys()
    bad.write(w("cal", "coffee_preference", "americano", 1))
    bad.write(w("cal", "Coffee Preference", "latte", 2))
    bad.write(w("cal", "Coffee Preference", "Latte", 3))
    assert values(bad, "cal") == ["americano", "latte"]


def test_drops_writes_acknowledges_a_write_it_never_stores():
    bad = DropsWrites()
    acks = [bad.write(w("dee", f"slot {i}", f"value {i}", i)) for i in range(1, 8)]
    assert acks[-1] == Ack(True, 7)
    assert len(bad.read("t", "dee")) == 6
    assert "value 7" not in values(bad, "dee")


def test_drops_writes_empties_the_slot_it_was_meant_to_update():
    bad = DropsWrites()
    for i in range(1, 7):
        bad.write(w("dee", "city", f"city {i}", i))
    assert bad.write(w("dee", "city", "city 7", 7)).applied
    assert bad.read("t", "dee") == []


def test_leaky_namespaces_serve_another_tenants_records():
    bad = LeakyNamespaces()
    bad.write(w("eve", "city", "lives in Oslo", 1, ns="tenant-a"))
    assert values(bad, "eve", ns="tenant-b") == ["lives in Oslo"]
    bad.delete(d("eve", 2, ns="tenant-b"))
    assert values(bad, "eve", ns="tenant-b") == ["lives in Oslo"]


def test_phantom_records_now_and_then_serve_a_value_nobody_wrote():
    bad = PhantomRecords()
    bad.write(w("fox", "city", "lives in Oslo", 1))
    reads = [values(bad, "fox") for _ in range(PhantomRecords.every - 1)]
    assert reads[:-1] == [["lives in Oslo"]] * (PhantomRecords.every - 2)
    assert reads[-1] == ["lives in Oslo", "lives in Oslo\ufffd"]


def test_folds_negation_merges_the_opposite_fact_into_the_old_one():
    bad = FoldsNegation()
    bad.write(w("gil", "drink", "likes americano", 1))
    assert bad.write(w("gil", "drink", "does not like americano", 2)) == Ack(True, 1, "merged")
    assert bad.write(w("gil", "drink", "不喜欢美式", 3)) == Ack(True, 1, "merged")
    assert bad.read("t", "gil") == [Record("gil", "drink", "likes americano", 3, 1)]


def test_no_restore_lacks_the_capability_and_is_otherwise_correct():
    backend = NoRestore()
    backend.write(w("hu", "city", "lives in Oslo", 1))
    backend.delete(d("hu", 2))
    with pytest.raises(NotImplementedError, match=r"^NoRestore does not support restore$"):
        backend.restore(r("hu", 3))
    assert backend.read("t", "hu") == []
    assert backend.write(w("hu", "city", "lives in Rome", 4)).reason == "tombstoned"
