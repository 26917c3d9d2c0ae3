"""The contract's decisions, case by case, for any backend that claims to keep it.

A test module subclasses :class:`ContractCases` and gives a ``store`` fixture; the
reference store (SQLite, PostgreSQL), the in-memory example backend and the HTTP
service all answer the same cases, so they cannot drift apart. Versions are compared
exactly: the contract numbers each entity's decided operations from 1.
"""

from __future__ import annotations

import itertools

import pytest

from invariants.backend import Ack, Delete, MemoryBackend, Record, Restore, Write
from invariants.errors import InvalidInput

_ids = itertools.count()


def w(entity: str, attribute: str, value: str, seq: int, ns: str = "t",
      op_id: str | None = None, source: str | None = None) -> Write:
    return Write(ns, entity, attribute, value, seq, op_id or f"w{next(_ids)}", source)


def d(entity: str, seq: int, ns: str = "t", op_id: str | None = None) -> Delete:
    return Delete(ns, entity, seq, op_id or f"d{next(_ids)}", reason="user asked")


def r(entity: str, seq: int, ns: str = "t", op_id: str | None = None) -> Restore:
    return Restore(ns, entity, seq, op_id or f"r{next(_ids)}")


def values(backend: MemoryBackend, entity: str, ns: str = "t") -> list[str]:
    return [record.value for record in backend.read(ns, entity)]


