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
line that reached the file. With ``compress=True`` it is ``history.jsonl.zst``, the same
lines as zstd frames, one per group. Checking a run means reading that file back, whole
(:func:`read_history`) or streaming (:class:`HistoryStream`), and feeding it to the
checkers; every reader takes either form.

The package's modules, each small: ``_model`` (what an entry is), ``_codec`` (entries
to bytes and back, with msgspec, and zstd), ``_validation`` (what a well-formed history
is, and :class:`History`), ``_reading`` and ``_recording``.
"""

from __future__ import annotations

from invariants.history._model import (
    Entry,
    EntryType,
    HistoryError,
    OpName,
    Payload,
    Read,
    Result,
    WriteMeta,
    describe_error,
)
from invariants.history._reading import (
    READ_CHUNK_BYTES,
    HistoryStream,
    collector_paused,
    find_history,
    read_history,
)
from invariants.history._recording import HistoryRecorder
from invariants.history._validation import History
from invariants.levels import Paraphrase

__all__ = [
    "READ_CHUNK_BYTES",
    "Entry",
    "EntryType",
    "History",
    "HistoryError",
    "HistoryRecorder",
    "HistoryStream",
    "OpName",
    "Paraphrase",
    "Payload",
    "Read",
    "Result",
    "WriteMeta",
    "collector_paused",
    "describe_error",
    "find_history",
    "read_history",
]
