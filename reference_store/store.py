"""The reference store: a memory backend that keeps every invariant memcert checks.

Each write, delete and restore is one transaction, the same on SQLite and PostgreSQL:

1. take the entity's lock: an upsert of its ``entities`` row that bumps
   ``next_version`` (the version this operation takes). On PostgreSQL that takes the
   row lock; on SQLite the transaction already holds the database write lock
   (``BEGIN IMMEDIATE``);
2. look the op_id up in the operation log: a replay gets the first outcome, and its
   transaction is rolled back, so it leaves no trace and takes no version;
3. read the key's current record (a write's), read the clock, and decide
   (:mod:`reference_store.rules`);
4. apply the decided changes and log the operation.

Everything is decided on data read under the lock, which is why concurrent writers can
never both insert, and a stale write can never slip past a newer one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    delete,
    func,
    literal,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument, InvalidInput

from . import lifecycle, retrieval, rules, transfer
from .config import StoreConfig
from .database import Database
from .engine import normalize_url
from .normalize import Embedder, Normalizer, load_lexicon
from .retrieval import Hit
from .schema import (
    ACTIVE,
    AT_KEY,
    by_code_point,
    entities,
    memories,
    of_entity,
    operations,
    tags_text,
    tombstones,
)
from .transfer import ImportReport
from .trust import place
from .validation import check_memory_type, check_op, check_strength, check_tags

if TYPE_CHECKING:
    from .metrics import StoreMetrics

__all__ = ["ReferenceStore", "WriteOptions"]


_PAGE = 1000
"""Entity ids :meth:`ReferenceStore.entities` reads per query."""


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What an agent-facing write adds to the contract's ``Write``."""

    memory_type: str = "semantic"
    tags: tuple[str, ...] = ()
    score: float = 1.0
    half_life_seconds: float | None = None


Decide = Callable[[rules.LockedEntity, rules.CurrentRecord | None, float], rules.Decision]
"""An operation's rules, given what was read under its lock and the clock."""


