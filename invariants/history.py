"""The history of a run: every operation's invocation and its one completion, in order.

memcert records what happened the way Jepsen does. When a worker starts an operation it
appends an ``invoke`` entry; when the operation returns, it appends the completion:

- ``ok``: the operation took effect (``Ack(applied=True)``, or a read's records);
- ``fail``: it definitely did not (``Ack(applied=False)``);
- ``info``: an exception or a timeout, so the outcome is unknown. The operation may have
  taken effect, and may take effect at any later time.

Every entry carries a global ``index`` (dense from 0, the order of the history), the
``worker`` that ran it, a monotonic ``time_ns``, the operation payload ``op`` and, on
completions, the ``result``. Writes also carry ``meta``, the generator's ground truth
(fact id, canonical slot, paraphrase level), so that checkers never have to trust the
backend's own normalizer. A completion repeats its invocation's ``op`` and ``meta`` so
that each line of ``history.jsonl`` reads on its own.

An *operation* is named by the index of its invocation: "op 12" is the operation invoked
at index 12, whatever index its completion got.

The history is written to ``history.jsonl`` as it grows, one JSON object per line, and
flushed line by line, so that a crash loses at most the line being written. Checking a
run means reading that file back (:func:`read_history`) and feeding it to the checkers.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any, Literal, TypeAlias, cast, get_args, overload

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import MemcertError

__all__ = [
    "Entry",
    "EntryType",
    "History",
    "HistoryError",
    "HistoryRecorder",
    "OpName",
    "Paraphrase",
    "Payload",
    "Read",
    "Result",
    "WriteMeta",
    "read_history",
]

EntryType: TypeAlias = Literal["invoke", "ok", "fail", "info"]
OpName: TypeAlias = Literal["write", "delete", "restore", "read"]
Paraphrase: TypeAlias = Literal["none", "surface", "lexical", "semantic"]

_ENTRY_TYPES: tuple[str, ...] = get_args(EntryType)
_OP_NAMES: tuple[str, ...] = get_args(OpName)
_PARAPHRASES: tuple[str, ...] = get_args(Paraphrase)


class HistoryError(MemcertError, ValueError):
    """A history is malformed: it cannot be trusted to say what happened.

    ``path`` and ``line`` locate the problem in a ``history.jsonl`` file when there is
    one (``line`` counts from 1); ``problem`` and ``fix`` are the two halves of the
    message, kept apart so that a CLI can print them on their own.
    """

    def __init__(
        self, problem: str, fix: str, *, path: str | None = None, line: int | None = None
    ) -> None:
        self.problem = problem
        self.fix = fix
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        elif line is not None:
            where = f"line {line}: "
        super().__init__(f"{where}{problem}. {fix}")


@dataclass(frozen=True, slots=True)
class Read:
    """The payload of a read: which entity, in which namespace."""

    namespace: str
    entity_id: str


@dataclass(frozen=True, slots=True)
class WriteMeta:
    """The generator's ground truth about a write, which the backend never sees.

    ``fact`` identifies the assertion the value makes; two writes with one ``fact`` are
    paraphrases of each other and must end up as one record. ``slot`` is the canonical
    attribute the fact is about; one slot holds one fact at a time. ``paraphrase`` says
    how far the value's wording (and attribute name) departs from the fact's plain form.
    """

    fact: str
    slot: str
    paraphrase: Paraphrase = "none"


Payload: TypeAlias = Write | Delete | Restore | Read
"""What an entry's ``op`` holds; its type always matches the entry's ``f``."""

Result: TypeAlias = Ack | tuple[Record, ...] | str | None
"""What an entry's ``result`` holds.

