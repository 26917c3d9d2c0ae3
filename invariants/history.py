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

The history is written to ``history.jsonl`` as it grows, one JSON object per line,
flushed line by line or, with :class:`HistoryRecorder`'s ``flush_interval_s``, in groups
at least that often; either way a crash loses only the last lines, never one before a
line that reached the file. Checking a run means reading that file back
(:func:`read_history`) and feeding it to the checkers.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO, Any, Literal, TypeAlias, cast, get_args, overload

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument, MemcertError
from invariants.levels import PARAPHRASE_LEVELS, Paraphrase

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
    "collector_paused",
    "describe_error",
    "read_history",
]

EntryType: TypeAlias = Literal["invoke", "ok", "fail", "info"]
OpName: TypeAlias = Literal["write", "delete", "restore", "read"]

_ENTRY_TYPES: tuple[str, ...] = get_args(EntryType)
_OP_NAMES: tuple[str, ...] = get_args(OpName)
_PARAPHRASES: tuple[str, ...] = PARAPHRASE_LEVELS


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


@dataclass(frozen=True, slots=True, init=False)
class Read:
    """The payload of a read: which entity, in which namespace."""

    namespace: str
    entity_id: str

    def __init__(self, namespace: str, entity_id: str) -> None:
        # Through the slots' descriptors, as Entry does (see there).
        _set_read_namespace(self, namespace)
        _set_read_entity_id(self, entity_id)


@dataclass(frozen=True, slots=True, init=False)
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

    def __init__(self, fact: str, slot: str, paraphrase: Paraphrase = "none") -> None:
        # Through the slots' descriptors, as Entry does (see there).
        _set_meta_fact(self, fact)
        _set_meta_slot(self, slot)
        _set_meta_paraphrase(self, paraphrase)


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


@dataclass(frozen=True, slots=True, init=False)
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

    def __init__(
        self,
        index: int,
        worker: int,
        time_ns: int,
        type: EntryType,
        f: OpName,
        op: Payload,
        result: Result = None,
        meta: WriteMeta | None = None,
    ) -> None:
        # What the generated __init__ of a frozen dataclass does, but through each
        # slot's descriptor instead of object.__setattr__: half the cost, and a run or
        # a read of its history makes millions of these.
        _set_index(self, index)
        _set_worker(self, worker)
        _set_time_ns(self, time_ns)
        _set_type(self, type)
        _set_f(self, f)
        _set_op(self, op)
        _set_result(self, result)
        _set_meta(self, meta)

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


_set_read_namespace = Read.__dict__["namespace"].__set__
_set_read_entity_id = Read.__dict__["entity_id"].__set__
_set_meta_fact = WriteMeta.__dict__["fact"].__set__
_set_meta_slot = WriteMeta.__dict__["slot"].__set__
_set_meta_paraphrase = WriteMeta.__dict__["paraphrase"].__set__
_set_index = Entry.__dict__["index"].__set__
_set_worker = Entry.__dict__["worker"].__set__
_set_time_ns = Entry.__dict__["time_ns"].__set__
_set_type = Entry.__dict__["type"].__set__
_set_f = Entry.__dict__["f"].__set__
_set_op = Entry.__dict__["op"].__set__
_set_result = Entry.__dict__["result"].__set__
_set_meta = Entry.__dict__["meta"].__set__


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
    saves memory, and lets a checker's lookups by them reuse each string's hash, so a
    history read from a file checks as fast as one built in memory.
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

    def add_invocation(self, entry: Entry) -> None:
        """:meth:`add` for an invocation :class:`HistoryRecorder` built itself: its index
        is the next one, its ``f`` names its op and it has no result, by construction."""
        if entry.time_ns < self.last_time or (entry.f == "write") == (entry.meta is None):
            self.add(entry)  # the general path names the problem
            return
        self._add_invocation(entry)
        self.last_time = entry.time_ns

    def add_completion(self, entry: Entry, invocation: Entry) -> None:
        """:meth:`add` for a completion :class:`HistoryRecorder` built from
        ``invocation``, repeating its f, op and meta; anything but the completion of
        the worker's outstanding invocation takes the general path."""
        if entry.time_ns < self.last_time or self.outstanding.get(entry.worker) is not invocation:
            self.add(entry)
            return
        _check_result(entry, self._error)  # before any change: a refused entry leaves none
        del self.outstanding[entry.worker]
        self.partner[invocation.index] = entry.index
        self.partner.append(invocation.index)
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
        inv = self.outstanding.get(entry.worker)
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
        del self.outstanding[entry.worker]  # only now: a refused entry changes nothing
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
    etype = entry.type
    if etype == "info" or (etype == "fail" and isinstance(res, str)):
        if isinstance(res, str):
            return
        fix = "Record the error text (type and message) as the result."
    elif entry.f == "read":
        if (
            etype == "ok"
            and isinstance(res, tuple)
            and all(map(isinstance, res, itertools.repeat(Record)))
        ):
            return
        fix = (
            "An ok read carries the tuple of Records it returned, in serving order; "
            "a read that failed carries the error text."
        )
    else:
        if isinstance(res, Ack) and res.applied == (etype == "ok"):
            return
        want = "Ack(applied=True)" if etype == "ok" else "Ack(applied=False) or error text"
        what = _what(entry)
        fix = f"{what[0].upper()}{what[1:]} must carry {want}; an exception is an info."
    raise error(entry, f"{_what(entry)} has result {res!r}", fix)


