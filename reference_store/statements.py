"""The store's hot SQL: defined with SQLAlchemy Core, run on the driver's own cursor.

The write path, the contract read, and search, recall and touch run these.

Building a Core statement with literal ``.values(...)`` on every call costs more than
SQLite takes to run it: SQLAlchemy has to construct and hash a new statement each time.
Even a prebuilt statement pays about 20 µs per ``Connection.execute`` (cache lookup,
events, result objects) where SQLite needs 2-6 µs to run one of these. So
:func:`prepare_all` compiles each one once for the store's dialect into a
:class:`Prepared`: the SQL text the driver gets, plus how to turn a parameter dict into
what the driver takes. Parameter names carry a ``p_`` prefix where SQLAlchemy forbids
reusing a column's name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from operator import itemgetter
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    BigInteger,
    Insert,
    Select,
    String,
    Table,
    Text,
    Update,
    and_,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from .schema import entities, memories, operations, tombstones

T = TypeVar("T")

_ns = memories.c.namespace == bindparam("p_namespace")
_entity = memories.c.entity_id == bindparam("p_entity_id")
# A literal, not a bound parameter: the partial index ``memories_one_active`` only
# applies when the planner can see the value, and SQLite re-plans a statement on every
# execution whose bound value decides whether an index applies.
_active = memories.c.status == literal_column("'active'")

READ_ACTIVE = (
    select(memories.c.entity_id, memories.c.attribute, memories.c.value,
           memories.c.causal_seq, memories.c.version)
    .where(_ns, _entity, _active)
    .order_by(memories.c.causal_seq, memories.c.version)
)


def read_active_many() -> Select[Any]:
    """The contract read of many entities in one statement (PostgreSQL only): each
    (namespace, entity) pair of two parallel arrays, numbered from 1, with its active
    rows in the order :data:`READ_ACTIVE` gives them.

    One statement reads one snapshot, so every read answered from it sees the same
    committed state, taken after all of them were asked (service/pool.py batches the
    reads that wait at once). A pair asked twice gets its rows twice, under each number.

    Each pair's rows are a lateral subquery behind ``OFFSET 0``, which the planner may
    not merge into a join: it looks each pair up in the index of active rows, however
    it estimates the arrays. The service plans the statement once, without their values
    (``service/loop_connections.PLANNED_ONCE``); a plain join was then planned as a hash
    join over every active row.
    """
    wanted = (
        func.unnest(bindparam("p_namespaces", type_=postgresql.ARRAY(String)),
                    bindparam("p_entity_ids", type_=postgresql.ARRAY(String)))
        .table_valued("namespace", "entity_id", with_ordinality="ordinal")
        .render_derived(name="wanted")
    )
    m = memories.c
    found = (
        select(m.entity_id, m.attribute, m.value, m.causal_seq, m.version)
        .where(m.namespace == wanted.c.namespace, m.entity_id == wanted.c.entity_id, _active)
        .offset(0)
        .lateral("found")
    )
    f = found.c
    return (
        select(wanted.c.ordinal, f.entity_id, f.attribute, f.value, f.causal_seq, f.version)
        .select_from(wanted.join(found, true()))
        .order_by(wanted.c.ordinal, f.causal_seq, f.version)
    )


CURRENT_RECORD = select(
    memories.c.id, memories.c.value, memories.c.value_key, memories.c.causal_seq,
    memories.c.version,
).where(_ns, _entity, memories.c.attr_key == bindparam("p_attr_key"), _active)


def merge(prefix: str = "") -> Update:
    """Advance a record's causal seq (a paraphrase of its fact was written)."""
    return update(memories).where(memories.c.id == bindparam(prefix + "p_id")).values(
        causal_seq=bindparam(prefix + "p_causal_seq"), updated_at=bindparam(prefix + "p_now"))


def supersede(prefix: str = "", *, by: Any = None) -> Update:
    """Retire a record in favour of the version about to be inserted: ``p_version``, or
    ``by`` where the statement itself hands that version out."""
    return update(memories).where(memories.c.id == bindparam(prefix + "p_id")).values(
        status="superseded",
        superseded_by=bindparam(prefix + "p_version") if by is None else by,
        updated_at=bindparam(prefix + "p_now"))


MERGE = merge()
SUPERSEDE = supersede()

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