class ReferenceStore:
    """A handle onto one reference database; open as many as you like onto the same one.

    ``database`` is the handle's engine, transactions and clock, which the agent API's
    modules (retrieval, lifecycle, transfer) run on.
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | URL,
        config: StoreConfig | None = None,
        *,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
        engine: Engine | None = None,
        metrics: StoreMetrics | None = None,
    ) -> None:
        self.config = config or StoreConfig()
        self.metrics = metrics
        self.url = url if isinstance(url, URL) else normalize_url(os.fspath(url))
        if self.config.level == "semantic" and embedder is None:
            raise InvalidArgument(
                "level='semantic' needs an embedder; pass embedder=<callable mapping a "
                "list of texts to vectors>, or use level='lexical'."
            )
        lexicon = load_lexicon(self.config.lexicon_path) if self.config.lexicon_path else None
        self.normalizer = Normalizer(
            self.config.level,
            lexicon=lexicon,
            embedder=embedder,
            threshold=self.config.semantic_threshold,
        )
        self.database = Database(self.url, self.config, engine=engine, clock=clock,
                                 metrics=metrics)
        self.engine = self.database.engine
        self._lock_entity = _LOCK_ENTITY[self.database.dialect]
        self._same_fact = (self.normalizer.same_fact if self.normalizer.level == "semantic"
                           else None)

    # -- the contract ---------------------------------------------------------------

    def write(self, op: Write) -> Ack:
        """Apply a contract write as a trusted semantic memory with default strength."""
        return self.remember(op)

    def remember(self, op: Write, options: WriteOptions = WriteOptions()) -> Ack:
        """Write with the agent-facing extras: memory type, tags, score and half-life."""
        row = self._write_row(op, options)
        same_fact = self._same_fact

        def decide(entity: rules.LockedEntity, current: rules.CurrentRecord | None,
                   now: float) -> rules.Decision:
            return rules.decide_write(entity, current, row, now, same_fact)

        return self._decided(op, "write", decide, row["attr_key"])

    def delete(self, op: Delete) -> Ack:
        with self._counting_invalid("delete"):
            check_op(op, max_value_bytes=self.config.max_value_bytes)
        return self._decided(op, "delete", lambda entity, _, now: rules.decide_delete(
            entity, op.causal_seq, op.op_id, op.reason, now))

    def restore(self, op: Restore) -> Ack:
        with self._counting_invalid("restore"):
            check_op(op, max_value_bytes=self.config.max_value_bytes)
        return self._decided(op, "restore", lambda entity, _, now: rules.decide_restore(
            entity, op.causal_seq, op.op_id, now))

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        """Active records of one entity, oldest cause first."""
        with self.database.read() as conn:
            rows = conn.execute(_READ_ACTIVE, {"b_namespace": namespace,
                                               "b_entity_id": entity_id}).all()
        return [Record(entity, attribute, value, int(causal_seq), int(version))
                for entity, attribute, value, causal_seq, version in rows]

    def entities(self, namespace: str) -> Iterator[str]:
        """Every entity id the namespace has ever held, deleted ones too, by code point:
        the optional capability ``memcert audit`` enumerates a store by. Read a page at
        a time, so a large namespace is never held whole."""
        last: str | None = None
        while True:
            page = self.entity_page(namespace, after=last)
            yield from page
            if len(page) < _PAGE:
                return
            last = page[-1]

    def entity_page(self, namespace: str, *, after: str | None = None,
                    limit: int = _PAGE) -> list[str]:
        """Up to ``limit`` of :meth:`entities`, those after ``after`` by code point: one
        page, which the HTTP service's ``/v1/entities`` serves."""
        with self.database.read() as conn:
            key = by_code_point(entities.c.entity_id, conn.dialect.name)
            query = select(entities.c.entity_id).where(entities.c.namespace == namespace)
            if after is not None:
                query = query.where(key > after)
            return [row[0] for row in conn.execute(query.order_by(key).limit(limit))]

    def reset(self) -> None:
        def empty(conn: Connection) -> None:
            for table in (memories, tombstones, operations, entities):
                conn.execute(delete(table))

        self.database.transaction(empty)

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> ReferenceStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the agent-facing API ---------------------------------------------------------

    def search(self, namespace: str, query: str, *, tags: Iterable[str] = (),
               memory_type: str | None = None, limit: int = 10,
               now: float | None = None) -> list[Hit]:
        """Active memories ranked by 0.6 × similarity to ``query`` + 0.4 × strength."""
        return retrieval.search(self, namespace, query, tags=tags, memory_type=memory_type,
                                limit=limit, now=now)

    def recall(self, namespace: str, *, entity_id: str | None = None,
               tags: Iterable[str] = (), memory_type: str | None = None, limit: int = 10,
               now: float | None = None) -> list[Hit]:
        """The strongest active memories, optionally of one entity."""
        return retrieval.recall(self, namespace, entity_id=entity_id, tags=tags,
                                memory_type=memory_type, limit=limit, now=now)

    def touch(self, namespace: str, entity_id: str, attribute: str) -> int:
        """Count one use of a memory; returns the new access count (0 if none is active)."""
        return retrieval.touch(self, namespace, entity_id, attribute)

    def forget(self, namespace: str, entity_id: str, attribute: str | None = None) -> int:
        """Archive memories (never a physical delete); returns how many rows were archived."""
        return lifecycle.forget(self, namespace, entity_id, attribute)

    def export_jsonl(self, out: TextIO, *, namespace: str | None = None) -> int:
        """Write every row as JSON lines; returns the number of lines written."""
        return transfer.export_jsonl(self, out, namespace=namespace)

    def import_jsonl(self, lines: Iterable[str | bytes]) -> ImportReport:
        """Import an export; bad lines are reported, never half-written."""
        return transfer.import_jsonl(self, lines)

    def count_rows(self, *, status: str | None = None) -> int:
        """Rows in the memory table, for audits and for tests that prove nothing was written."""
        query = select(func.count()).select_from(memories)
        if status is not None:
            query = query.where(memories.c.status == status)
        with self.database.read() as conn:
            return int(conn.execute(query).scalar_one())

    # -- the write path ---------------------------------------------------------------

    def _write_row(self, op: Write, options: WriteOptions) -> dict[str, Any]:
        """Check a write's input (raising before any transaction) and build its row."""
        with self._counting_invalid("write"):
            check_op(op, max_value_bytes=self.config.max_value_bytes)
            check_memory_type(options.memory_type)
            check_tags(options.tags)
            check_strength(options.score, options.half_life_seconds)
        placed = place(op.source, op.value, options.memory_type, options.score)
        half_life = (self.config.default_half_life_seconds if options.half_life_seconds is None
                     else options.half_life_seconds)
        return {
            "namespace": op.namespace,
            "entity_id": op.entity_id,
            "attribute": op.attribute,
            "attr_key": self.normalizer.attribute_key(op.attribute),
            "value": op.value,
            "value_key": self.normalizer.value_key(op.value),
            "causal_seq": op.causal_seq,
            "op_id": op.op_id,
            "source": op.source,
            "trust": placed.trust,
            "memory_type": placed.memory_type,
            "instruction_like": placed.instruction_like,
            "tags": tags_text(options.tags),
            "score": placed.score,
            "half_life_seconds": half_life,
            "access_count": 0,
            "status": "active",
        }

    def _decided(self, op: Write | Delete | Restore, kind: str, decide: Decide,
                 attr_key: str | None = None) -> Ack:
        """One operation as one transaction (see the module's docstring), retried whole
        on transient failures; ``attr_key`` is a write's, whose rules read the key's
        current record."""
        key = {"b_namespace": op.namespace, "b_entity_id": op.entity_id}
        given = {**key, "b_op_id": op.op_id}

        def attempt(conn: Connection) -> Ack:
            entity = rules.LockedEntity(*conn.execute(self._lock_entity, key).one())
            logged, current = _read_locked(conn, given, attr_key)
            if logged is not None:
                raise _Replayed(logged)
            now = self.database.clock()
            decision = decide(entity, current, now)
            for change in decision.changes:
                _apply(conn, op, change)
            ack = decision.ack
            conn.execute(_INSERT_OPERATION, {
                "namespace": op.namespace, "op_id": op.op_id, "kind": kind,
                "entity_id": op.entity_id, "applied": ack.applied, "version": ack.version,
                "reason": ack.reason, "created_at": now})
            return ack

        try:
            ack = self.database.transaction(attempt)
        except _Replayed as replayed:
            return replayed.outcome
        if self.metrics is not None:
            self.metrics.acknowledged(kind, ack)
        return ack

    @contextmanager
    def _counting_invalid(self, kind: str) -> Iterator[None]:
        """Count input refused before any transaction, then let the error through."""
        try:
            yield
        except InvalidInput:
            if self.metrics is not None:
                self.metrics.invalid(kind)
            raise