def describe_error(error: BaseException) -> str:
    """How a history records an exception: its type and message, one line a reader of
    ``history.jsonl`` can act on without the traceback."""
    return f"{type(error).__name__}: {error}"


def _what(entry: Entry) -> str:
    """'an ok write', 'a fail read'..., as messages name an entry."""
    return f"{'a' if entry.type == 'fail' else 'an'} {entry.type} {entry.f}"


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


def _encode_typed(entry: Entry, payload: tuple[str, str] | None = None) -> str:
    """Raises TypeError on a field that is not of its declared type.

    ``payload`` is the entry's op and meta already encoded (:func:`_encode_payload`),
    which a completion shares with its invocation. Ints are checked by exact type: a
    bool is an int to Python, but json.dumps writes it as true/false.
    """
    op_text, meta_text = _encode_payload(entry) if payload is None else payload
    index, worker, time_ns = entry.index, entry.worker, entry.time_ns
    if type(index) is not int or type(worker) is not int or type(time_ns) is not int:
        raise TypeError(entry)
    res = entry.result
    if res is None:
        result = "null"
    elif isinstance(res, Ack):
        result = _encode_ack(res)
    elif isinstance(res, tuple):
        result = "[" + ",".join([_encode_record(r) for r in res]) + "]"
    else:
        result = _str(res)
    return (
        f'{{"index":{index},"worker":{worker},"time_ns":{time_ns},"type":{_str(entry.type)},'
        f'"f":{_str(entry.f)},"op":{op_text},"result":{result},"meta":{meta_text}}}\n'
    )


def _encode_payload(entry: Entry) -> tuple[str, str]:
    """The entry's op and meta as JSON; raises TypeError like :func:`_encode_typed`."""
    meta = entry.meta
    if meta is None:
        meta_text = "null"
    else:
        meta_text = (
            f'{{"fact":{_str(meta.fact)},"slot":{_str(meta.slot)},'
            f'"paraphrase":{_str(meta.paraphrase)}}}'
        )
    return _OP_ENCODERS[entry.f](entry.op), meta_text


def _encode_ack(res: Ack) -> str:
    applied, version, reason = res.applied, res.version, res.reason
    if applied is True:
        applied_text = "true"
    elif applied is False:
        applied_text = "false"
    else:
        raise TypeError(applied)
    if version is not None and type(version) is not int:
        raise TypeError(version)
    return (
        f'{{"applied":{applied_text},"version":{"null" if version is None else version},'
        f'"reason":{"null" if reason is None else _str(reason)}}}'
    )


def _encode_write(op: Any) -> str:
    seq, source = op.causal_seq, op.source
    if type(seq) is not int:
        raise TypeError(seq)
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"attribute":{_str(op.attribute)},"value":{_str(op.value)},'
        f'"causal_seq":{seq},"op_id":{_str(op.op_id)},'
        f'"source":{"null" if source is None else _str(source)}}}'
    )