TOUCH = (
    update(memories)
    .where(_ns, _entity, memories.c.attr_key == bindparam("p_attr_key"), _active)
    .values(access_count=memories.c.access_count + 1, last_accessed_at=bindparam("p_now"))
    .returning(memories.c.access_count)
)

CANDIDATE_COLUMNS = (
    memories.c.entity_id, memories.c.attribute, memories.c.attr_key, memories.c.value,
    memories.c.value_key, memories.c.causal_seq, memories.c.version, memories.c.memory_type,
    memories.c.tags, memories.c.trust, memories.c.instruction_like, memories.c.access_count,
    memories.c.score, memories.c.half_life_seconds, memories.c.updated_at,
    memories.c.last_accessed_at,
)
"""What search and recall read of each active memory, in the order of their rows."""

SQL_TAGS = 4
"""The most tags a candidate query narrows by in SQL; any further ones, like every one,
are checked exactly on the rows in Python. Bounding it bounds the shapes compiled."""

TAG_ESCAPE = "/"


def candidates(*, entity: bool, memory_type: bool, tags: int) -> Select[Any]:
    """Active memories of a namespace (``p_namespace``), optionally of one entity
    (``p_entity_id``), of one type (``p_memory_type``), and whose JSON list of tags
    holds the ``LIKE`` patterns ``p_tag0``, ``p_tag1``, ... (see :func:`tag_pattern`)."""
    query = select(*CANDIDATE_COLUMNS).where(_ns, _active)
    if entity:
        query = query.where(_entity)
    if memory_type:
        query = query.where(memories.c.memory_type == bindparam("p_memory_type"))
    for n in range(tags):
        query = query.where(memories.c.tags.like(bindparam(f"p_tag{n}"), escape=TAG_ESCAPE))
    return query


def tag_pattern(encoded: str) -> str:
    """``LIKE`` pattern for a tag's JSON text anywhere in the list, metacharacters escaped.

    It can still over-match (SQLite's ``LIKE`` ignores ASCII case), which is why the
    caller checks the decoded list exactly.
    """
    escaped = (encoded.replace(TAG_ESCAPE, TAG_ESCAPE * 2).replace("%", TAG_ESCAPE + "%")
               .replace("_", TAG_ESCAPE + "_"))
    return f"%{escaped}%"


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


def lock_current() -> Select[Any]:
    """A write's entity lock and its key's current record in one statement (PostgreSQL).

    Execute it with ``p_namespace``, ``p_entity_id`` and ``p_attr_key``. The row is what
    :func:`lock_entity` returns, then ``seen``, the entity's ``next_version`` in the
    statement's snapshot (None if it had no row), then :data:`CURRENT_RECORD`'s columns
    (all None if the key has no active record).

    The snapshot is taken when the statement starts, before it may wait for the lock,
    so the record is only known to be current when nothing changed the entity
    meanwhile: when the lock handed out ``seen + 1`` (or 1, for an entity the snapshot
    did not have). Every change to an entity's memories bumps its ``next_version``
    (writes, deletes and restores through this lock, forget through its own), so any
    other answer means the caller must read the current record again, now that it
    holds the lock.
    """
    key: dict[str, Any] = {"namespace": bindparam("p_namespace"),
                           "entity_id": bindparam("p_entity_id")}
    locked = (
        postgresql.insert(entities)
        .values(**key, next_version=1, deleted=False)
        .on_conflict_do_update(
            index_elements=[entities.c.namespace, entities.c.entity_id],
            set_={"next_version": entities.c.next_version + 1},
        )
        .returning(entities.c.next_version, entities.c.deleted, entities.c.delete_seq,
                   entities.c.restore_seq)
        .cte("locked")
    )
    seen = select(entities.c.next_version).where(*_entity_row).scalar_subquery()
    current = CURRENT_RECORD.subquery("current")
    return select(
        locked.c.next_version, locked.c.deleted, locked.c.delete_seq, locked.c.restore_seq,
        seen.label("seen"), *current.c,
    ).select_from(locked.outerjoin(current, true()))


