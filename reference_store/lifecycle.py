"""Use and retirement of memories: ``touch`` when an agent used one, ``forget`` to retire it.

Neither changes what a memory says, so neither allocates a version or enters the
operation log. ``touch`` is one ``UPDATE ... SET access_count = access_count + 1``:
the database does the arithmetic under the row lock, so concurrent touches never read
the same count and lose an increment. ``forget`` archives rows and never deletes them;
unlike ``delete`` it leaves no tombstone, so the entity can be written again at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select, update

from .schema import entities, memories
from .validation import check_namespace, check_text

if TYPE_CHECKING:
    from .store import ReferenceStore

__all__ = ["forget", "touch"]


def touch(store: ReferenceStore, namespace: str, entity_id: str, attribute: str) -> int:
    """Count one use of the active memory under ``attribute`` (any variant of its name).

    Returns the new access count, or 0 when there is no active memory to touch (never
    written, deleted, forgotten). 0 rather than an error because an agent touches what
    it just read, and a delete racing in between is normal, not a mistake.
    """
    check_namespace(namespace)
    check_text("entity_id", entity_id)
    check_text("attribute", attribute)
    attr_key = store.normalizer.attribute_key(attribute)
    statement = (
        update(memories)
        .where(memories.c.namespace == namespace, memories.c.entity_id == entity_id,
               memories.c.attr_key == attr_key, memories.c.status == "active")
        .values(access_count=memories.c.access_count + 1, last_accessed_at=store._clock())
        .returning(memories.c.access_count)
    )

    def attempt() -> int:
        with store._transaction() as conn:
            count = conn.execute(statement).scalar_one_or_none()
        return 0 if count is None else int(count)

    return store._retrying(attempt)


def forget(store: ReferenceStore, namespace: str, entity_id: str,
           attribute: str | None = None) -> int:
    """Archive the active memories of an entity, or only the one under ``attribute``.

    Returns how many rows were archived (0 if none were active). The entity's row is
    locked first, as every write does, so a forget and a write of the same key are
    ordered: the write either supersedes the row before it is archived, or finds no
    active row afterwards and inserts a fresh one.
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
    lock = select(entities.c.next_version).where(
        entities.c.namespace == namespace, entities.c.entity_id == entity_id,
    ).with_for_update()

    def attempt() -> int:
        with store._transaction() as conn:
            conn.execute(lock)
            result = conn.execute(statement.values(status="archived", updated_at=store._clock()))
        return int(result.rowcount)

    return store._retrying(attempt)