class _Replayed(Exception):
    """The op_id is logged: the transaction is rolled back and ``outcome``, the first
    one, is the answer."""

    def __init__(self, outcome: Ack) -> None:
        super().__init__(outcome)
        self.outcome = outcome


def _read_locked(conn: Connection, given: dict[str, Any], attr_key: str | None
                 ) -> tuple[Ack | None, rules.CurrentRecord | None]:
    """The op_id's first outcome if it is logged, and the key's current record (a
    write's; a delete or restore names no key, which matches no record), read under the
    entity's lock in one statement."""
    read = conn.execute(_LOGGED_AND_CURRENT, {**given, "b_attr_key": attr_key}).one()
    applied, version, reason, *found = read
    logged = None if applied is None else Ack(
        bool(applied), None if version is None else int(version), reason)
    return logged, None if found[0] is None else rules.CurrentRecord(*found)


def _apply(conn: Connection, op: Write | Delete | Restore, change: rules.Change) -> None:
    """Run one decided change."""
    entity = {"b_namespace": op.namespace, "b_entity_id": op.entity_id}
    match change:
        case rules.InsertMemory(row=row):
            conn.execute(_INSERT_MEMORY, dict(row))
        case rules.MergeInto(record_id=record_id, causal_seq=seq, now=now):
            conn.execute(_MERGE, {"b_id": record_id, "b_causal_seq": seq, "b_now": now})
        case rules.Supersede(record_id=record_id, version=version, now=now):
            conn.execute(_SUPERSEDE, {"b_id": record_id, "b_version": version, "b_now": now})
        case rules.MarkDeleted(delete_seq=seq):
            conn.execute(_MARK_DELETED, {**entity, "b_delete_seq": seq})
        case rules.AddTombstone():
            conn.execute(_INSERT_TOMBSTONE, {
                "namespace": op.namespace, "entity_id": op.entity_id,
                "version": change.version, "causal_seq": change.causal_seq,
                "op_id": change.op_id, "reason": change.reason, "created_at": change.now})
        case rules.DeleteActive(version=version, now=now):
            conn.execute(_DELETE_ACTIVE, {**entity, "b_version": version, "b_now": now})
        case rules.MarkRestored(restore_seq=seq):
            conn.execute(_MARK_RESTORED, {**entity, "b_restore_seq": seq})
        case rules.CloseTombstones(restore_seq=seq, op_id=op_id, now=now):
            conn.execute(_CLOSE_TOMBSTONES, {**entity, "b_restore_seq": seq,
                                             "b_op_id": op_id, "b_now": now})