def read_state() -> Select[Any]:
    """What a write decides on, read without any lock (PostgreSQL): one row of the
    entity's ``next_version``, ``deleted``, ``delete_seq`` and ``restore_seq`` (all None
    for an entity never seen), then :data:`CURRENT_RECORD`'s columns, then the outcome
    logged under the write's op_id (``applied``, ``version``, ``reason``; None unless it
    is a replay). Execute it with ``p_namespace``, ``p_entity_id``, ``p_attr_key`` and
    ``p_op_id``; :func:`guarded_write` then applies the decision only if what it was
    decided on is still so.
    """
    base = select(literal_column("1").label("one")).subquery("base")
    current = CURRENT_RECORD.subquery("current")
    logged = select(operations.c.applied, operations.c.version, operations.c.reason).where(
        operations.c.namespace == bindparam("p_namespace"),
        operations.c.op_id == bindparam("p_op_id")).subquery("logged")
    return select(
        entities.c.next_version, entities.c.deleted, entities.c.delete_seq,
        entities.c.restore_seq, *current.c, *logged.c,
    ).select_from(base.outerjoin(entities, and_(*_entity_row)).outerjoin(current, true())
                  .outerjoin(logged, true()))


GUARDED_CHANGES = ("merge", "supersede", "insert_memory")
"""The changes :func:`guarded_write` can carry, in the order they run."""


def guarded_write(*, created: bool, current: bool, changes: tuple[str, ...]) -> Select[Any]:
    """A write's decided changes and its operation log, applied in one statement only if
    what :func:`read_state` read for its key is still so (PostgreSQL, autocommit).

    A write decides on its entity's tombstone state and its key's current record, so
    the guard checks exactly those, on the rows as they are now (a row lock re-reads a
    row changed since the statement's snapshot): the entity's ``deleted`` and
    ``delete_seq`` are ``p_deleted`` and ``p_delete_seq``, and, when the read found a
    ``current`` record, row ``p_current_id`` is still active at ``p_current_seq``. A key
    the read found no record for must still have none, which the unique index of
    active records checks when the insert comes. So writes of other keys of the entity
    do not disturb it, and writes of the same key, forgets and deletes do.

    The guard bumps the entity's ``next_version`` (or, when ``created``, makes the row of
    an entity the read did not find), taking the entity's row lock before the record's,
    as every writer does; an inserted record takes that version, and so do the
    superseded record's pointer and the log's entry. The other parts run only if the
    guard held; a supersede runs before the insert, which the unique index must see it
    done for. The statement returns that version and whether the guard held.

    Parameters, as :func:`prefixed` gives them: the guard's (``p_namespace``,
    ``p_entity_id``, ``p_deleted``, ``p_delete_seq``, ``p_current_id``,
    ``p_current_seq``), then each change's in order, then the log's.
    """
    unknown = [name for name in changes if name not in GUARDED_CHANGES]
    if unknown or list(changes) != sorted(changes, key=GUARDED_CHANGES.index):
        raise ValueError(f"changes {changes!r}: use some of {GUARDED_CHANGES}, in that order")
    key: dict[str, Any] = {"namespace": bindparam("s0_p_namespace"),
                           "entity_id": bindparam("s0_p_entity_id")}
    if created:
        guard = (postgresql.insert(entities).values(**key, next_version=1, deleted=False)
                 .on_conflict_do_nothing().returning(entities.c.next_version).cte("guard"))
    else:
        guard = (update(entities)
                 .where(entities.c.namespace == key["namespace"],
                        entities.c.entity_id == key["entity_id"],
                        entities.c.deleted == bindparam("s0_p_deleted"),
                        entities.c.delete_seq.is_not_distinct_from(
                            bindparam("s0_p_delete_seq", type_=BigInteger)))
                 .values(next_version=entities.c.next_version + 1)
                 .returning(entities.c.next_version).cte("guard"))
    held: Any = exists(select(guard.c.next_version))
    ctes: list[Any] = []
    if current:
        record = (select(memories.c.id)
                  .where(memories.c.id == bindparam("s0_p_current_id"), _active,
                         memories.c.causal_seq == bindparam("s0_p_current_seq"), held)
                  .with_for_update().cte("record"))
        ctes.append(record)
        held = exists(select(record.c.id))
    version = select(guard.c.next_version).scalar_subquery()
    inserting = "insert_memory" in changes
    superseded = None
    for n, name in enumerate(changes, start=1):
        prefix = f"s{n}_"
        if name == "merge":
            ctes.append(merge(prefix).where(held).cte("merged"))
        elif name == "supersede":
            superseded = (supersede(prefix, by=version).where(held)
                          .returning(memories.c.id).cte("superseded"))
            ctes.append(superseded)
        else:
            after = () if superseded is None else (
                select(func.count()).select_from(superseded).scalar_subquery() >= 0,)
            ctes.append(_insert_if(memories, prefix, {"version": version}, held, *after)
                        .cte("inserted"))
    ctes.append(_insert_if(operations, f"s{len(changes) + 1}_",
                           {"version": version} if inserting else {}, held).cte("logged"))
    return select(version, held).add_cte(*ctes)


