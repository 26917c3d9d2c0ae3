"""What ``memcert audit`` reads: a store's data as records, tombstones and field defects.

Two file formats, told apart line by line, and one live source:

- the reference store's export (``reference_store.transfer``): lines whose ``kind`` is
  one of the export's;
  each field is checked by the export's own field checks, so a line the store would
  refuse to import is a defect named by the same field;
- a JSON Lines dump of any store, one record per line, in the minimal schema of
  docs/audit.md (``namespace``, ``entity_id``, ``attribute``, ``value``,
  ``causal_seq`` or ``timestamp``, ``status``, ``deleted``; ``id`` and ``version``
  optional);
- a backend factory whose handles list a namespace's entities
  (:func:`invariants.capabilities.enumeration_supported`), read one entity at a time.

A bad line is never an exception: it becomes a :class:`FieldDefect` naming the field
and what is wrong with it, and the rest of the file is still read. Files are read as
bytes, one line at a time, so a dump of any size streams and a line that is not UTF-8
is a defect of its own.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeAlias

from invariants.backend import MemoryBackend
from invariants.capabilities import Enumerable
from invariants.errors import InvalidArgument, InvalidInput
from reference_store.schema import MEMORY_STATUSES
from reference_store.transfer import KINDS

__all__ = [
    "STATUSES",
    "AuditRecord",
    "EntityMark",
    "FieldDefect",
    "Item",
    "Tombstone",
    "enumerated",
    "read_file",
    "read_items",
]

STATUSES: Final = MEMORY_STATUSES
"""A record's status: ``active`` is served; the others are kept but never served."""

_REQUIRED_TEXT: Final = ("namespace", "entity_id", "attribute", "value")
_EXPORT_MEMORY_FIELDS: Final = ("namespace", "entity_id", "attribute", "value", "version",
                                "causal_seq", "status")


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One stored memory. ``order`` is where the store applied it among its entity's
    records and tombstones (the version, else the line); ``line`` counts from 1 and is
    None for a record read from a live backend."""

    namespace: str
    entity_id: str
    attribute: str
    value: str
    causal_seq: int
    status: str
    record_id: str
    order: int
    line: int | None = None


@dataclass(frozen=True, slots=True)
class Tombstone:
    """A delete the store recorded, at ``order`` among the entity's records; a restore
    lifted it when ``restore_seq`` is set."""

    namespace: str
    entity_id: str
    order: int
    causal_seq: int
    restore_seq: int | None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class EntityMark:
    """What the store says of an entity as a whole: deleted (tombstoned, not restored)
    or not, with the delete's causal_seq when known."""

    namespace: str
    entity_id: str
    deleted: bool
    delete_seq: int | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class FieldDefect:
    """A line or record that cannot be audited as it stands: ``field`` names what is
    wrong (``line`` for the whole line), ``problem`` says how."""

    field: str
    problem: str
    line: int | None
    record_id: str | None = None
    namespace: str | None = None
    entity_id: str | None = None


Item: TypeAlias = AuditRecord | Tombstone | EntityMark | FieldDefect