``None`` on an invocation; an :class:`Ack` on the ``ok``/``fail`` completion of a write,
delete or restore; the records returned, in serving order, on an ``ok`` read; the error
text (``"TimeoutError: ..."``) on an ``info``. A ``fail`` carries either
``Ack(applied=False)`` or the text of an error that proves nothing was applied (a read
refused, a restore the backend does not implement).
"""

_F_OF_TYPE: dict[type, OpName] = {
    Write: "write",
    Delete: "delete",
    Restore: "restore",
    Read: "read",
}
_OP_FIELDS: dict[str, tuple[tuple[str, type, bool], ...]] = {
    # name, type, may be null
    "write": (
        ("namespace", str, False),
        ("entity_id", str, False),
        ("attribute", str, False),
        ("value", str, False),
        ("causal_seq", int, False),
        ("op_id", str, False),
        ("source", str, True),
    ),
    "delete": (
        ("namespace", str, False),
        ("entity_id", str, False),
        ("causal_seq", int, False),
        ("op_id", str, False),
        ("reason", str, True),
    ),
    "restore": (
        ("namespace", str, False),
        ("entity_id", str, False),
        ("causal_seq", int, False),
        ("op_id", str, False),
    ),
    "read": (("namespace", str, False), ("entity_id", str, False)),
}
_OP_CLASSES: dict[str, type] = {"write": Write, "delete": Delete, "restore": Restore, "read": Read}
_RECORD_FIELDS: tuple[tuple[str, type, bool], ...] = (
    ("entity_id", str, False),
    ("attribute", str, False),
    ("value", str, False),
    ("causal_seq", int, False),
    ("version", int, False),
)
_ACK_FIELDS: tuple[tuple[str, type, bool], ...] = (
    ("applied", bool, False),
    ("version", int, True),
    ("reason", str, True),
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of the history: an invocation or a completion."""

    index: int
    worker: int
    time_ns: int
    type: EntryType
    f: OpName
    op: Payload
    result: Result = None
    meta: WriteMeta | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object this entry is stored as; :meth:`from_dict` inverts it exactly."""
        result: Any
        res = self.result
        if isinstance(res, Ack):
            result = {"applied": res.applied, "version": res.version, "reason": res.reason}
        elif isinstance(res, tuple):
            result = [
                {
                    "entity_id": r.entity_id,
                    "attribute": r.attribute,
                    "value": r.value,
                    "causal_seq": r.causal_seq,
                    "version": r.version,
                }
                for r in res
            ]
        else:
            result = res
        meta = self.meta
        return {
            "index": self.index,
            "worker": self.worker,
            "time_ns": self.time_ns,
            "type": self.type,
            "f": self.f,
            "op": {name: getattr(self.op, name) for name, _, _ in _OP_FIELDS[self.f]},
            "result": result,
            "meta": None
            if meta is None
            else {"fact": meta.fact, "slot": meta.slot, "paraphrase": meta.paraphrase},
        }

    @classmethod
    def from_dict(cls, data: object) -> Entry:
        """Decode one stored entry, checking every field's presence and type.

        Raises :class:`HistoryError` naming the field; the caller adds the line number.
        This checks the entry alone; whether it fits its history is
        :class:`History`'s job.
        """
        entry = _decode_well_formed(data)
        if entry is not None:
            return entry
        obj = _expect_object(data, "entry")
        index = _field(obj, "index", int, "entry")
        worker = _field(obj, "worker", int, "entry")
        time_ns = _field(obj, "time_ns", int, "entry")
        etype = _field(obj, "type", str, "entry")
        if etype not in _ENTRY_TYPES:
            raise HistoryError(
                f"field 'type' is {etype!r}",
                f"Use one of {', '.join(_ENTRY_TYPES)}.",
            )
        f = _field(obj, "f", str, "entry")
        if f not in _OP_NAMES:
            raise HistoryError(f"field 'f' is {f!r}", f"Use one of {', '.join(_OP_NAMES)}.")
        op_obj = _expect_object(obj.get("op"), "field 'op'")
        op = _OP_CLASSES[f](
            **{
                name: _field(op_obj, name, typ, "op", nullable=nullable)
                for name, typ, nullable in _OP_FIELDS[f]
            }
        )
        meta_obj = obj.get("meta")
        meta: WriteMeta | None = None
        if meta_obj is not None:
            m = _expect_object(meta_obj, "field 'meta'")
            paraphrase = _field(m, "paraphrase", str, "meta")
            if paraphrase not in _PARAPHRASES:
                raise HistoryError(
                    f"field 'meta.paraphrase' is {paraphrase!r}",
                    f"Use one of {', '.join(_PARAPHRASES)}.",
                )
            meta = WriteMeta(
                fact=_field(m, "fact", str, "meta"),
                slot=_field(m, "slot", str, "meta"),
                paraphrase=cast(Paraphrase, paraphrase),
            )
        raw = obj.get("result")
        result: Result
        if raw is None or isinstance(raw, str):
            result = raw
        elif isinstance(raw, list):
            result = tuple(
                Record(
                    **{
                        name: _field(_expect_object(r, "a record in 'result'"), name, typ, "record")
                        for name, typ, _ in _RECORD_FIELDS
                    }
                )
                for r in raw
            )
        elif isinstance(raw, dict):
            result = Ack(
                **{
                    name: _field(raw, name, typ, "result", nullable=nullable)
                    for name, typ, nullable in _ACK_FIELDS
                }
            )
        else:
            raise HistoryError(
                f"field 'result' is {type(raw).__name__}",
                "Use null, an error string, an Ack object or a list of records.",
            )
        return cls(
            index=index,
            worker=worker,
            time_ns=time_ns,
            type=cast(EntryType, etype),
            f=cast(OpName, f),
            op=op,
            result=result,
            meta=meta,
        )


def _expect_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise HistoryError(
            f"{what} is {type(value).__name__}, not an object",
            "Each history line must be one JSON object as Entry.to_dict() writes it.",
        )
    return cast(dict[str, Any], value)


def _field(obj: dict[str, Any], name: str, typ: type, where: str, *, nullable: bool = False) -> Any:
    value = obj.get(name)
    if value is None:
        if nullable:
            return None
        raise HistoryError(f"field '{where}.{name}' is missing", "Every entry needs it.")
    # bool is an int in Python; a true/false where a number belongs is still a mistake.
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise HistoryError(
            f"field '{where}.{name}' is {value!r} (type {type(value).__name__})",
            f"It must be of type {typ.__name__}.",
        )
    return value


def _shapes(fields: tuple[tuple[str, type, bool], ...]) -> frozenset[tuple[type, ...]]:
    """Every tuple of value types that an object with these fields may have."""
    options = [(typ, type(None)) if nullable else (typ,) for _, typ, nullable in fields]
    return frozenset(itertools.product(*options))


_TOP_SHAPE = (int, int, int, str, str)
_FAST_OPS = {
    f: (_OP_CLASSES[f], tuple(name for name, _, _ in fields), _shapes(fields))
    for f, fields in _OP_FIELDS.items()
}
_RECORD_NAMES = tuple(name for name, _, _ in _RECORD_FIELDS)
_RECORD_SHAPES = _shapes(_RECORD_FIELDS)
_ACK_NAMES = tuple(name for name, _, _ in _ACK_FIELDS)
_ACK_SHAPES = _shapes(_ACK_FIELDS)
_META_NAMES = ("fact", "slot", "paraphrase")


def _decode_well_formed(data: object, strings: dict[str, str] | None = None) -> Entry | None:
    """Decode an entry that is exactly as :meth:`Entry.to_dict` writes it, else None.

    Reading a long history is mostly this function, so it compares whole tuples of
    types at C speed instead of checking field by field; anything unexpected falls back
    to the field-by-field decoder, which says precisely what is wrong.

    ``strings`` shares, across the entries of one file, the few distinct texts that
    recur on every line (entry type and f, namespaces, entity ids, attribute names,
    slots, paraphrase levels), where JSON decoding makes a new string each time. That
    saves memory, and lets a checker's lookups by them reuse each string's hash:
    checking a history read from a file was a fifth slower than one built in memory.
    """
    if type(data) is not dict:
        return None
    get = data.get
    top: tuple[Any, ...] = (get("index"), get("worker"), get("time_ns"), get("type"), get("f"))
    if tuple(map(type, top)) != _TOP_SHAPE or top[3] not in _ENTRY_TYPES:
        return None
    spec = _FAST_OPS.get(top[4])
    op_obj = get("op")
    if spec is None or type(op_obj) is not dict:
        return None
    op_class, names, shapes = spec
    values: tuple[Any, ...] = tuple(map(op_obj.get, names))
    if tuple(map(type, values)) not in shapes:
        return None
    if strings is not None:
        share = strings.setdefault
        # Every payload starts with namespace and entity_id; a write's attribute follows.
        shared = 3 if op_class is Write else 2
        values = (*map(share, values[:shared], values[:shared]), *values[shared:])
    meta = None
    meta_obj = get("meta")
    if meta_obj is not None:
        if type(meta_obj) is not dict:
            return None
        m: tuple[Any, ...] = tuple(map(meta_obj.get, _META_NAMES))
        if tuple(map(type, m)) != (str, str, str) or m[2] not in _PARAPHRASES:
            return None
        if strings is not None:
            m = (m[0], *map(strings.setdefault, m[1:], m[1:]))
        meta = WriteMeta(*m)
    raw = get("result")
    result: Result
    if raw is None or type(raw) is str:
        result = raw
    elif type(raw) is list:
        records = []
        for r in raw:
            if type(r) is not dict:
                return None
            rv: tuple[Any, ...] = tuple(map(r.get, _RECORD_NAMES))
            if tuple(map(type, rv)) not in _RECORD_SHAPES:
                return None
            if strings is not None:
                rv = (*map(strings.setdefault, rv[:2], rv[:2]), *rv[2:])
            records.append(Record(*rv))
        result = tuple(records)
    elif type(raw) is dict:
        av: tuple[Any, ...] = tuple(map(raw.get, _ACK_NAMES))
        if tuple(map(type, av)) not in _ACK_SHAPES:
            return None
        result = Ack(*av)
    else:
        return None
    index, worker, time_ns, etype, f = top
    if strings is not None:
        etype, f = strings.setdefault(etype, etype), strings.setdefault(f, f)
    return Entry(index, worker, time_ns, etype, f, op_class(*values), result, meta)


class _Validator:
    """Checks, one entry at a time, that a sequence of entries is a well-formed history.

    Shared by :class:`History` (whole sequences, possibly read from a file, so the
    errors name lines) and :class:`HistoryRecorder` (entries as they are made).
    """

    __slots__ = ("allow_incomplete", "last_time", "outstanding", "partner", "path")

    def __init__(self, *, path: str | None = None, allow_incomplete: bool = False) -> None:
        self.path = path
        self.allow_incomplete = allow_incomplete
        self.outstanding: dict[int, Entry] = {}
        self.partner: list[int] = []
        self.last_time = -(2**63)

    def _error(self, entry: Entry, problem: str, fix: str) -> HistoryError:
        if self.path is not None:
            return HistoryError(problem, fix, path=self.path, line=entry.index + 1)
        return HistoryError(f"entry {entry.index}: {problem}", fix)

    def add(self, entry: Entry) -> None:
        expected = len(self.partner)
        if entry.index != expected:
            raise self._error(
                entry,
                f"index is {entry.index}, expected {expected}",
                "Indices are dense from 0 in history order; do not drop or reorder lines.",
            )
        if entry.time_ns < self.last_time:
            raise self._error(
                entry,
                f"time_ns {entry.time_ns} is earlier than the previous entry's {self.last_time}",
                "Take time_ns from one monotonic clock while assigning the index.",
            )
        op_f = _F_OF_TYPE.get(type(entry.op))
        if op_f != entry.f:
            raise self._error(
                entry,
                f"f is {entry.f!r} but op is a {type(entry.op).__name__}",
                "Make f name the payload's kind (write, delete, restore or read).",
            )
        if entry.f == "write" and entry.meta is None:
            raise self._error(
                entry,
                "a write has no meta",
                "Record the generator's fact, slot and paraphrase level with every write.",
            )
        if entry.f != "write" and entry.meta is not None:
            raise self._error(
                entry, f"a {entry.f} carries meta", "Only writes carry meta; drop it."
            )
        if entry.type == "invoke":
            self._add_invocation(entry)
        else:
            self._add_completion(entry)
        self.last_time = entry.time_ns

    def _add_invocation(self, entry: Entry) -> None:
        if entry.result is not None:
            raise self._error(
                entry, "an invocation has a result", "Only completions carry results."
            )
        busy = self.outstanding.get(entry.worker)
        if busy is not None:
            raise self._error(
                entry,
                f"worker {entry.worker} invokes while its op {busy.index} is outstanding",
                "A worker runs one operation at a time; complete it (info if unsure) first.",
            )
        self.outstanding[entry.worker] = entry
        self.partner.append(-1)

    def _add_completion(self, entry: Entry) -> None:
        inv = self.outstanding.pop(entry.worker, None)
        if inv is None:
            raise self._error(
                entry,
                f"worker {entry.worker} completes an operation it never invoked",
                "Each completion must follow its own worker's invocation.",
            )
        # The recorder passes the invocation's own objects, so identity settles it there.
        if (
            inv.f != entry.f
            or (inv.op is not entry.op and inv.op != entry.op)
            or (inv.meta is not entry.meta and inv.meta != entry.meta)
        ):
            raise self._error(
                entry,
                f"the completion does not repeat op {inv.index}'s f, op and meta",
                "Copy the invocation's f, op and meta into its completion.",
            )
        _check_result(entry, self._error)
        self.partner[inv.index] = entry.index
        self.partner.append(inv.index)

    def finish(self) -> None:
        if not self.outstanding or self.allow_incomplete:
            return
        first = min(self.outstanding.values(), key=lambda e: e.index)
        others = len(self.outstanding) - 1
        raise self._error(
            first,
            f"op {first.index} (worker {first.worker}) was invoked but never completed"
            + (f", nor were {others} other operation(s)" if others else ""),
            "A run must complete every operation, as info when the outcome is unknown; "
            "pass allow_incomplete=True to check a crashed run's history anyway.",
        )


def _check_result(entry: Entry, error: Callable[[Entry, str, str], HistoryError]) -> None:
    res = entry.result
    what = f"{'a' if entry.type == 'fail' else 'an'} {entry.type} {entry.f}"
    if entry.type == "info" or (entry.type == "fail" and isinstance(res, str)):
        if not isinstance(res, str):
            raise error(
                entry,
                f"{what} has result {res!r}",
                "Record the error text (type and message) as the result.",
            )
    elif entry.f == "read":
        if entry.type == "fail" or not (
            isinstance(res, tuple) and all(isinstance(r, Record) for r in res)
        ):
            raise error(
                entry,
                f"{what} has result {res!r}",
                "An ok read carries the tuple of Records it returned, in serving order; "
                "a read that failed carries the error text.",
            )
    elif not isinstance(res, Ack) or res.applied != (entry.type == "ok"):
        want = "Ack(applied=True)" if entry.type == "ok" else "Ack(applied=False) or error text"
        raise error(
            entry,
            f"{what} has result {res!r}",
            f"{what[0].upper()}{what[1:]} must carry {want}; an exception is an info.",
        )


class History(Sequence[Entry]):
    """A validated, immutable history: entries in index order, with their pairing.

    Validation guarantees that indices are dense from 0, that ``time_ns`` never goes
    back, that every completion follows its own worker's invocation and repeats its
    ``op``, that a worker has one operation outstanding at a time, and that results
    have the shape their entry type calls for. Unless ``allow_incomplete`` is set, every
    invocation has its completion; with it, unmatched invocations (a crashed run) are
    kept and checkers treat them as possibly applied at any time, like ``info``.

    ``defects`` lists what had to be dropped to read a damaged file (a cut-off last
    line); it is empty for a whole history.
    """

    __slots__ = ("_entries", "_partner", "defects")

    def __init__(
        self,
        entries: Iterable[Entry],
        *,
        allow_incomplete: bool = False,
        defects: Sequence[str] = (),
        _path: str | None = None,
    ) -> None:
        self._entries = tuple(entries)
        validator = _Validator(path=_path, allow_incomplete=allow_incomplete)
        for entry in self._entries:
            validator.add(entry)
        validator.finish()
        self._partner = validator.partner
        self.defects: tuple[str, ...] = tuple(defects)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Entry, ...]: ...

    def __getitem__(self, index: int | slice) -> Entry | tuple[Entry, ...]:
        return self._entries[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, History):
            return NotImplemented
        return self._entries == other._entries

    def __hash__(self) -> int:
        return hash(self._entries)

    def __repr__(self) -> str:
        return f"<History of {len(self._entries)} entries>"

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self._entries

    def partner(self, entry: Entry | int) -> Entry | None:
        """The completion of an invocation, or the invocation of a completion.

        ``None`` only for an invocation that never completed (``allow_incomplete``).
        """
        index = entry if isinstance(entry, int) else entry.index
        other = self._partner[index]
        return None if other < 0 else self._entries[other]

    def pairs(self) -> Iterator[tuple[Entry, Entry | None]]:
        """Each operation as ``(invocation, completion)``, in invocation order."""
        entries = self._entries
        for entry, other in zip(entries, self._partner, strict=True):
            if entry.type == "invoke":
                yield entry, (None if other < 0 else entries[other])

    def write_jsonl(self, path: str | os.PathLike[str]) -> None:
        """Save the history in the format :func:`read_history` reads."""
        with open(path, "w", encoding="utf-8") as out:
            for entry in self._entries:
                out.write(_encode(entry))


def _encode(entry: Entry) -> str:
    """One line of ``history.jsonl``: ``entry.to_dict()`` as compact JSON.

    The recorder writes two lines per operation while a run goes, and ``json.dumps``
    (which builds a new encoder on every call) was most of the recorder's cost. So an
    entry whose fields all have their declared types is written out directly, as the
    very text ``json.dumps`` gives, and any other still goes through ``json.dumps``;
    tests/invariants/test_history_encoding.py holds both to the same output.
    """
    try:
        return _encode_typed(entry)
    except TypeError:
        return json.dumps(entry.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"


def _encode_typed(entry: Entry) -> str:
    """Raises TypeError on a field that is not of its declared type."""
    res = entry.result
    if isinstance(res, Ack):
        result = (
            f'{{"applied":{_bool(res.applied)},"version":{_int_or_null(res.version)},'
            f'"reason":{_str_or_null(res.reason)}}}'
        )
    elif isinstance(res, tuple):
        result = "[" + ",".join([_encode_record(r) for r in res]) + "]"
    else:
        result = _str_or_null(res)
    meta = entry.meta
    if meta is None:
        meta_text = "null"
    else:
        meta_text = (
            f'{{"fact":{_str(meta.fact)},"slot":{_str(meta.slot)},'
            f'"paraphrase":{_str(meta.paraphrase)}}}'
        )
    return (
        f'{{"index":{_int(entry.index)},"worker":{_int(entry.worker)},'
        f'"time_ns":{_int(entry.time_ns)},"type":{_str(entry.type)},"f":{_str(entry.f)},'
        f'"op":{_OP_ENCODERS[entry.f](entry.op)},"result":{result},"meta":{meta_text}}}\n'
    )


def _encode_write(op: Any) -> str:
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"attribute":{_str(op.attribute)},"value":{_str(op.value)},'
        f'"causal_seq":{_int(op.causal_seq)},"op_id":{_str(op.op_id)},'
        f'"source":{_str_or_null(op.source)}}}'
    )


def _encode_delete(op: Any) -> str:
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"causal_seq":{_int(op.causal_seq)},"op_id":{_str(op.op_id)},'
        f'"reason":{_str_or_null(op.reason)}}}'
    )


def _encode_restore(op: Any) -> str:
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"causal_seq":{_int(op.causal_seq)},"op_id":{_str(op.op_id)}}}'
    )


def _encode_read(op: Any) -> str:
    return f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)}}}'


def _encode_record(r: Record) -> str:
    return (
        f'{{"entity_id":{_str(r.entity_id)},"attribute":{_str(r.attribute)},'
        f'"value":{_str(r.value)},"causal_seq":{_int(r.causal_seq)},'
        f'"version":{_int(r.version)}}}'
    )


_OP_ENCODERS: dict[str, Callable[[Any], str]] = {
    "write": _encode_write,
    "delete": _encode_delete,
    "restore": _encode_restore,
    "read": _encode_read,
}
_str = encode_basestring
"""A str as JSON, exactly as json.dumps(ensure_ascii=False) writes it; TypeError else."""


def _int(value: object) -> str:
    # A bool is an int to Python, but json.dumps writes it as true/false.
    if type(value) is not int:
        raise TypeError(value)
    return str(value)


def _bool(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    raise TypeError(value)


def _int_or_null(value: object) -> str:
    return "null" if value is None else _int(value)


def _str_or_null(value: object) -> str:
    return "null" if value is None else _str(value)  # type: ignore[arg-type]


def read_history(path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> History:
    """Load and validate a ``history.jsonl`` written by :class:`HistoryRecorder`.

    A last line cut short (the run crashed while writing it) raises
    :class:`HistoryError` naming that line, rather than being dropped in silence;
    with ``allow_incomplete=True`` it is dropped, recorded in ``History.defects``, and
    operations left without a completion are kept as such. Python's cyclic garbage
    collector is paused while the file is decoded.
    """
    name = os.fspath(path)
    with open(path, encoding="utf-8") as src:
        text = src.read()
    entries: list[Entry] = []
    defects: list[str] = []
    strings: dict[str, str] = {}
    with _collector_paused(kept=True):
        lines = _parse_lines(text, name, defects, allow_incomplete)
        for number, data in enumerate(lines, start=1):
            entry = _decode_well_formed(data, strings)
            if entry is None:
                try:
                    entry = Entry.from_dict(data)
                except HistoryError as exc:
                    raise HistoryError(exc.problem, exc.fix, path=name, line=number) from exc
            entries.append(entry)
        return History(entries, allow_incomplete=allow_incomplete, defects=defects, _path=name)


@contextmanager
def _collector_paused(*, kept: bool = False) -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building long-lived data.

    Reading or checking a history allocates millions of objects that all stay alive
    until it ends, so collection passes find nothing to free and only re-scan them,
    again and again: they more than doubled the time to read a history and made
    checking one about 1.6 times slower. Reference counting still frees what it can.

    ``kept`` says that what was built outlives the call (a :class:`History`). It then
    joins the oldest generation directly (``gc.freeze()`` then ``gc.unfreeze()`` moves
    every tracked object there at no cost) instead of being scanned as young objects
    when the collector resumes, a tenth of the time to read a history. Not for a check:
    its index is garbage once the verdict is out, and garbage moved there uncounted
    would wait for a full collection. Skipped if the program froze objects itself.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if kept and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _parse_lines(text: str, name: str, defects: list[str], allow_incomplete: bool) -> list[Any]:
    """The JSON value of each line; one parse of the whole file when it is well formed."""
    if text.endswith("\n"):
        try:
            values = json.loads("[" + text[:-1].replace("\n", ",") + "]")
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(values, list) and len(values) == text.count("\n"):
                return values
    values = []
    lines = text.split("\n")
    # A file written whole ends with "\n", leaving one empty string after the split.
    last = len(lines) - 1 if lines[-1] == "" else len(lines)
    for number, line in enumerate(lines[:last], start=1):
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number == last and number == len(lines):
                shown = line if len(line) <= 40 else line[:37] + "..."
                problem = (
                    f"the last line is cut short ({shown!r}); "
                    "the run that wrote it probably crashed mid-write"
                )
                if allow_incomplete:
                    defects.append(f"line {number}: {problem}")
                    break
                raise HistoryError(
                    problem,
                    "Delete that line to check the rest, or pass allow_incomplete=True.",
                    path=name,
                    line=number,
                ) from exc
            raise HistoryError(
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                "Each line must be one JSON object as HistoryRecorder writes it.",
                path=name,
                line=number,
            ) from exc
    return values


class HistoryRecorder:
    """Builds a history while a run goes, thread-safely, streaming it to ``history.jsonl``.

    Workers call :meth:`invoke` before an operation and one of :meth:`ok`,
    :meth:`fail` or :meth:`info` after it. Under one lock the recorder assigns the
    index and the time, validates the entry against the history so far, appends it to
    the file (flushed per line, so a crash loses at most that line), keeps it in memory
    if ``keep`` is set, and passes it to each of ``observers`` in index order, which is
    how online checkers see the run as it happens. Observers run under the lock: they
    must be quick and must not call back into the recorder.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        keep: bool = True,
        clock: Callable[[], int] = time.monotonic_ns,
        observers: Sequence[Callable[[Entry], None]] = (),
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._keep = keep
        self._entries: list[Entry] = []
        self._validator = _Validator()
        self._observers = tuple(observers)
        self._out: IO[str] | None = None
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self._out = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; entries kept in memory stay available."""
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None

    @property
    def outstanding(self) -> int:
        """How many operations are invoked and not yet completed."""
        return len(self._validator.outstanding)

    def __len__(self) -> int:
        return len(self._validator.partner)

    def invoke(self, worker: int, op: Payload, *, meta: WriteMeta | None = None) -> Entry:
        """Record that ``worker`` starts ``op``; returns the invocation to complete later."""
        f = _F_OF_TYPE.get(type(op))
        if f is None:
            raise HistoryError(
                f"op is a {type(op).__name__}",
                "Pass a Write, Delete, Restore or Read.",
            )
        return self._append(worker, "invoke", f, op, None, meta)

    def ok(self, invocation: Entry, result: Ack | Sequence[Record]) -> Entry:
        """Record that the operation took effect: its Ack, or a read's records."""
        if not isinstance(result, Ack):
            result = tuple(result)
        return self._complete(invocation, "ok", result)

    def fail(self, invocation: Entry, result: Ack | str) -> Entry:
        """Record that the operation definitely did not take effect."""
        return self._complete(invocation, "fail", result)

    def info(self, invocation: Entry, error: BaseException | str) -> Entry:
        """Record that the outcome is unknown: the operation raised or timed out."""
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return self._complete(invocation, "info", text)

    def history(self) -> History:
        """The entries so far as a :class:`History` (operations in flight included)."""
        if not self._keep:
            raise HistoryError(
                "this recorder was made with keep=False and holds no entries",
                "Read the file back with read_history(), or record with keep=True.",
            )
        with self._lock:
            entries = list(self._entries)
        return History(entries, allow_incomplete=True)

    def _complete(self, invocation: Entry, etype: EntryType, result: Result) -> Entry:
        if invocation.type != "invoke":
            raise HistoryError(
                f"entry {invocation.index} is a completion, not an invocation",
                "Complete the entry that invoke() returned.",
            )
        return self._append(
            invocation.worker, etype, invocation.f, invocation.op, result, invocation.meta
        )

    def _append(
        self,
        worker: int,
        etype: EntryType,
        f: OpName,
        op: Payload,
        result: Result,
        meta: WriteMeta | None,
    ) -> Entry:
        with self._lock:
            entry = Entry(
                index=len(self._validator.partner),
                worker=worker,
                time_ns=self._clock(),
                type=etype,
                f=f,
                op=op,
                result=result,
                meta=meta,
            )
            self._validator.add(entry)
            if self._out is not None:
                self._out.write(_encode(entry))
                self._out.flush()
            if self._keep:
                self._entries.append(entry)
            for observe in self._observers:
                observe(entry)
            return entry