def _encode_delete(op: Any) -> str:
    seq, reason = op.causal_seq, op.reason
    if type(seq) is not int:
        raise TypeError(seq)
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"causal_seq":{seq},"op_id":{_str(op.op_id)},'
        f'"reason":{"null" if reason is None else _str(reason)}}}'
    )


def _encode_restore(op: Any) -> str:
    seq = op.causal_seq
    if type(seq) is not int:
        raise TypeError(seq)
    return (
        f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)},'
        f'"causal_seq":{seq},"op_id":{_str(op.op_id)}}}'
    )


def _encode_read(op: Any) -> str:
    return f'{{"namespace":{_str(op.namespace)},"entity_id":{_str(op.entity_id)}}}'


def _encode_record(r: Record) -> str:
    seq, version = r.causal_seq, r.version
    if type(seq) is not int or type(version) is not int:
        raise TypeError(r)
    return (
        f'{{"entity_id":{_str(r.entity_id)},"attribute":{_str(r.attribute)},'
        f'"value":{_str(r.value)},"causal_seq":{seq},"version":{version}}}'
    )


_OP_ENCODERS: dict[str, Callable[[Any], str]] = {
    "write": _encode_write,
    "delete": _encode_delete,
    "restore": _encode_restore,
    "read": _encode_read,
}
_str = encode_basestring
"""A str as JSON, exactly as json.dumps(ensure_ascii=False) writes it; TypeError else."""


def read_history(path: str | os.PathLike[str], *, allow_incomplete: bool = False) -> History:
    """Load and validate a ``history.jsonl`` written by :class:`HistoryRecorder`.

    A last line cut short (the run crashed while writing it) raises
    :class:`HistoryError` naming that line, rather than being dropped in silence;
    with ``allow_incomplete=True`` it is dropped, recorded in ``History.defects``, and
    operations left without a completion are kept as such. Python's cyclic garbage
    collector is paused while the file is decoded.

    The file is decoded :data:`_READ_CHUNK_LINES` lines at a time: decoded whole, the
    text and its JSON values peaked at four times the memory of the entries they
    became, which a long chaos run could not afford.
    """
    name = os.fspath(path)
    entries: list[Entry] = []
    defects: list[str] = []
    strings: dict[str, str] = {}
    with open(path, encoding="utf-8") as src, collector_paused(kept=True):
        first = 1
        while lines := list(itertools.islice(src, _READ_CHUNK_LINES)):
            values = _parse_lines(lines, first, name, defects, allow_incomplete)
            for number, data in enumerate(values, start=first):
                entry = _decode_well_formed(data, strings)
                if entry is None:
                    try:
                        entry = Entry.from_dict(data)
                    except HistoryError as exc:
                        raise HistoryError(exc.problem, exc.fix, path=name, line=number) from exc
                entries.append(entry)
            first += len(lines)
        return History(entries, allow_incomplete=allow_incomplete, defects=defects, _path=name)


_READ_CHUNK_LINES = 8192


@contextmanager
def collector_paused(*, kept: bool = False) -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building long-lived data.

    Reading or checking a history allocates millions of objects that all stay alive
    until it ends, so collection passes find nothing to free and only re-scan them,
    again and again, which slows reading and checking severely. Reference counting
    still frees what it can. The checkers pause it too, around a check.

    ``kept`` says that what was built outlives the call (a :class:`History`). It then
    joins the oldest generation directly (``gc.freeze()`` then ``gc.unfreeze()`` moves
    every tracked object there at no cost) instead of being scanned as young objects
    when the collector resumes. Not for a check: its index is garbage once the verdict
    is out, and garbage moved there uncounted would wait for a full collection. Skipped
    if the program froze objects itself.
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