class _Defect(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def read_items(stream: BinaryIO | Iterable[bytes]) -> Iterator[Item]:
    """Every item of a file of either format, in file order; never raises for bad data."""
    return split(_lines(stream))


def _lines(stream: BinaryIO | Iterable[bytes]) -> Iterator[Item | _Deleted]:
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        try:
            document = _document(raw)
            if document.get("kind") in KINDS:  # a dump may have a kind field of its own
                yield from _export_line(number, document)
            else:
                yield _dump_line(number, document)
        except _Defect as defect:
            yield FieldDefect(defect.field, defect.problem, number, f"line {number}")


def _document(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _Defect("line", f"is not valid UTF-8 ({error.reason} at byte "
                              f"{error.start})") from None
    try:
        document = json.loads(text)
    except ValueError as error:
        raise _Defect("line", f"is not valid JSON ({error})") from None
    if not isinstance(document, dict):
        raise _Defect("line", f"is a JSON {type(document).__name__}, not an object")
    return document


# -- the reference store's export --------------------------------------------------------


def _export_line(number: int, doc: Mapping[str, Any]) -> Iterator[Item]:
    kind = doc["kind"]
    if kind == "memory":
        yield _export_memory(number, doc)
    elif kind == "tombstone":
        fields = _checked(doc, "tombstone", ("namespace", "entity_id", "version",
                                             "causal_seq", "restore_seq"))
        yield Tombstone(fields["namespace"], fields["entity_id"], fields["version"],
                        fields["causal_seq"], fields["restore_seq"], number)
    elif kind == "entity":
        fields = _checked(doc, "entity", ("namespace", "entity_id", "deleted", "delete_seq"))
        yield EntityMark(fields["namespace"], fields["entity_id"], fields["deleted"],
                         fields["delete_seq"], number)


def _export_memory(number: int, doc: Mapping[str, Any]) -> Item:
    namespace, entity_id = doc.get("namespace"), doc.get("entity_id")
    record_id = (f"{namespace}/{entity_id}/v{doc.get('version')}"
                 if isinstance(namespace, str) and isinstance(entity_id, str)
                 else f"line {number}")
    try:
        fields = _checked(doc, "memory", _EXPORT_MEMORY_FIELDS)
    except _Defect as defect:
        return FieldDefect(defect.field, defect.problem, number, record_id,
                           namespace if isinstance(namespace, str) else None,
                           entity_id if isinstance(entity_id, str) else None)
    return AuditRecord(fields["namespace"], fields["entity_id"], fields["attribute"],
                       fields["value"], fields["causal_seq"], fields["status"],
                       f"{fields['namespace']}/{fields['entity_id']}/v{fields['version']}",
                       fields["version"], number)


def _checked(doc: Mapping[str, Any], kind: str, names: Iterable[str]) -> dict[str, Any]:
    """The named fields of an export line, each through the export's own check."""
    spec = KINDS[kind].fields
    out: dict[str, Any] = {}
    for name in names:
        if name not in doc:
            raise _Defect(name, f"is missing from a {kind} line")
        check = spec[name]
        try:
            out[name] = check(name, doc[name])
        except InvalidInput as error:
            raise _Defect(name, f"{error.problem} ({_shown(doc[name])})") from None
    return out


# -- a dump in the minimal schema ------------------------------------------------------------


def _dump_line(number: int, doc: Mapping[str, Any]) -> Item | _Deleted:
    raw_id = doc.get("id")
    record_id = str(raw_id) if isinstance(raw_id, str | int) and not isinstance(
        raw_id, bool) and str(raw_id) else f"line {number}"
    namespace, entity_id = doc.get("namespace"), doc.get("entity_id")
    where = (namespace if isinstance(namespace, str) and namespace.strip() else None,
             entity_id if isinstance(entity_id, str) and entity_id.strip() else None)
    try:
        if "id" in doc and record_id == f"line {number}":
            raise _Defect("id", f"is not a non-empty string or integer ({_shown(raw_id)})")
        text = {name: _text(doc, name) for name in _REQUIRED_TEXT}
        seq = _seq(doc)
        status = doc.get("status", "active")
        if status not in STATUSES:
            raise _Defect("status", f"is not one of {', '.join(STATUSES)} ({_shown(status)})")
        deleted = doc.get("deleted", False)
        if not isinstance(deleted, bool):
            raise _Defect("deleted", f"is not true or false ({_shown(deleted)})")
        order = _whole(doc, "version", number)
        delete_seq = _whole(doc, "delete_seq", None)
    except _Defect as defect:
        return FieldDefect(defect.field, defect.problem, number, record_id, *where)
    record = AuditRecord(text["namespace"], text["entity_id"], text["attribute"],
                         text["value"], seq, str(status), record_id, order, number)
    if deleted:
        return _Deleted(record, delete_seq)
    return record


@dataclass(frozen=True, slots=True)
class _Deleted:
    """A dump record whose entity the store marks deleted; split by :func:`split`."""

    record: AuditRecord
    delete_seq: int | None


def _text(doc: Mapping[str, Any], name: str) -> str:
    if name not in doc or doc[name] is None:
        raise _Defect(name, "is missing")
    value = doc[name]
    if not isinstance(value, str):
        raise _Defect(name, f"is not a string ({_shown(value)})")
    if not value.strip():
        raise _Defect(name, "is empty")
    if "\x00" in value:
        raise _Defect(name, "contains a NUL character")
    return value


def _seq(doc: Mapping[str, Any]) -> int:
    """causal_seq, else the timestamp in whole microseconds since the epoch."""
    if doc.get("causal_seq") is not None:
        seq = doc["causal_seq"]
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise _Defect("causal_seq", f"is not a whole number >= 0 ({_shown(seq)})")
        return seq
    stamp = doc.get("timestamp")
    if stamp is None:
        raise _Defect("causal_seq", "is missing, and so is timestamp; give either")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        if not math.isfinite(stamp) or stamp < 0:
            raise _Defect("timestamp", f"is not a time since the epoch ({_shown(stamp)})")
        return round(stamp * 1_000_000)
    if isinstance(stamp, str):
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            raise _Defect("timestamp", f"is not an ISO 8601 time ({_shown(stamp)})") from None
        return max(0, round(moment.timestamp() * 1_000_000))
    raise _Defect("timestamp", f"is not seconds since the epoch or an ISO 8601 time "
                               f"({_shown(stamp)})")


def _whole(doc: Mapping[str, Any], name: str, default: int | None) -> Any:
    value = doc.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Defect(name, f"is not a whole number >= 0 ({_shown(value)})")
    return value


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _jsonable(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool | list | dict)


def split(items: Iterable[Item | _Deleted]) -> Iterator[Item]:
    """Dump records marked ``deleted`` as their record and the entity's mark."""
    for item in items:
        if isinstance(item, _Deleted):
            yield item.record
            yield EntityMark(item.record.namespace, item.record.entity_id, True,
                             item.delete_seq, item.record.line)
        else:
            yield item


def read_file(path: Path) -> Iterator[Item]:
    """Every item of the file at ``path``, streamed; the caller has checked it opens."""
    with path.open("rb") as stream:
        yield from read_items(stream)


# -- a live backend ----------------------------------------------------------------------------


def enumerated(backend: MemoryBackend, namespace: str
               ) -> Iterator[tuple[str, list[AuditRecord], list[FieldDefect]]]:
    """Each entity the backend lists in ``namespace``, with the records one read of it
    serves (in serving order, all active) and the defects among them."""
    if not isinstance(backend, Enumerable):
        raise InvalidArgument(f"backend={backend!r} has no entities(namespace) method; "
                              "check enumeration_supported(backend) first")
    for entity_id in backend.entities(namespace):
        records: list[AuditRecord] = []
        defects: list[FieldDefect] = []
        for position, record in enumerate(backend.read(namespace, entity_id)):
            record_id = f"{namespace}/{entity_id}#{position}"
            problem = _served_defect(record, entity_id)
            if problem is not None:
                defects.append(FieldDefect(problem[0], problem[1], None, record_id,
                                           namespace, entity_id))
                continue
            records.append(AuditRecord(namespace, entity_id, record.attribute, record.value,
                                       record.causal_seq, "active", record_id, position))
        yield entity_id, records, defects


def _served_defect(record: Any, entity_id: str) -> tuple[str, str] | None:
    if record.entity_id != entity_id:
        return "entity_id", (f"is {_shown(record.entity_id)}, in a read of entity "
                             f"{_shown(entity_id)}")
    for name in ("attribute", "value"):
        value = getattr(record, name)
        if not isinstance(value, str) or not value.strip():
            return name, "is missing or empty" if not value else f"is not text ({_shown(value)})"
    seq = record.causal_seq
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        return "causal_seq", f"is not a whole number >= 0 ({_shown(seq)})"
    return None
