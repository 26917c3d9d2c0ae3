"""Retirement of memories: ``forget`` archives what an agent no longer wants recalled.

It does not change what a memory says, so it allocates no version and does not enter
the operation log. It archives rows and never deletes them; unlike ``delete`` it leaves
no tombstone, so the entity can be written again at once. (``touch``, which counts a
use, is one statement and lives with the reads in :mod:`reference_store.retrieval`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, update

from .schema import entities, memories
from .validation import check_namespace, check_text

if TYPE_CHECKING:
    from .store import ReferenceStore

__all__ = ["forget"]


def forget(store: ReferenceStore, namespace: str, entity_id: str,
           attribute: str | None = None) -> int:
    """Archive the active memories of an entity, or only the one under ``attribute``.

    Returns how many rows were archived (0 if none were active). The entity's row is
    locked first, as every write does, so a forget and a write of the same key are
    ordered: the write either supersedes the row before it is archived, or finds no
    active row afterwards and inserts a fresh one. Taking the lock bumps the entity's
    ``next_version``, as every decided operation does, so the versions an entity hands
    out keep counting every change made under its lock.
    """
    check_namespace(namespace)
    check_text("entity_id", entity_id)
    if attribute is not None:
        check_text("attribute", attribute)
    statement = update(memories).where(
        memories.c.namespace == namespace, memories.c.entity_id == entity_id,
        memories.c.status == "active")
    if attribute is not None:
        statement = statement.where(
            memories.c.attr_key == store.normalizer.attribute_key(attribute))
    lock = update(entities).where(
        entities.c.namespace == namespace, entities.c.entity_id == entity_id,
    ).values(next_version=entities.c.next_version + 1)

    def archive(conn: Connection) -> int:
        conn.execute(lock)
        archived = statement.values(status="archived", updated_at=store.database.clock())
        return int(conn.execute(archived).rowcount)

    return store.database.transaction(archive)