def _insert_if(table: Table, prefix: str, given: Mapping[str, Any], *where: Any) -> Insert:
    """Insert one row of ``table`` (every column but ``id``: ``given`` where it has the
    column, else the parameter ``prefix + column``) only where ``where`` holds.

    Selected rather than given as VALUES, so each parameter is cast to its column's
    type; a bounded string is cast to TEXT so that the column itself still refuses a
    value too long, as a cast to VARCHAR(n) would cut it instead.
    """
    columns = [column for column in table.columns if column.key != "id"]
    return insert(table).from_select(
        [column.key for column in columns],
        select(*[given[column.key] if column.key in given
                 else cast(bindparam(prefix + column.key),
                           Text() if isinstance(column.type, String) else column.type)
                 for column in columns]).where(*where))


_NAMED = re.compile(r"%\((\w+)\)s")


def with_log(parts: Sequence[Prepared], log: Prepared) -> Prepared:
    """``parts`` and then ``log``, sent as one statement (PostgreSQL): each part a
    data-changing CTE of the log's insert. One round trip instead of one per statement.

    The parts run on the statement's one snapshot and do not see each other's changes,
    so they must change different tables, and not the one ``log`` inserts into; a
    statement that must see another's change (a supersede, then the insert under the
    same unique index) goes before, on its own. The combined statement takes the
    parameters of statement ``n`` (``log`` is the last) under the prefix ``s<n>_``,
    which :func:`prefixed` adds.
    """
    statements = (*parts, log)
    sql: list[str] = []
    keys: list[str] = []
    names: list[str] = []
    fixed: dict[str, Any] = {}
    processors: list[tuple[int, Callable[[Any], Any]]] = []
    for n, statement in enumerate(statements):
        if statement.names is None:
            raise TypeError(f"with_log takes named parameters: {statement.sql}")
        prefix = f"s{n}_"
        text = _NAMED.sub(f"%({prefix}\\1)s", statement.sql)
        sql.append(text if statement is log else f"s{n} AS ({text})")
        processors.extend((len(keys) + index, process)
                          for index, process in statement.processors)
        keys.extend(prefix + key for key in statement.keys)
        names.extend(prefix + name for name in statement.names)
        fixed.update({prefix + key: value for key, value in statement.fixed.items()})
    text = "WITH " + ", ".join(sql[:-1]) + " " + sql[-1]
    return Prepared(text, tuple(keys), tuple(names), fixed, tuple(processors),
                    picker(tuple(keys)))


