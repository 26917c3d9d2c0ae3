"""The decision rules of write, delete and restore, as pure functions of plain data.

The store calls them under the entity's lock, with the entity row as the lock returned
it (its ``next_version`` already bumped: every decided operation takes that version,
applied or refused), the key's current record, and the clock read once. They return the
outcome and the changes that make it so, in the order they must be applied. Keeping
them free of I/O is what lets every rule be tested by calling it, and read in one page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from invariants.backend import Ack

__all__ = [
    "AddTombstone",
    "Change",
    "CloseTombstones",
    "CurrentRecord",
    "Decision",
    "DeleteActive",
    "InsertMemory",
    "LockedEntity",
    "MarkDeleted",
    "MarkRestored",
    "MergeInto",
    "Supersede",
    "decide_delete",
    "decide_restore",
    "decide_write",
]


@dataclass(frozen=True, slots=True)
class LockedEntity:
    """An entity's row as its lock returned it; ``version`` is the one this operation takes."""

    version: int
    deleted: bool
    delete_seq: int | None
    restore_seq: int | None


@dataclass(frozen=True, slots=True)
class CurrentRecord:
    """The active record of the key a write names."""

    id: int
    value: str
    value_key: str
    causal_seq: int
    version: int


@dataclass(frozen=True, slots=True)
class MergeInto:
    """Advance a record's causal seq: the same fact was written again."""

    record_id: int
    causal_seq: int
    now: float


@dataclass(frozen=True, slots=True)
class Supersede:
    """Retire a record in favour of ``version``, inserted next."""

    record_id: int
    version: int
    now: float


@dataclass(frozen=True, slots=True)
class InsertMemory:
    """Insert a memory row, every column but ``id``."""

    row: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class MarkDeleted:
    """Mark the entity deleted, up to ``delete_seq``."""

    delete_seq: int


@dataclass(frozen=True, slots=True)
class AddTombstone:
    """Record one delete in the tombstone table."""

    version: int
    causal_seq: int
    op_id: str
    reason: str | None
    now: float


@dataclass(frozen=True, slots=True)
class DeleteActive:
    """Mark every active record of the entity deleted by ``version``."""

    version: int
    now: float


@dataclass(frozen=True, slots=True)
class MarkRestored:
    """Mark the entity live again, restored at ``restore_seq``."""

    restore_seq: int


@dataclass(frozen=True, slots=True)
class CloseTombstones:
    """Stamp the entity's open tombstones with the restore that closed them."""

    restore_seq: int
    op_id: str
    now: float


Change = (MergeInto | Supersede | InsertMemory | MarkDeleted | AddTombstone | DeleteActive
          | MarkRestored | CloseTombstones)


@dataclass(frozen=True, slots=True)
class Decision:
    """An operation's outcome and the changes that make it so, in order."""

    ack: Ack
    changes: tuple[Change, ...] = ()


SameFact = Callable[[str, str], bool]
"""Whether two values state the same fact (the semantic level's judgement)."""


def decide_write(entity: LockedEntity, current: CurrentRecord | None,
                 row: Mapping[str, Any], now: float,
                 same_fact: SameFact | None = None) -> Decision:
    """A write of ``row`` (a memory row without version and times).

    A tombstone refuses it; so does a delete at or after its causal seq. A write older
    than the key's current record is stale. The same fact (equal value keys, or
    ``same_fact`` at the semantic level) merges into the record; anything else
    supersedes it, or is inserted where the key has none.
    """
    seq = row["causal_seq"]
    if entity.deleted:
        return Decision(Ack(False, reason="tombstoned"))
    if entity.delete_seq is not None and seq <= entity.delete_seq:
        return Decision(Ack(False, reason="predates_delete"))
    version = entity.version
    inserted = InsertMemory({**row, "version": version, "created_at": now, "updated_at": now,
                             "last_accessed_at": None, "superseded_by": None})
    if current is None:
        return Decision(Ack(True, version=version), (inserted,))
    if seq < current.causal_seq:
        return Decision(Ack(False, version=current.version, reason="stale"))
    if current.value_key == row["value_key"] or (
            same_fact is not None and same_fact(current.value, row["value"])):
        return Decision(Ack(True, version=current.version, reason="merged"),
                        (MergeInto(current.id, seq, now),))
    return Decision(Ack(True, version=version),
                    (Supersede(current.id, version, now), inserted))


def decide_delete(entity: LockedEntity, causal_seq: int, op_id: str, reason: str | None,
                  now: float) -> Decision:
    """A delete of the entity: refused as stale only by a later restore.

    Deleting a deleted entity is applied again (``already_deleted``), keeping the
    highest delete seq, so a late duplicate never lowers the horizon.
    """
    if entity.restore_seq is not None and causal_seq < entity.restore_seq:
        return Decision(Ack(False, reason="stale"))
    version = entity.version
    horizon = causal_seq if entity.delete_seq is None else max(entity.delete_seq, causal_seq)
    return Decision(
        Ack(True, version=version, reason="already_deleted" if entity.deleted else None),
        (MarkDeleted(horizon), AddTombstone(version, causal_seq, op_id, reason, now),
         DeleteActive(version, now)))


def decide_restore(entity: LockedEntity, causal_seq: int, op_id: str, now: float) -> Decision:
    """A restore: only of a deleted entity, and not from before its delete."""
    if not entity.deleted:
        return Decision(Ack(False, reason="not_deleted"))
    if entity.delete_seq is not None and causal_seq < entity.delete_seq:
        return Decision(Ack(False, reason="stale"))
    return Decision(Ack(True, version=entity.version),
                    (MarkRestored(causal_seq), CloseTombstones(causal_seq, op_id, now)))
