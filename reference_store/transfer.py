"""Export a store to JSON Lines and import it back, losing nothing.

Format: one JSON object per line, keys sorted, no spaces, UTF-8 unescaped. The
``kind`` field says which table a line comes from, and the other fields are that row's
columns (the operation log's own ``kind`` column travels as ``op_kind``). Lines come
in the order ``entity``, ``memory``, ``tombstone``, ``operation``, each sorted by
namespace and entity by code point (the same on both databases), then by version.
Surrogate row ids are left out: nothing refers to them. Every status travels,
superseded, deleted and archived rows too, with the entities' tombstone and restore
state and the operation log, so deletion monotonicity and idempotent retries survive
the trip. Exporting, importing into an empty store and exporting again gives the same
bytes.

Import is strict and never raises for bad data: each line is checked on its own
(JSON, kind, every field's presence and type, the store's validation rules), and a
bad line becomes a :class:`Rejection` in the :class:`ImportReport`. A few fields are
derived rather than trusted: ``attr_key`` and ``value_key`` are recomputed with the
importing store's normalizer, and trust, memory type, score and the instruction flag
are put through the store's trust rules again, so a crafted file cannot plant a
standing order as a semantic fact, and an export from a store with another lexicon
lands under this store's keys.

An entity's history is never merged into one that already exists: an ``entity`` line
for an entity this store already knows is rejected, and so is every other line of an
entity whose ``entity`` line was not imported (the export writes entity lines first).
That is what keeps uniqueness and deletion monotonicity intact on import into a
non-empty store. All accepted lines are written in one transaction, so an import that
fails halfway leaves nothing behind.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, get_args

from sqlalchemy import Connection, Table, insert, select, text

from invariants.errors import InvalidInput

from .schema import (
    MEMORY_STATUSES,
    by_code_point,
    entities,
    memories,
    operations,
    tags_text,
    tombstones,
)
from .trust import TrustLevel, place
from .validation import check_memory_type, check_namespace, check_seq, check_tags, check_text

if TYPE_CHECKING:
    from .store import ReferenceStore

__all__ = ["KINDS", "ImportReport", "Rejection", "export_jsonl", "import_jsonl"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """A line import refused; ``line`` counts from 1, ``field`` is None for the whole line."""

    line: int
    field: str | None
    message: str


@dataclass(frozen=True, slots=True)
class ImportReport:
    """How many lines were imported, and why each of the others was not."""

    imported: int
    rejected: tuple[Rejection, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.rejected


class _Reject(Exception):
    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


Check = Callable[[str, Any], Any]
"""Validates one field's JSON value and returns the column value, or raises InvalidInput."""


# -- field checks -----------------------------------------------------------------------


def _checked(check: Callable[[str, Any], object]) -> Check:
    """A validation rule as a field check: the value passes through unchanged."""
    def run(name: str, value: Any) -> Any:
        check(name, value)
        return value

    return run


def _or_none(check: Check) -> Check:
    """``check``, letting null through: the column has no value."""
    return lambda name, value: None if value is None else check(name, value)


def _rule(holds: Callable[[Any], bool], problem: str, fix: str) -> Check:
    """A check refusing any value for which ``holds`` is false."""
    def check(name: str, value: Any) -> Any:
        if not holds(value):
            raise InvalidInput(name, value, problem, fix)
        return value

    return check


