"""The decision rules, called directly: every outcome and reason, and the changes each
one asks for, with no database."""

from __future__ import annotations

from typing import Any

from invariants.backend import Ack
from reference_store.rules import (
    AddTombstone,
    CloseTombstones,
    CurrentRecord,
    Decision,
    DeleteActive,
    InsertMemory,
    LockedEntity,
    MarkDeleted,
    MarkRestored,
    MergeInto,
    Supersede,
    decide_delete,
    decide_restore,
    decide_write,
)

NOW = 1000.0
LIVE = LockedEntity(version=5, deleted=False, delete_seq=None, restore_seq=None)
DELETED = LockedEntity(version=5, deleted=True, delete_seq=10, restore_seq=None)
RESTORED = LockedEntity(version=5, deleted=False, delete_seq=10, restore_seq=12)
CURRENT = CurrentRecord(id=7, value="lives in Paris", value_key="live in paris",
                        causal_seq=20, version=3)


def row(seq: int, value: str = "lives in Oslo", value_key: str = "live in oslo"
        ) -> dict[str, Any]:
    return {"namespace": "ns", "entity_id": "e", "attr_key": "city", "value": value,
            "value_key": value_key, "causal_seq": seq, "op_id": "w1"}


def inserted(seq: int, version: int = 5, **given: Any) -> InsertMemory:
    return InsertMemory({**row(seq, **given), "version": version, "created_at": NOW,
                         "updated_at": NOW, "last_accessed_at": None, "superseded_by": None})


def test_a_write_of_a_new_key_is_inserted_at_the_entity_version() -> None:
    assert decide_write(LIVE, None, row(1), NOW) == Decision(Ack(True, 5), (inserted(1),))


def test_a_write_of_a_deleted_entity_is_refused_as_tombstoned() -> None:
    assert decide_write(DELETED, None, row(30), NOW) == Decision(Ack(False, reason="tombstoned"))


def test_a_write_at_or_before_the_delete_of_a_restored_entity_predates_it() -> None:
    for seq in (9, 10):
        assert decide_write(RESTORED, None, row(seq), NOW) == Decision(
            Ack(False, reason="predates_delete"))
    assert decide_write(RESTORED, None, row(11), NOW).ack == Ack(True, 5)


def test_a_write_older_than_the_current_record_is_stale_at_its_version() -> None:
    assert decide_write(LIVE, CURRENT, row(19), NOW) == Decision(Ack(False, 3, "stale"))


def test_the_same_fact_merges_into_the_current_record() -> None:
    same = row(25, value="Lives in Paris.", value_key=CURRENT.value_key)
    assert decide_write(LIVE, CURRENT, same, NOW) == Decision(
        Ack(True, 3, "merged"), (MergeInto(7, 25, NOW),))


def test_an_equal_seq_with_the_same_fact_merges_and_with_another_supersedes() -> None:
    same = row(20, value="Lives in Paris.", value_key=CURRENT.value_key)
    assert decide_write(LIVE, CURRENT, same, NOW).ack == Ack(True, 3, "merged")
    assert decide_write(LIVE, CURRENT, row(20), NOW).ack == Ack(True, 5)


def test_another_fact_supersedes_the_current_record_then_is_inserted() -> None:
    assert decide_write(LIVE, CURRENT, row(21), NOW) == Decision(
        Ack(True, 5), (Supersede(7, 5, NOW), inserted(21)))


def test_same_fact_is_asked_only_when_the_keys_differ() -> None:
    asked: list[tuple[str, str]] = []

    def alike(a: str, b: str) -> bool:
        asked.append((a, b))
        return True

    assert decide_write(LIVE, CURRENT, row(21), NOW, alike) == Decision(
        Ack(True, 3, "merged"), (MergeInto(7, 21, NOW),))
    assert asked == [("lives in Paris", "lives in Oslo")]
    same = row(22, value="Lives in Paris.", value_key=CURRENT.value_key)
    decide_write(LIVE, CURRENT, same, NOW, alike)
    assert len(asked) == 1
    assert decide_write(LIVE, CURRENT, row(21), NOW, lambda a, b: False).ack == Ack(True, 5)


def test_a_delete_marks_the_entity_adds_a_tombstone_and_deletes_active_rows() -> None:
    assert decide_delete(LIVE, 8, "d1", "asked", NOW) == Decision(
        Ack(True, 5), (MarkDeleted(8), AddTombstone(5, 8, "d1", "asked", NOW),
                       DeleteActive(5, NOW)))


def test_a_delete_of_a_deleted_entity_is_applied_again_keeping_the_higher_horizon() -> None:
    older = decide_delete(DELETED, 4, "d2", None, NOW)
    assert older.ack == Ack(True, 5, "already_deleted")
    assert older.changes[0] == MarkDeleted(10)
    assert decide_delete(DELETED, 15, "d3", None, NOW).changes[0] == MarkDeleted(15)


def test_a_delete_older_than_the_restore_is_stale() -> None:
    assert decide_delete(RESTORED, 11, "d2", None, NOW) == Decision(Ack(False, reason="stale"))
    assert decide_delete(RESTORED, 12, "d2", None, NOW).ack == Ack(True, 5)


def test_a_restore_of_a_live_entity_is_refused_as_not_deleted() -> None:
    assert decide_restore(LIVE, 3, "r1", NOW) == Decision(Ack(False, reason="not_deleted"))


def test_a_restore_older_than_the_delete_is_stale() -> None:
    assert decide_restore(DELETED, 9, "r1", NOW) == Decision(Ack(False, reason="stale"))


def test_a_restore_marks_the_entity_live_and_closes_its_tombstones() -> None:
    for seq in (10, 11):
        assert decide_restore(DELETED, seq, "r1", NOW) == Decision(
            Ack(True, 5), (MarkRestored(seq), CloseTombstones(seq, "r1", NOW)))
