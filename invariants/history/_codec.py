"""The one codec of ``history.jsonl``: entries to lines of JSON and back, with msgspec.

A line is the JSON object of an :class:`Entry`, its fields in declaration order:
``index``, ``worker``, ``time_ns``, ``type``, ``f``, ``op``, ``result`` and ``meta``.
msgspec writes the dataclasses of the model as such objects, so encoding needs no
schema of its own. Decoding does: ``op``'s type depends on ``f``, so each ``f`` has a
line :class:`msgspec.Struct` tagged by it, and one decoder turns a line into the model's
own objects (the contract's ``Write``, ``Ack``, ``Record``...) while checking every
field's presence and type. Its errors become :class:`HistoryError` naming the field;
where the value can be shown, the message shows it.

A compressed history (``history.jsonl.zst``) is the same bytes as a series of zstd
frames: the recorder ends one each time it flushes, so a reader of a crashed run's file
can decode every frame but the last one, cut short.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
import zstandard

from invariants.backend import Delete, Restore, Write
from invariants.history._model import (
    ENTRY_TYPES,
    Entry,
    EntryType,
    HistoryError,
    OpName,
    Payload,
    Read,
    Result,
    WriteMeta,
)
from invariants.levels import PARAPHRASE_LEVELS

__all__ = [
    "COMPRESSED_SUFFIX",
    "ZSTD_MAGIC",
    "compressor",
    "decode_line",
    "decode_lines",
    "encode_entry",
    "encode_lines",
    "from_builtins",
    "is_compressed_name",
    "to_builtins",
]

COMPRESSED_SUFFIX: Final = ".zst"
"""How a compressed history's name ends: ``history.jsonl.zst``."""
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame, by which a reader knows a compressed file."""
ZSTD_LEVEL: Final = 3
"""zstd's own default level: fast enough for the recorder's thread to keep up."""
_LINE_FIX: Final = "Each line must be one JSON object as HistoryRecorder writes it."


class _Line(msgspec.Struct, tag_field="f", kw_only=True, gc=False):
    """The fields every line has; ``f``, the tag, picks the subclass and so ``op``'s type.

    Not tracked by the collector: a line lives only until its :class:`Entry` is built.
    """

    index: int
    worker: int
    time_ns: int
    type: EntryType
    result: Result = None
    meta: WriteMeta | None = None


class _WriteLine(_Line, tag="write"):
    op: Write


class _DeleteLine(_Line, tag="delete"):
    op: Delete


class _RestoreLine(_Line, tag="restore"):
    op: Restore


class _ReadLine(_Line, tag="read"):
    op: Read


_AnyLine = _WriteLine | _DeleteLine | _RestoreLine | _ReadLine
_F_OF_LINE: dict[type, OpName] = {
    _WriteLine: "write",
    _DeleteLine: "delete",
    _RestoreLine: "restore",
    _ReadLine: "read",
}
_DECODER = msgspec.json.Decoder(_AnyLine)
_ENCODER = msgspec.json.Encoder()


def _entry(line: _Line) -> Entry:
    return Entry(line.index, line.worker, line.time_ns, line.type, _F_OF_LINE[type(line)],
                 line.op, line.result, line.meta)  # type: ignore[attr-defined]


def decode_lines(data: bytes, open_ops: dict[int, Entry]) -> list[Entry]:
    """The entries of whole lines of JSON, in order.

    A completion that repeats its invocation's op and meta, as a valid one does, gets the
    invocation's own objects: a history read back then holds each payload once, as the
    recorder made it, and the validator's comparison of the two is one of identity.
    ``open_ops`` holds each worker's invocation across calls, for that.

    Raises msgspec's own errors, which do not say which line: :func:`decode_line` on each
    line then names it. Blank lines are skipped here, so a caller that refuses them
    compares the count.
    """
    entries: list[Entry] = []
    append = entries.append
    for line in _DECODER.decode_lines(data):
        op: Payload = line.op
        meta, worker, etype = line.meta, line.worker, line.type
        invocation = None if etype == "invoke" else open_ops.pop(worker, None)
        if invocation is not None and invocation.op == op and invocation.meta == meta:
            op, meta = invocation.op, invocation.meta
        entry = Entry(line.index, worker, line.time_ns, etype, _F_OF_LINE[type(line)], op,
                      line.result, meta)
        if etype == "invoke":
            open_ops[worker] = entry
        append(entry)
    return entries


def decode_line(line: bytes) -> Entry:
    """The entry of one line; :class:`HistoryError` naming the field if it is not one."""
    if not line.strip():
        raise HistoryError("the line is empty", _LINE_FIX)
    try:
        return _entry(_DECODER.decode(line))
    except msgspec.ValidationError as exc:
        error: msgspec.DecodeError = exc
    except msgspec.DecodeError as exc:
        error = exc
    try:
        # Validation can stop before the syntax does: bad JSON is the first thing to say.
        data = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        raise HistoryError(f"not valid JSON ({_syntax(str(exc))})", _LINE_FIX) from exc
    raise _field_error(str(error), data) from error


def from_builtins(data: object) -> Entry:
    """:meth:`Entry.from_dict`: the entry of a line already decoded to dicts and lists."""
    try:
        return _entry(msgspec.convert(data, _AnyLine))
    except msgspec.ValidationError as exc:
        raise _field_error(str(exc), data) from exc


def to_builtins(entry: Entry) -> dict[str, Any]:
    """:meth:`Entry.to_dict`: the JSON object of a line, as dicts and lists."""
    data: dict[str, Any] = msgspec.to_builtins(entry)
    if isinstance(data["result"], tuple):  # records, which JSON holds as an array
        data["result"] = list(data["result"])
    return data


def encode_entry(entry: Entry) -> bytes:
    """One line of ``history.jsonl``, its newline included."""
    return _ENCODER.encode(entry) + b"\n"


def encode_lines(entries: list[Entry]) -> bytes:
    """The lines of ``entries``, each ended by a newline: :func:`encode_entry` of each."""
    return _ENCODER.encode_lines(entries)


def is_compressed_name(name: str) -> bool:
    return name.endswith(COMPRESSED_SUFFIX)


def compressor() -> zstandard.ZstdCompressor:
    """What turns a batch of lines into one zstd frame (``compress``); one per thread."""
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL)


_AT = r"(?: - at `\$(?P<at>[^`]*)`)?$"
_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`" + _AT)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`" + _AT)
_INVALID = re.compile(r"^Invalid (?:enum )?value (?P<value>.+?)" + _AT)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_CHOICES: dict[str, tuple[str, ...]] = {
    "type": ENTRY_TYPES,
    "f": tuple(_F_OF_LINE.values()),
    "meta.paraphrase": PARAPHRASE_LEVELS,
}
_RESULT_FIX = "Use null, an error string, an Ack object or a list of records."
_MISSING_VALUE = object()


def _field_error(message: str, data: object) -> HistoryError:
    """msgspec's validation message as a :class:`HistoryError` in the history's terms:
    the field as ``op.causal_seq`` or ``result[0].version``, the value found, the fix."""
    if match := _MISSING.match(message):
        at = (match["at"] or "").lstrip(".")
        field = f"{at}.{match['name']}" if at else match["name"]
        return HistoryError(f"field '{field}' is missing", "Every entry needs it.")
    if match := _INVALID.match(message):
        at = (match["at"] or "").lstrip(".")
        choices = _CHOICES.get(at)
        fix = f"Use one of {', '.join(choices)}." if choices else _LINE_FIX
        return HistoryError(f"field '{at}' is {match['value']}", fix)
    if match := _EXPECTED.match(message):
        at = (match["at"] or "").lstrip(".")
        value = _value_at(data, at)
        kind = "null" if value is None else type(value).__name__
        if match["got"] == "null":
            return HistoryError(f"field '{at}' is missing", "Every entry needs it.")
        if at == "result":
            return HistoryError(f"field 'result' is {kind}", _RESULT_FIX)
        if match["want"] == "object":
            what = f"field '{at}'" if at else "entry"
            return HistoryError(f"{what} is {kind}, not an object",
                                "Each history line must be one JSON object as "
                                "Entry.to_dict() writes it.")
        shown = "" if value is _MISSING_VALUE else f"{value!r} (type {kind})"
        return HistoryError(f"field '{at}' is {shown or match['got']}",
                            f"It must be of type {match['want']}.")
    return HistoryError(message, _LINE_FIX)


def _value_at(data: object, at: str) -> object:
    """The value at ``at`` (as in ``result[0].version``) in a decoded line."""
    for name, position in _STEP.findall("." + at if at else ""):
        try:
            data = data[name] if name else data[int(position)]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return _MISSING_VALUE
    return data


_SYNTAX = re.compile(r"^JSON is malformed: (?P<reason>.*) \(byte (?P<byte>\d+)\)$")


def _syntax(message: str) -> str:
    """msgspec's JSON syntax error, as a phrase."""
    if match := _SYNTAX.match(message):
        return f"{match['reason']} at byte {match['byte']}"
    if message == "Input data was truncated":
        return "it ends before its value does"
    return message
