"""What a history is made of: entries, their payloads and results, and the error a
malformed one raises. How they are written and read lives in the codec."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import MemcertError
from invariants.levels import Paraphrase

__all__ = [
    "ENTRY_TYPES",
    "F_OF_TYPE",
    "Entry",
    "EntryType",
    "HistoryError",
    "OpName",
    "Payload",
    "Read",
    "Result",
    "WriteMeta",
    "describe_error",
]

EntryType: TypeAlias = Literal["invoke", "ok", "fail", "info"]
OpName: TypeAlias = Literal["write", "delete", "restore", "read"]

ENTRY_TYPES: tuple[str, ...] = get_args(EntryType)


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

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        """Rebuilt from its parts: it crosses from a worker process's recorder calls."""
        return functools.partial(type(self), path=self.path, line=self.line), (
            self.problem, self.fix)


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
    # No default on the field itself: the codec decodes straight into this class and
    # must refuse a stored meta without its level; code that builds one may leave it out.
    paraphrase: Paraphrase

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

F_OF_TYPE: dict[type, OpName] = {
    Write: "write",
    Delete: "delete",
    Restore: "restore",
    Read: "read",
}


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
        # The codec builds on this module, so it is imported when first needed.
        from invariants.history._codec import to_builtins

        return to_builtins(self)

    @classmethod
    def from_dict(cls, data: object) -> Entry:
        """Decode one stored entry, checking every field's presence and type.

        Raises :class:`HistoryError` naming the field; the caller adds the line number.
        This checks the entry alone; whether it fits its history is
        :class:`History`'s job.
        """
        from invariants.history._codec import from_builtins

        return from_builtins(data)


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


def describe_error(error: BaseException) -> str:
    """How a history records an exception: its type and message, one line a reader of
    ``history.jsonl`` can act on without the traceback."""
    return f"{type(error).__name__}: {error}"