def prefixed(*params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of a :func:`with_log` or :func:`guarded_write` statement: statement
    ``n``'s under ``s<n>_``."""
    return {f"s{n}_{key}": value for n, given in enumerate(params) for key, value in given.items()}


def _inserted(table: Table) -> tuple[str, ...]:
    """The columns the store's inserts set: all of them but the autoincrement ``id``."""
    return tuple(column.key for column in table.columns if column.key != "id")


@dataclass(frozen=True, slots=True)
class Prepared:
    """One statement compiled for one dialect, in the form its driver's cursor takes.

    ``parameters`` does what ``Connection.execute`` would: fills in the values the
    statement carries itself (``status = 'active'``), converts through the types' bind
    processors (SQLite stores a bool as 0/1), and orders or names the result for the
    driver's paramstyle. Rows come back as the driver's tuples, in the order of the
    statement's columns.
    """

    sql: str
    keys: tuple[str, ...]
    names: tuple[str, ...] | None
    fixed: Mapping[str, Any]
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]
    pick: Callable[[Mapping[str, Any]], tuple[Any, ...]]

    def parameters(self, given: Mapping[str, Any]) -> Sequence[Any] | dict[str, Any]:
        values = self.values(given)
        if self.names is None:
            return values
        return dict(zip(self.names, values, strict=True))

    def values(self, given: Mapping[str, Any]) -> Sequence[Any]:
        """The parameters' values in the order of ``keys``, converted but not named."""
        values: Sequence[Any] = self.pick({**self.fixed, **given} if self.fixed else given)
        if self.processors:
            values = list(values)
            for index, process in self.processors:
                values[index] = process(values[index])
        return values


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """A call the store answers with one statement: what to send, and what the rows mean.

    Planning checks the input and may raise before anything is sent; ``finish`` turns
    the rows into the answer. Sending is the caller's business, which is the point:
    ``ReferenceStore`` sends a plan on a handle's driver connection, and the HTTP
    service on PostgreSQL sends it from the event loop, on an asynchronous connection,
    where a thread would cost more than the statement (``service/pool.py``).

    ``writes`` marks a statement that changes rows: it may wait for a lock, so it is
    retried on lock contention, and SQLite never runs it on the event loop.
    """

    statement: Prepared
    params: dict[str, Any]
    finish: Callable[[Sequence[tuple[Any, ...]]], T]
    writes: bool = False


def prepare(statement: ClauseElement, dialect: Dialect,
            column_keys: Sequence[str] | None = None) -> Prepared:
    """Compile ``statement`` once; ``column_keys`` names the columns an INSERT sets."""
    compiled = statement.compile(dialect=dialect,
                                 column_keys=list(column_keys) if column_keys else None)
    assert isinstance(compiled, SQLCompiler)
    binds = {name: bind for bind, name in compiled.bind_names.items()}
    if compiled.positiontup is not None:
        keys = tuple(compiled.positiontup)
        names = None
    else:
        keys = tuple(binds)
        names = tuple(compiled.escaped_bind_names.get(key, key) for key in keys)
    if "POSTCOMPILE" in compiled.string or compiled.insert_prefetch or compiled.update_prefetch:
        raise TypeError(f"statement needs SQLAlchemy at execution time: {compiled.string}")
    processors = []
    for index, key in enumerate(keys):
        process = binds[key].type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors.append((index, process))
    fixed = {key: bind.effective_value for key, bind in binds.items() if not bind.required}
    return Prepared(compiled.string, keys, names, fixed, tuple(processors), picker(keys))