def _number(holds: Callable[[float], bool], problem: str, fix: str) -> Check:
    """A JSON number (not a boolean) for which ``holds``, as a float."""
    within = _rule(holds, problem, fix)

    def check(name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(name, value, "is not a number", "Pass a JSON number.")
        return float(within(name, value))

    return check


def _seq(name: str, value: Any) -> int:
    check_seq(value, name)
    return int(value)


def _version(name: str, value: Any) -> int:
    number = _seq(name, value)
    if number < 1:
        raise InvalidInput(name, value, "is below 1", "Versions start at 1.")
    return number


def _tags(name: str, value: Any) -> str:
    if not isinstance(value, list):
        raise InvalidInput(name, value, "is not a list", "Pass a JSON array of strings.")
    check_tags(value)
    return tags_text(value)


def _one_of(choices: Iterable[str]) -> Check:
    allowed = tuple(choices)
    return _rule(lambda value: value in allowed, "is not a known value",
                 f"Use one of {', '.join(allowed)}.")


_text = _checked(check_text)
_namespace = _checked(lambda _, value: check_namespace(value))
_memory_type = _checked(lambda _, value: check_memory_type(value))
_value = _checked(lambda name, value: check_text(name, value, max_bytes=sys.maxsize))
"""Any size here: the limit is the importing store's, checked once the line is parsed."""
_derived_text = _rule(lambda value: isinstance(value, str), "is not a str",
                      "Pass the text the export wrote.")
_bool = _rule(lambda value: isinstance(value, bool), "is not a boolean", "Use true or false.")
_count = _rule(lambda value: not isinstance(value, bool) and isinstance(value, int)
               and value >= 0, "is not an int >= 0", "Pass a whole count.")
_time = _number(math.isfinite, "is not finite", "Pass seconds since the epoch.")
_score = _number(lambda number: math.isfinite(number) and number >= 0,
                 "is not a finite number >= 0", "Pass a score >= 0.")
_half_life = _number(lambda number: number > 0, "is not > 0",
                     "Pass the half-life in seconds (Infinity: never decays).")


_COLUMN = {"op_kind": "kind"}
"""The JSON names that are not their column's: the operation log's ``kind`` would clash
with the line's own."""


@dataclass(frozen=True)
class _Kind:
    """How one table travels: JSON name -> check, and the export's sort order."""

    table: Table
    fields: Mapping[str, Check]
    order: tuple[str, ...]

    @property
    def columns(self) -> dict[str, str]:
        """Column name -> JSON name."""
        return {_COLUMN.get(name, name): name for name in self.fields}


KINDS: Mapping[str, _Kind] = {
    "entity": _Kind(entities, dict(
        namespace=_namespace, entity_id=_text, next_version=_version, deleted=_bool,
        delete_seq=_or_none(_seq), restore_seq=_or_none(_seq),
    ), ("namespace", "entity_id")),
    "memory": _Kind(memories, dict(
        namespace=_namespace, entity_id=_text, attribute=_text, attr_key=_derived_text,
        value=_value, value_key=_derived_text, version=_version, causal_seq=_seq,
        op_id=_text, source=_or_none(_text), trust=_one_of(get_args(TrustLevel)),
        memory_type=_memory_type, instruction_like=_bool, tags=_tags, score=_score,
        half_life_seconds=_half_life, access_count=_count, created_at=_time,
        updated_at=_time, last_accessed_at=_or_none(_time),
        status=_one_of(MEMORY_STATUSES), superseded_by=_or_none(_version),
    ), ("namespace", "entity_id", "version", "id")),
    "tombstone": _Kind(tombstones, dict(
        namespace=_namespace, entity_id=_text, version=_version, causal_seq=_seq,
        op_id=_text, reason=_or_none(_text), created_at=_time, restored_at=_or_none(_time),
        restore_seq=_or_none(_seq), restore_op_id=_or_none(_text),
    ), ("namespace", "entity_id", "version", "id")),
    "operation": _Kind(operations, dict(
        namespace=_namespace, op_id=_text, op_kind=_one_of(("write", "delete", "restore")),
        entity_id=_text, applied=_bool, version=_or_none(_version), reason=_or_none(_text),
        created_at=_time,
    ), ("namespace", "op_id")),
}
"""Every table that travels, in export order; ``id`` columns are left out on purpose."""


# -- export -----------------------------------------------------------------------------


def export_jsonl(store: ReferenceStore, out: TextIO, *, namespace: str | None = None) -> int:
    """Write every row of the store (or of one namespace) to ``out``; return lines written.

    The rows are read in one snapshot, so a store being written meanwhile is exported
    as it was at one instant.
    """
    if namespace is not None:
        check_namespace(namespace)
    written = 0
    with store.database.read() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"))
        for kind, spec in KINDS.items():
            for line in _export_kind(conn, kind, spec, namespace):
                out.write(line)
                written += 1
    return written


def _export_kind(conn: Connection, kind: str, spec: _Kind,
                 namespace: str | None) -> Iterator[str]:
    table = spec.table
    columns = spec.columns
    order = (by_code_point(table.c[name], conn.dialect.name) for name in spec.order)
    query = select(*(table.c[column] for column in columns)).order_by(*order)
    if namespace is not None:
        query = query.where(table.c.namespace == namespace)
    for row in conn.execute(query):
        record: dict[str, Any] = {"kind": kind}
        for column, value in zip(columns, row, strict=True):
            record[columns[column]] = _exported(table, column, value)
        yield json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


def _exported(table: Table, column: str, value: Any) -> Any:
    """A column value as JSON writes it, the same whichever database it came from."""
    if value is None:
        return None
    if table is memories and column == "tags":
        return json.loads(value)
    python_type = table.c[column].type.python_type
    return python_type(value) if python_type in (float, bool, int) else value


# -- import -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Parsed:
    line: int
    kind: str
    row: dict[str, Any]


def import_jsonl(store: ReferenceStore, lines: Iterable[str | bytes]) -> ImportReport:
    """Import the lines of an export; return what was imported and what was rejected.

    ``lines`` may be text or bytes: pass a file opened in binary mode and a line that
    is not valid UTF-8 is rejected on its own, where a text-mode file would raise
    halfway through. Blank lines are skipped. Lines are read once, up front, so the
    transaction can be retried whole on lock contention.
    """
    parsed: list[_Parsed] = []
    rejected: list[Rejection] = []
    for number, raw in enumerate(lines, start=1):
        try:
            line = _decoded(raw)
            if line.strip():
                parsed.append(_parse(store, number, line))
        except _Reject as reason:
            rejected.append(Rejection(number, reason.field, reason.message))

    late = store.database.transaction(lambda conn: _apply(conn, parsed)) if parsed else []
    everything = sorted([*rejected, *late], key=lambda rejection: rejection.line)
    return ImportReport(len(parsed) - len(late), tuple(everything))


def _decoded(raw: str | bytes) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _Reject(None, f"the line is not valid UTF-8: {error}") from None


def _parse(store: ReferenceStore, number: int, raw: str) -> _Parsed:
    try:
        document = json.loads(raw)
    except ValueError as error:
        raise _Reject(None, f"the line is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise _Reject(None, f"the line is a JSON {type(document).__name__}, not an object")
    kind = document.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise _Reject("kind", f"kind={kind!r} is not one of {', '.join(KINDS)}")
    spec = KINDS[kind]
    unknown = sorted(set(document) - set(spec.fields) - {"kind"})
    if unknown:
        raise _Reject(unknown[0], f"{unknown[0]!r} is not a field of a {kind} line; "
                                  "it may come from a newer memcert, which it would lose")
    row: dict[str, Any] = {}
    for name, check in spec.fields.items():
        if name not in document:
            raise _Reject(name, f"{name} is missing; a {kind} line needs every field "
                                "the export writes, null where there is no value")
        try:
            row[_COLUMN.get(name, name)] = check(name, document[name])
        except InvalidInput as error:
            raise _Reject(error.field, str(error)) from None
    if kind == "memory":
        _derive(store, row)
    return _Parsed(number, kind, row)


def _derive(store: ReferenceStore, row: dict[str, Any]) -> None:
    """Recompute what this store derives itself rather than taking the file's word."""
    try:
        check_text("value", row["value"], max_bytes=store.config.max_value_bytes)
    except InvalidInput as error:
        raise _Reject("value", str(error)) from None
    placed = place(row["source"], row["value"], row["memory_type"], row["score"])
    row.update(
        attr_key=store.normalizer.attribute_key(row["attribute"]),
        value_key=store.normalizer.value_key(row["value"]),
        trust=placed.trust,
        memory_type=placed.memory_type,
        score=placed.score,
        instruction_like=placed.instruction_like,
    )


@dataclass
class _Entity:
    line: int
    next_version: int
    deleted: bool
    delete_seq: int | None
    versions: dict[tuple[str, int], int] = field(default_factory=dict)
    active: dict[str, int] = field(default_factory=dict)


def _apply(conn: Connection, parsed: list[_Parsed]) -> list[Rejection]:
    """Check each parsed line against the store and the lines before it, then insert.

    Only ``entity`` lines and op_ids can clash with rows already in the store; every
    other check is against entities this import creates, so it runs in memory.
    """
    imported: dict[tuple[str, str], _Entity] = {}
    refused: dict[tuple[str, str], int] = {}
    op_ids: dict[tuple[str, str], int] = {}
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    rejected: list[Rejection] = []
    for item in parsed:
        key = (item.row["namespace"], item.row["entity_id"])
        try:
            if item.kind == "entity":
                _admit_entity(conn, item, key, imported)
            else:
                entity = _owner(item, key, imported, refused)
                _check_versions(item, entity)
                if item.kind == "memory":
                    _admit_memory(item, entity)
                elif item.kind == "tombstone":
                    _claim_version(item, entity, "tombstone")
                else:
                    _admit_operation(conn, item, op_ids)
        except _Reject as reason:
            if item.kind == "entity":
                refused[key] = item.line
            rejected.append(Rejection(item.line, reason.field, reason.message))
            continue
        rows[item.kind].append(item.row)
    for kind, spec in KINDS.items():
        if rows[kind]:
            conn.execute(insert(spec.table), rows[kind])
    return rejected


def _admit_entity(conn: Connection, item: _Parsed, key: tuple[str, str],
                  imported: dict[tuple[str, str], _Entity]) -> None:
    if key in imported:
        raise _Reject("entity_id", f"entity {key[1]!r} of namespace {key[0]!r} already has "
                                   f"an entity line (line {imported[key].line})")
    exists = conn.execute(select(entities.c.next_version).where(
        entities.c.namespace == key[0], entities.c.entity_id == key[1])).first()
    if exists is not None:
        raise _Reject("entity_id", f"entity {key[1]!r} of namespace {key[0]!r} already exists "
                                   "in this store, and one entity's histories are never "
                                   "merged; import into a store without it, or leave its "
                                   "lines out")
    row = item.row
    if row["deleted"] and row["delete_seq"] is None:
        raise _Reject("delete_seq", "a deleted entity needs the delete_seq of its delete")
    imported[key] = _Entity(item.line, row["next_version"], row["deleted"], row["delete_seq"])


def _owner(item: _Parsed, key: tuple[str, str], imported: dict[tuple[str, str], _Entity],
           refused: dict[tuple[str, str], int]) -> _Entity:
    if key in imported:
        return imported[key]
    if key in refused:
        reason = f"its entity line (line {refused[key]}) was rejected"
    else:
        reason = "no entity line for it comes before this line (the export writes them first)"
    raise _Reject("entity_id", f"entity {key[1]!r} of namespace {key[0]!r} is not imported "
                               f"by this file: {reason}")


def _check_versions(item: _Parsed, entity: _Entity) -> None:
    """No version may reach past the entity's clock, or a later write would reuse it."""
    for name in ("version", "superseded_by"):
        version = item.row.get(name)
        if version is not None and version > entity.next_version:
            raise _Reject(name, f"{name}={version} is above the entity's next_version="
                                f"{entity.next_version} (line {entity.line})")


def _claim_version(item: _Parsed, entity: _Entity, table: str) -> None:
    version = item.row["version"]
    earlier = entity.versions.get((table, version))
    if earlier is not None:
        raise _Reject("version", f"{table} version {version} of this entity is already on "
                                 f"line {earlier}")
    entity.versions[(table, version)] = item.line


def _admit_memory(item: _Parsed, entity: _Entity) -> None:
    row = item.row
    if row["status"] == "active":
        if entity.deleted:
            raise _Reject("status", "the entity is deleted, and an active memory would bring "
                                    "it back; its memories can only be imported as deleted, "
                                    "superseded or archived")
        if entity.delete_seq is not None and row["causal_seq"] <= entity.delete_seq:
            raise _Reject("causal_seq", f"causal_seq={row['causal_seq']} is not above the "
                                        f"entity's delete_seq={entity.delete_seq}, so the "
                                        "write path would refuse it as predating the delete")
        earlier = entity.active.get(row["attr_key"])
        if earlier is not None:
            raise _Reject("attribute", f"attribute {row['attribute']!r} is already active on "
                                       f"line {earlier} (both are the key "
                                       f"{row['attr_key']!r}); only one may be active")
    _claim_version(item, entity, "memory")
    if row["status"] == "active":
        entity.active[row["attr_key"]] = item.line


def _admit_operation(conn: Connection, item: _Parsed,
                     op_ids: dict[tuple[str, str], int]) -> None:
    key = (item.row["namespace"], item.row["op_id"])
    if key in op_ids:
        raise _Reject("op_id", f"op_id {key[1]!r} is already on line {op_ids[key]}")
    exists = conn.execute(select(operations.c.kind).where(
        operations.c.namespace == key[0], operations.c.op_id == key[1])).first()
    if exists is not None:
        raise _Reject("op_id", f"op_id {key[1]!r} is already recorded in namespace "
                               f"{key[0]!r} of this store")
    op_ids[key] = item.line