# The write path's statements, built once.

_m = memories.c


def _lock_entity(dialect_insert: Callable[[Any], Any]) -> Any:
    """Upsert the entity row: it takes the lock and hands out the next version."""
    return (dialect_insert(entities)
            .values(namespace=bindparam("b_namespace"), entity_id=bindparam("b_entity_id"),
                    next_version=1, deleted=False)
            .on_conflict_do_update(index_elements=[entities.c.namespace, entities.c.entity_id],
                                   set_={"next_version": entities.c.next_version + 1})
            .returning(entities.c.next_version, entities.c.deleted, entities.c.delete_seq,
                       entities.c.restore_seq))


_LOCK_ENTITY = {"sqlite": _lock_entity(sqlite.insert),
                "postgresql": _lock_entity(postgresql.insert)}
_LOGGED_AND_CURRENT = (
    select(operations.c.applied, operations.c.version, operations.c.reason,
           _m.id, _m.value, _m.value_key, _m.causal_seq, _m.version)
    .select_from(select(literal(1).label("one")).subquery("one")
                 .outerjoin(operations, and_(operations.c.namespace == bindparam("b_namespace"),
                                             operations.c.op_id == bindparam("b_op_id")))
                 .outerjoin(memories, and_(*of_entity(memories), AT_KEY, ACTIVE))))
"""An operation's reads under the lock: the op_id's first outcome, if it is logged, and
the key's current record (each all None where there is none)."""

_READ_ACTIVE = (select(_m.entity_id, _m.attribute, _m.value, _m.causal_seq, _m.version)
                .where(*of_entity(memories), ACTIVE).order_by(_m.causal_seq, _m.version))
_INSERT_MEMORY = memories.insert()
_INSERT_OPERATION = operations.insert()
_INSERT_TOMBSTONE = tombstones.insert()
_MERGE = update(memories).where(_m.id == bindparam("b_id")).values(
    causal_seq=bindparam("b_causal_seq"), updated_at=bindparam("b_now"))
_SUPERSEDE = update(memories).where(_m.id == bindparam("b_id")).values(
    status="superseded", superseded_by=bindparam("b_version"), updated_at=bindparam("b_now"))
_DELETE_ACTIVE = update(memories).where(*of_entity(memories), ACTIVE).values(
    status="deleted", superseded_by=bindparam("b_version"), updated_at=bindparam("b_now"))
_MARK_DELETED = update(entities).where(*of_entity(entities)).values(
    deleted=True, delete_seq=bindparam("b_delete_seq"))
_MARK_RESTORED = update(entities).where(*of_entity(entities)).values(
    deleted=False, restore_seq=bindparam("b_restore_seq"))
_CLOSE_TOMBSTONES = update(tombstones).where(
    *of_entity(tombstones), tombstones.c.restored_at.is_(None),
).values(restored_at=bindparam("b_now"), restore_seq=bindparam("b_restore_seq"),
         restore_op_id=bindparam("b_op_id"))