def _parse_lines(
    lines: list[str], first: int, name: str, defects: list[str], allow_incomplete: bool
) -> list[Any]:
    """The JSON value of each line (numbered from ``first``); one parse for the lot when
    they are well formed. Only the file's last line can lack its newline."""
    if lines[-1].endswith("\n"):
        try:
            values = json.loads("[" + ",".join([line[:-1] for line in lines]) + "]")
        except json.JSONDecodeError:
            pass
        else:
            if isinstance(values, list) and len(values) == len(lines):
                return values
    values = []
    for number, line in enumerate(lines, start=first):
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if not line.endswith("\n"):
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
    index and the time, validates the entry against the history so far, writes or
    queues its line, keeps it in memory if ``keep`` is set, and passes it to each of
    ``observers`` in index order. Observers run under the lock: they must be quick and
    must not call back into the recorder.

    ``flush_interval_s`` bounds how long an entry may wait before its line reaches the
    file. At 0 (the default) every line is written and flushed before the call returns,
    so that a crash loses at most the line being written. Above 0, a thread of the
    recorder takes the queued entries, encodes their lines, writes and flushes them at
    least that often (sooner after 4,096 entries): a reader tailing the file sees each
    line within about ``flush_interval_s``, and a crash of the whole process can lose
    the lines of that last interval, but never a line before one that reached the file.
    Encoding and writing a line per entry was most of what recording cost a worker.

    ``deferred_observers`` (which need ``flush_interval_s``) see every entry in index
    order too, but on that thread, once its line is written: at most about
    ``flush_interval_s`` behind the run, and a batch at a time, which costs much less
    than an entry at a time between a backend's calls. Online checkers fit; anything
    that must see an entry before the next call returns does not.

    :meth:`close` (and the ``with`` block's exit, on an exception too) writes and shows
    the deferred observers every entry still queued, and then raises whatever a
    deferred observer raised; a broken observer never stops the lines being written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        keep: bool = True,
        clock: Callable[[], int] = time.monotonic_ns,
        observers: Sequence[Callable[[Entry], None]] = (),
        flush_interval_s: float = 0.0,
        deferred_observers: Sequence[Callable[[Entry], None]] = (),
    ) -> None:
        if (
            not isinstance(flush_interval_s, int | float)
            or isinstance(flush_interval_s, bool)
            or not 0 <= flush_interval_s <= _MAX_FLUSH_INTERVAL_S
        ):
            raise InvalidArgument(
                f"flush_interval_s={flush_interval_s!r} (type {type(flush_interval_s).__name__})"
                f" is not a number of seconds from 0 to {_MAX_FLUSH_INTERVAL_S:g}; pass 0 to "
                "flush every line"
            )
        deferred = tuple(deferred_observers)
        if deferred and not flush_interval_s:
            raise InvalidArgument(
                "deferred_observers need flush_interval_s > 0, which bounds how far behind the "
                "run they are; pass both, or pass them as observers"
            )
        self._lock = threading.Lock()
        self._clock = clock
        self._keep = keep
        self._entries: list[Entry] = []
        self._validator = _Validator()
        self._observers = tuple(observers)
        self._out: IO[str] | None = None
        self._writer: _Writer | None = None
        self._queue: list[Entry] | None = None
        self._payloads: dict[int, tuple[Entry, tuple[str, str] | None]] = {}
        self.path = None if path is None else Path(path)
        out = None
        if self.path is not None:
            out = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        if flush_interval_s and (out is not None or deferred):
            self._writer = _Writer(out, deferred, self._lock, flush_interval_s)
            self._queue = self._writer.queue
            self._finalizer = weakref.finalize(self, self._writer.close)
        else:
            self._out = out

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write out every line still queued and close the file; entries kept in memory
        stay available."""
        with self._lock:
            out, self._out = self._out, None
            writer, self._writer, self._queue = self._writer, None, None
        if out is not None:
            out.close()
        if writer is not None:
            self._finalizer.detach()
            writer.close()

    @property
    def outstanding(self) -> int:
        """How many operations are invoked and not yet completed."""
        return len(self._validator.outstanding)

    def outstanding_since(self, index: int) -> int:
        """How many operations invoked at entry ``index`` or later are not yet completed:
        after a service was frozen when the history was ``index`` entries long, those
        are the operations it cannot have answered."""
        with self._lock:
            return sum(1 for entry in self._validator.outstanding.values()
                       if entry.index >= index)

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
        with self._lock:
            validator = self._validator
            index = len(validator.partner)
            entry = Entry(index, worker, self._clock(), "invoke", f, op, None, meta)
            validator.add_invocation(entry)
            self._publish(entry, worker, None)
            return entry

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
        return self._complete(invocation, "info",
                              error if isinstance(error, str) else describe_error(error))

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
        worker = invocation.worker
        with self._lock:
            validator = self._validator
            entry = Entry(
                len(validator.partner),
                worker,
                self._clock(),
                etype,
                invocation.f,
                invocation.op,
                result,
                invocation.meta,
            )
            validator.add_completion(entry, invocation)
            self._publish(entry, worker, invocation)
            return entry

    def _publish(self, entry: Entry, worker: int, invocation: Entry | None) -> None:
        """Queue or write the entry's line, keep it, and show it to the observers; the
        lock is held. ``invocation`` is a completion's, whose encoded op and meta the
        completion's line reuses."""
        queue = self._queue
        if queue is not None:
            queue.append(entry)
            if len(queue) == _WRITER_BATCH:
                cast(_Writer, self._writer).wake()
        elif self._out is not None:
            if invocation is None:
                try:
                    payload: tuple[str, str] | None = _encode_payload(entry)
                except TypeError:
                    payload = None
                self._payloads[worker] = (entry, payload)
            else:
                cached = self._payloads.pop(worker, None)
                payload = cached[1] if cached is not None and cached[0] is invocation else None
            self._out.write(_line(entry, payload))
            self._out.flush()
        if self._keep:
            self._entries.append(entry)
        for observe in self._observers:
            observe(entry)