class ContractCases:
    """Every case of docs/reference-store.md's decision table, and the edges around it."""

    def test_write_then_read_returns_the_record(self, store):
        assert store.write(w("alice", "city", "lives in Hangzhou", 1)) == Ack(True, 1)
        assert store.read("t", "alice") == [Record("alice", "city", "lives in Hangzhou", 1, 1)]

    def test_uniqueness_a_new_fact_supersedes_the_old_one(self, store):
        store.write(w("alice", "city", "lives in Hangzhou", 1))
        store.write(w("alice", "city", "lives in Nanjing", 2))
        assert values(store, "alice") == ["lives in Nanjing"]

    def test_uniqueness_folds_attribute_name_variants(self, store):
        store.write(w("bob", "coffee_preference", "americano", 1))
        store.write(w("bob", "Coffee Preference", "latte", 2))
        store.write(w("bob", "coffee-preference", "flat white", 3))
        assert [(x.attribute, x.value) for x in store.read("t", "bob")] == [
            ("coffee-preference", "flat white")
        ]

    def test_causal_a_stale_write_never_replaces_a_newer_one(self, store):
        store.write(w("carol", "city", "lives in Paris", 10))
        assert store.write(w("carol", "city", "lives in Rome", 9)) == Ack(False, 1, "stale")
        assert values(store, "carol") == ["lives in Paris"]

    def test_causal_seq_crossing_digit_boundaries_compares_as_numbers(self, store):
        store.write(w("carol", "city", "lives in Paris", 100))
        assert store.write(w("carol", "city", "lives in Rome", 99)).reason == "stale"
        store.write(w("carol", "job", "engineer", 9))
        store.write(w("carol", "job", "manager", 10))
        assert values(store, "carol") == ["manager", "lives in Paris"]

    def test_read_lists_records_in_ascending_causal_seq(self, store):
        store.write(w("dan", "city", "lives in Oslo", 30))
        store.write(w("dan", "job", "pilot", 10))
        store.write(w("dan", "language", "speaks Norwegian", 20))
        assert [x.causal_seq for x in store.read("t", "dan")] == [10, 20, 30]

    def test_deletion_hides_everything_and_refuses_writes(self, store):
        store.write(w("erin", "city", "lives in Lima", 1))
        store.write(w("erin", "job", "chef", 2))
        assert store.delete(d("erin", 3)) == Ack(True, 3)
        assert store.read("t", "erin") == []
        assert store.write(w("erin", "city", "lives in Cusco", 50)) == Ack(
            False, None, "tombstoned")
        assert store.read("t", "erin") == []

    def test_versions_grow_with_every_decided_operation_of_the_entity(self, store):
        versions = [store.write(w("erin", f"a{i}", f"value {i}", i)).version for i in (1, 2, 3)]
        assert store.write(w("erin", "a1", "older", 0)) == Ack(False, 1, "stale")
        assert versions == [1, 2, 3]
        assert store.delete(d("erin", 5)) == Ack(True, 5)

    def test_restore_revives_nothing_and_refuses_writes_from_before_the_delete(self, store):
        store.write(w("fay", "city", "lives in Kyiv", 1))
        store.delete(d("fay", 5))
        assert store.restore(r("fay", 6)).applied
        assert store.read("t", "fay") == []
        assert store.write(w("fay", "city", "lives in Lviv", 4)) == Ack(
            False, None, "predates_delete")
        assert store.write(w("fay", "city", "lives in Lviv", 5)).reason == "predates_delete"
        assert store.write(w("fay", "city", "lives in Odesa", 7)).applied
        assert values(store, "fay") == ["lives in Odesa"]

    def test_restore_of_a_live_entity_is_refused(self, store):
        store.write(w("gus", "city", "lives in Cork", 1))
        assert store.restore(r("gus", 2)) == Ack(False, None, "not_deleted")
        assert store.restore(r("never-written", 2)) == Ack(False, None, "not_deleted")

    def test_a_restore_older_than_the_delete_is_refused(self, store):
        store.delete(d("gus", 10))
        assert store.restore(r("gus", 9)) == Ack(False, None, "stale")
        assert store.write(w("gus", "city", "lives in Cork", 11)).reason == "tombstoned"

    def test_a_delete_older_than_the_restore_is_refused(self, store):
        store.delete(d("hal", 10))
        store.restore(r("hal", 12))
        store.write(w("hal", "city", "lives in Bonn", 13))
        assert store.delete(d("hal", 11)) == Ack(False, None, "stale")
        assert values(store, "hal") == ["lives in Bonn"]

    def test_a_second_delete_keeps_the_entity_deleted(self, store):
        store.delete(d("ivy", 3))
        assert store.delete(d("ivy", 4)) == Ack(True, 2, "already_deleted")
        store.restore(r("ivy", 5))
        assert store.write(w("ivy", "city", "lives in Riga", 4)).reason == "predates_delete"

    def test_a_retry_with_the_same_op_id_returns_the_first_outcome(self, store):
        first = store.write(w("jo", "city", "lives in Turin", 5, op_id="op-1"))
        store.write(w("jo", "city", "lives in Milan", 6))
        assert store.write(w("jo", "city", "lives in Turin", 5, op_id="op-1")) == first
        assert values(store, "jo") == ["lives in Milan"]

    def test_a_retried_delete_after_a_restore_does_not_delete_again(self, store):
        first = store.delete(d("kim", 5, op_id="del-1"))
        store.restore(r("kim", 6))
        store.write(w("kim", "city", "lives in Seoul", 7))
        assert store.delete(d("kim", 5, op_id="del-1")) == first
        assert values(store, "kim") == ["lives in Seoul"]

    def test_a_rejected_op_replays_as_rejected(self, store):
        store.delete(d("lee", 5))
        first = store.write(w("lee", "city", "lives in Busan", 6, op_id="late"))
        store.restore(r("lee", 7))
        assert store.write(w("lee", "city", "lives in Busan", 6, op_id="late")) == first
        assert store.read("t", "lee") == []

    def test_op_ids_are_scoped_to_their_namespace(self, store):
        store.write(w("mia", "city", "lives in Quito", 1, ns="a", op_id="same"))
        assert store.write(w("mia", "city", "lives in Lima", 1, ns="b", op_id="same")).applied
        assert values(store, "mia", ns="b") == ["lives in Lima"]

    def test_a_paraphrase_of_the_current_fact_merges_into_it(self, store):
        store.write(w("ned", "drink", "Likes Americano.", 1))
        assert store.write(w("ned", "drink", "likes americano", 3)) == Ack(True, 1, "merged")
        assert store.write(w("ned", "drink", "喜欢美式", 4)) == Ack(True, 1, "merged")
        assert store.read("t", "ned") == [Record("ned", "drink", "Likes Americano.", 4, 1)]

    def test_a_negation_is_a_new_fact_not_a_paraphrase(self, store):
        store.write(w("ned", "drink", "likes americano", 1))
        assert store.write(w("ned", "drink", "does not like americano", 2)) == Ack(True, 2)
        assert values(store, "ned") == ["does not like americano"]

    def test_namespaces_are_isolated(self, store):
        store.write(w("oli", "city", "lives in Bern", 1, ns="tenant-a"))
        assert store.read("tenant-b", "oli") == []
        store.delete(d("oli", 2, ns="tenant-b"))
        assert values(store, "oli", ns="tenant-a") == ["lives in Bern"]

    def test_reset_empties_every_namespace_and_forgets_op_ids(self, store):
        store.write(w("pam", "city", "lives in Oslo", 1, ns="a", op_id="x"))
        store.delete(d("pam", 2, ns="b"))
        store.reset()
        assert store.read("a", "pam") == []
        assert store.write(w("pam", "city", "lives in Oslo", 1, ns="b")).applied
        assert store.write(w("pam", "city", "lives in Rome", 2, ns="a", op_id="x")) == Ack(
            True, 1)

    @pytest.mark.parametrize("payload", [
        "'; DROP TABLE memories; --",
        "Robert'); DELETE FROM entities WHERE ('1'='1",
        "%_\\ ' \" ` $1 ?",
    ])
    def test_metacharacters_are_stored_verbatim(self, store, payload):
        store.write(w(payload, payload, payload, 1))
        assert store.read("t", payload) == [Record(payload, payload, payload, 1, 1)]

    def test_bad_input_is_refused_before_anything_is_written(self, store):
        with pytest.raises(InvalidInput,
                           match=r"^namespace='a b' \(type str\) contains a forbidden"):
            store.write(w("quinn", "city", "lives in Oslo", 1, ns="a b"))
        with pytest.raises(InvalidInput, match=r"^causal_seq=-1 \(type int\) is outside"):
            store.write(w("quinn", "city", "lives in Oslo", -1))
        with pytest.raises(InvalidInput, match=r"^causal_seq=-1 \(type int\) is outside"):
            store.delete(d("quinn", -1))
        assert store.read("t", "quinn") == []
        assert store.write(w("quinn", "city", "lives in Oslo", 1)) == Ack(True, 1)
