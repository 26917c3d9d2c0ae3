"""Tables of the reference store, with the conditions and column encodings its modules share.

Rows are never overwritten to change what a memory says: a new version is inserted and
the old row is marked ``superseded``, so the audit trail of every fact survives. The
``entities`` row is the per-entity lock and clock: every write, delete and restore of an
entity first upserts it, which serializes them on PostgreSQL and hands out versions.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ColumnElement,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    literal_column,
    text,
)

__all__ = [
    "ACTIVE",
    "AT_KEY",
    "MEMORY_STATUSES",
    "MEMORY_TYPES",
    "by_code_point",
    "entities",
    "memories",
    "metadata",
    "of_entity",
    "operations",
    "tags_text",
    "tombstones",
]

MEMORY_TYPES = ("episodic", "semantic", "procedural")
MEMORY_STATUSES = ("active", "superseded", "deleted", "archived")

metadata = MetaData()

memories = Table(
    "memories",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(128), nullable=False),
    Column("entity_id", Text, nullable=False),
    Column("attribute", Text, nullable=False),
    Column("attr_key", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("value_key", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("causal_seq", BigInteger, nullable=False),
    Column("op_id", Text, nullable=False),
    Column("source", Text, nullable=True),
    Column("trust", String(16), nullable=False),
    Column("memory_type", String(16), nullable=False),
    Column("instruction_like", Boolean, nullable=False, default=False),
    Column("tags", Text, nullable=False, default="[]"),
    Column("score", Float, nullable=False),
    Column("half_life_seconds", Float, nullable=False),
    Column("access_count", BigInteger, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("last_accessed_at", Float, nullable=True),
    Column("status", String(16), nullable=False),
    Column("superseded_by", BigInteger, nullable=True),
    Index(
        "memories_one_active",
        "namespace",
        "entity_id",
        "attr_key",
        unique=True,
        sqlite_where=text("status = 'active'"),
        postgresql_where=text("status = 'active'"),
    ),
    Index("memories_by_entity", "namespace", "entity_id", "status", "causal_seq"),
)

entities = Table(
    "entities",
    metadata,
    Column("namespace", String(128), primary_key=True),
    Column("entity_id", Text, primary_key=True),
    Column("next_version", BigInteger, nullable=False),
    Column("deleted", Boolean, nullable=False),
    Column("delete_seq", BigInteger, nullable=True),
    Column("restore_seq", BigInteger, nullable=True),
)

tombstones = Table(
    "tombstones",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("namespace", String(128), nullable=False),
    Column("entity_id", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("causal_seq", BigInteger, nullable=False),
    Column("op_id", Text, nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("restored_at", Float, nullable=True),
    Column("restore_seq", BigInteger, nullable=True),
    Column("restore_op_id", Text, nullable=True),
    Index("tombstones_by_entity", "namespace", "entity_id"),
)

operations = Table(
    "operations",
    metadata,
    Column("namespace", String(128), primary_key=True),
    Column("op_id", Text, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("entity_id", Text, nullable=False),
    Column("applied", Boolean, nullable=False),
    Column("version", BigInteger, nullable=True),
    Column("reason", Text, nullable=True),
    Column("created_at", Float, nullable=False),
)


def tags_text(tags: Collection[str]) -> str:
    """The ``tags`` column's text for a set of tags: a JSON array, sorted, so that one
    set is always stored, exported and matched as the same text."""
    return json.dumps(sorted(set(tags)), ensure_ascii=False) if tags else "[]"


def by_code_point(column: ColumnElement[Any], dialect: str) -> ColumnElement[Any]:
    """``column`` as it sorts by code point, the same on both databases: text sorts so on
    SQLite, and on PostgreSQL in the "C" collation."""
    if dialect == "postgresql" and isinstance(column.type, String):
        return column.collate("C")
    return column


ACTIVE = memories.c.status == literal_column("'active'")
"""The condition of an active row, as a literal rather than a bound parameter: the
partial index ``memories_one_active`` only applies when the planner can see the value."""


def of_entity(table: Table) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The condition on ``table``'s rows of the entity that the parameters ``b_namespace``
    and ``b_entity_id`` name, for the statements every operation builds once. The
    parameters are named ``b_*`` because SQLAlchemy reserves a column's own name for the
    values of an INSERT or UPDATE."""
    return (table.c.namespace == bindparam("b_namespace"),
            table.c.entity_id == bindparam("b_entity_id"))


AT_KEY = memories.c.attr_key == bindparam("b_attr_key")
"""The condition on memories of the key that the parameter ``b_attr_key`` names."""
