"""Retirement of memories: ``forget`` archives what an agent no longer wants recalled.

It does not change what a memory says, so it allocates no version and does not enter
the operation log. It archives rows and never deletes them; unlike ``delete`` it leaves
no tombstone, so the entity can be written again at once. (``touch``, which counts a
use, is one statement and lives with the reads in :mod:`reference_store.retrieval`.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection, bindparam, update

from .schema import ACTIVE, AT_KEY, entities, memories, of_entity
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
    params = {"b_namespace": namespace, "b_entity_id": entity_id}
    if attribute is not None:
        check_text("attribute", attribute)
        params["b_attr_key"] = store.normalizer.attribute_key(attribute)
    archive = _ARCHIVE if attribute is None else _ARCHIVE.where(AT_KEY)

    def run(conn: Connection) -> int:
        conn.execute(_LOCK, params)
        return int(conn.execute(archive, {**params, "b_now": store.database.clock()}).rowcount)

    return store.database.transaction(run)


_LOCK = update(entities).where(*of_entity(entities)).values(
    next_version=entities.c.next_version + 1)
_ARCHIVE = update(memories).where(*of_entity(memories), ACTIVE).values(
    status="archived", updated_at=bindparam("b_now"))