def picker(keys: tuple[Hashable, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The values of ``keys`` from a mapping or a sequence, as a tuple (``itemgetter``
    unwraps one key and takes no fewer)."""
    if not keys:
        return lambda values: ()
    if len(keys) == 1:
        (key,) = keys
        return lambda values: (values[key],)
    return itemgetter(*keys)


class Candidates:
    """The candidate query of search and recall, each shape compiled on first use.

    Shapes differ by which prefilters a call has (an entity, a memory type, how many
    tags), so there are at most ``4 × (SQL_TAGS + 1)``. Two threads compiling one shape
    at once both get a correct statement; the dictionary keeps one.
    """

    def __init__(self, dialect: Dialect) -> None:
        self._dialect = dialect
        self._compiled: dict[tuple[bool, bool, int], Prepared] = {}

    def get(self, *, entity: bool, memory_type: bool, tags: int) -> Prepared:
        key = (entity, memory_type, min(tags, SQL_TAGS))
        found = self._compiled.get(key)
        if found is None:
            found = prepare(candidates(entity=entity, memory_type=memory_type, tags=key[2]),
                            self._dialect)
            if self._dialect.name == "sqlite":
                found = replace(found, sql=_only_active_rows(found.sql))
            self._compiled[key] = found
        return found


def _only_active_rows(sql: str) -> str:
    """Make SQLite read the candidates through the partial index of active rows.

    Without statistics its planner sees two equally good indexes on the namespace, and
    takes whichever the schema created first, an order that changes from one process
    to the next. ``memories_by_entity`` walks the namespace's superseded rows too,
    which makes a search of a load run's namespace a third slower. SQLAlchemy renders
    no table hints for SQLite, so the clause goes into the compiled text.
    """
    hinted = sql.replace("FROM memories ", "FROM memories INDEXED BY memories_one_active ", 1)
    assert hinted != sql, sql
    return hinted


@dataclass(frozen=True, slots=True)
class PreparedStatements:
    """Every statement the driver path runs, compiled for one dialect."""

    lock_entity: Prepared
    current_record: Prepared
    merge: Prepared
    supersede: Prepared
    insert_memory: Prepared
    insert_operation: Prepared
    insert_tombstone: Prepared
    delete_active: Prepared
    mark_deleted: Prepared
    mark_restored: Prepared
    close_tombstones: Prepared
    first_outcome: Prepared
    read_active: Prepared
    read_active_many: Prepared | None
    """None where the dialect has no arrays (SQLite)."""
    touch: Prepared
    candidates: Candidates
    lock_current: Prepared | None
    """None on SQLite, where a round trip costs nothing and the write lock is the
    database's: the current record is read by a statement of its own, under it."""
    with_log: Mapping[tuple[str, ...], Prepared]
    """The changes an operation may end with, by their statements' SQL, each combined
    with the operation log's insert (:func:`with_log`); empty on SQLite."""
    read_state: Prepared | None
    """None on SQLite, whose writes always decide under the database's write lock."""
    guarded: Mapping[tuple[bool, bool, tuple[str, ...]], Prepared]
    """:func:`guarded_write` for each change list a write can decide, by whether the
    entity is created, whether the key had a current record, and the SQL of the changes'
    own statements; empty on SQLite."""


def prepare_all(dialect: Dialect) -> PreparedStatements:
    """Compile for a dialect that has connected once, so it knows the server's features."""
    pg = dialect.name == "postgresql"
    insert_memory = prepare(INSERT_MEMORY, dialect, _inserted(memories))
    merge = prepare(MERGE, dialect)
    parts = {"merge": merge, "supersede": prepare(SUPERSEDE, dialect),
             "insert_memory": insert_memory}
    insert_operation = prepare(INSERT_OPERATION, dialect, _inserted(operations))
    insert_tombstone = prepare(INSERT_TOMBSTONE, dialect, _inserted(tombstones))
    delete_active = prepare(DELETE_ACTIVE, dialect)
    mark_deleted = prepare(MARK_DELETED, dialect)
    mark_restored = prepare(MARK_RESTORED, dialect)
    close_tombstones = prepare(CLOSE_TOMBSTONES, dialect)
    endings = ((insert_memory,), (merge,), (mark_deleted, insert_tombstone, delete_active),
               (mark_restored, close_tombstones))
    return PreparedStatements(
        lock_entity=prepare(lock_entity(dialect.name), dialect, ("namespace", "entity_id")),
        current_record=prepare(CURRENT_RECORD, dialect),
        merge=merge,
        supersede=parts["supersede"],
        insert_memory=insert_memory,
        insert_operation=insert_operation,
        insert_tombstone=insert_tombstone,
        delete_active=delete_active,
        mark_deleted=mark_deleted,
        mark_restored=mark_restored,
        close_tombstones=close_tombstones,
        first_outcome=prepare(FIRST_OUTCOME, dialect),
        read_active=prepare(READ_ACTIVE, dialect),
        read_active_many=prepare(read_active_many(), dialect) if pg else None,
        touch=prepare(TOUCH, dialect),
        candidates=Candidates(dialect),
        lock_current=prepare(lock_current(), dialect) if pg else None,
        with_log={tuple(part.sql for part in parts): with_log(parts, insert_operation)
                  for parts in endings} if pg else {},
        read_state=prepare(read_state(), dialect) if pg else None,
        guarded={(created, current, tuple(parts[name].sql for name in changes)):
                 prepare(guarded_write(created=created, current=current, changes=changes),
                         dialect)
                 for created, current, changes in _GUARDED_SHAPES} if pg else {},
    )


_GUARDED_SHAPES = (
    (True, False, ("insert_memory",)),
    (False, False, ()),
    (False, False, ("insert_memory",)),
    (False, True, ()),
    (False, True, ("merge",)),
    (False, True, ("supersede", "insert_memory")),
)
"""Every (created, current, changes) a write's decision can make: an entity the read did
not find has no record and can only take an insert; a key with no record takes an insert
or is refused, one with a record is merged into, superseded, or refused."""
