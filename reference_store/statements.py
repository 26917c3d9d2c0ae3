"""The write path's SQL, built once with bound parameters.

Building a Core statement with literal ``.values(...)`` on every call costs more than
SQLite takes to run it: SQLAlchemy has to construct and hash a new statement each time.
These constants compile once per dialect and then only take parameters. Parameter
names carry a ``p_`` prefix where SQLAlchemy forbids reusing a column's name.
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import Insert, bindparam, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from .schema import entities, memories, operations, tombstones

_ns = memories.c.namespace == bindparam("p_namespace")
_entity = memories.c.entity_id == bindparam("p_entity_id")
_active = memories.c.status == "active"

READ_ACTIVE = (
    select(memories.c.entity_id, memories.c.attribute, memories.c.value,
           memories.c.causal_seq, memories.c.version)
    .where(_ns, _entity, _active)
    .order_by(memories.c.causal_seq, memories.c.version)
)

CURRENT_RECORD = select(
    memories.c.id, memories.c.value, memories.c.value_key, memories.c.causal_seq,
    memories.c.version,
).where(_ns, _entity, memories.c.attr_key == bindparam("p_attr_key"), _active)

MERGE = update(memories).where(memories.c.id == bindparam("p_id")).values(
    causal_seq=bindparam("p_causal_seq"), updated_at=bindparam("p_now"))

SUPERSEDE = update(memories).where(memories.c.id == bindparam("p_id")).values(
    status="superseded", superseded_by=bindparam("p_version"), updated_at=bindparam("p_now"))

INSERT_MEMORY = insert(memories)
INSERT_OPERATION = insert(operations)
INSERT_TOMBSTONE = insert(tombstones)

DELETE_ACTIVE = update(memories).where(_ns, _entity, _active).values(
    status="deleted", superseded_by=bindparam("p_version"), updated_at=bindparam("p_now"))

_entity_row = (entities.c.namespace == bindparam("p_namespace"),
               entities.c.entity_id == bindparam("p_entity_id"))

MARK_DELETED = update(entities).where(*_entity_row).values(
    deleted=True, delete_seq=bindparam("p_delete_seq"))

MARK_RESTORED = update(entities).where(*_entity_row).values(
    deleted=False, restore_seq=bindparam("p_restore_seq"))

CLOSE_TOMBSTONES = update(tombstones).where(
    tombstones.c.namespace == bindparam("p_namespace"),
    tombstones.c.entity_id == bindparam("p_entity_id"),
    tombstones.c.restored_at.is_(None),
).values(restored_at=bindparam("p_now"), restore_seq=bindparam("p_restore_seq"),
         restore_op_id=bindparam("p_op_id"))

FIRST_OUTCOME = select(operations.c.applied, operations.c.version, operations.c.reason).where(
    operations.c.namespace == bindparam("p_namespace"),
    operations.c.op_id == bindparam("p_op_id"),
)


@cache
def lock_entity(dialect: str) -> Insert:
    """Upsert the entity row: it takes the row lock, and hands out the next version.

    Execute it with ``namespace`` and ``entity_id``; it returns the allocated version and
    the entity's tombstone state as seen under the lock.
    """
    dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return (
        dialect_insert(entities)
        .values(next_version=1, deleted=False)
        .on_conflict_do_update(
            index_elements=[entities.c.namespace, entities.c.entity_id],
            set_={"next_version": entities.c.next_version + 1},
        )
        .returning(entities.c.next_version, entities.c.deleted, entities.c.delete_seq,
                   entities.c.restore_seq)
    )