def _line(entry: Entry, payload: tuple[str, str] | None) -> str:
    try:
        return _encode_typed(entry, payload)
    except TypeError:
        return _encode(entry)


_MAX_FLUSH_INTERVAL_S = 60.0
_WRITER_BATCH = 4096
"""Entries after which a :class:`_Writer` writes without waiting for its interval."""


class _Writer:
    """The thread of a :class:`HistoryRecorder` with ``flush_interval_s``, which encodes
    the entries' lines, writes them out together, and then shows them to the deferred
    observers.

    The recorder appends to :attr:`queue` under its lock, so entries queue in index
    order; the thread takes everything queued under that lock, and encodes and writes
    it outside. It is the only writer until :meth:`close` has stopped it, so lines reach
    the file whole and in order. It holds no reference to the recorder, so a recorder
    never closed can still be collected; a finalizer then closes this.
    """

    def __init__(
        self,
        out: IO[str] | None,
        observers: tuple[Callable[[Entry], None], ...],
        lock: threading.Lock,
        interval_s: float,
    ) -> None:
        self._out = out
        self._observers = observers
        self._lock = lock
        self._interval_s = interval_s
        self.queue: list[Entry] = []
        """Entries waiting, in index order; appended to under the recorder's lock."""
        self._payloads: dict[int, tuple[Entry, tuple[str, str] | None]] = {}
        self._wake = threading.Event()
        self._stopping = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="memcert-history-writer", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        """Write what is queued now rather than at the end of the interval."""
        self._wake.set()

    def close(self) -> None:
        """Stop the thread, write and observe whatever is still queued, close the file,
        then raise what the thread could not do (writing, or an observer), if anything."""
        self._stopping = True
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        try:
            self._drain()
        finally:
            if self._out is not None:
                self._out.close()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._wake.wait(self._interval_s)
                self._wake.clear()
                self._drain()
        except BaseException as error:  # writing failed (a full disk, say): close() raises
            self._error = error

    def _drain(self) -> None:
        with self._lock:
            entries = self.queue[:]
            self.queue.clear()
        if not entries:
            return
        out = self._out
        if out is not None:
            payloads = self._payloads
            out.write("".join([self._line(entry, payloads) for entry in entries]))
            out.flush()
        try:
            # Each observer takes the whole batch in turn: its code stays hot throughout.
            for observe in self._observers:
                for entry in entries:
                    observe(entry)
        except BaseException as error:  # the lines go on being written; close() raises it
            self._observers = ()
            if self._error is None:
                self._error = error

    @staticmethod
    def _line(entry: Entry, payloads: dict[int, tuple[Entry, tuple[str, str] | None]]) -> str:
        """The entry's line; a completion reuses its invocation's encoded op and meta."""
        if entry.type == "invoke":
            try:
                payload: tuple[str, str] | None = _encode_payload(entry)
            except TypeError:
                payload = None
            payloads[entry.worker] = (entry, payload)
        else:
            cached = payloads.pop(entry.worker, None)
            payload = (
                cached[1]
                if cached is not None and cached[0].op is entry.op and cached[0].meta is entry.meta
                else None
            )
        return _line(entry, payload)
