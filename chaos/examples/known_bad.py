"""Known-bad backends: each breaks one promise of the contract, and memcert must say which.

Every class overrides one decision of :class:`~chaos.examples.memory.InMemoryBackend`,
and its docstring names the invariant it breaks and what a history shows. Some bugs show
only under concurrency (:class:`RacyUpsert`), only some time after a delete
(:class:`ExpiringTombstone`) or only after a restore (:class:`RestoreRevives`,
:class:`RestoreAcceptsLateWrites`), which is what makes them worth keeping.
"""

from __future__ import annotations

import functools
import re
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import replace
from typing import ClassVar

from invariants.backend import Ack, Record, Restore, Write
from invariants.normalize.phrases import compile_phrases, spaced
from invariants.normalize.surface import fold
from reference_store.normalize import Lexicon

from .memory import InMemoryBackend, Row, StoredEntity

__all__ = [
    "AsciiAttributeKeys",
    "DropsWrites",
    "ExpiringTombstone",
    "FoldsNegation",
    "LastArrivalWins",
    "LeakyNamespaces",
    "NoRestore",
    "NormalizesValues",
    "PhantomRecords",
    "RacyUpsert",
    "RawAttributeKeys",
    "RestoreAcceptsLateWrites",
    "RestoreRevives",
    "StripsWhitespace",
    "SurfaceOnly",
    "TruncatesValues",
    "UnsortedReads",
]


class RacyUpsert(InMemoryBackend):
    """Breaks **uniqueness**, under concurrency only.

    It looks up the slot's current record, lets go of the lock for ``gap_s`` (the round
    trip of a check-then-insert without a row lock), then acts on what it saw. Two
    concurrent writes of different facts to one slot both find the same old record, or
    none, and both insert: reads serve two facts for one slot (a *conflict*). One
    writer at a time never shows it.
    """

    gap_s: ClassVar[float] = 0.002

    def _current(self, ent: StoredEntity, attr_key: str, op: Write) -> Row | None:
        found = super()._current(ent, attr_key, op)
        self.store.lock.release()
        try:
            time.sleep(self.gap_s)
        finally:
            self.store.lock.acquire()
        return found


class LastArrivalWins(InMemoryBackend):
    """Breaks **causal monotonicity**: it ignores causal_seq, so the write that arrives
    last replaces the record, even one with a lower causal_seq. A read then serves the
    older fact although a newer write of the slot was acknowledged (a *reorder*)."""

    def _stale(self, current: Row, op: Write) -> bool:
        return False


class UnsortedReads(InMemoryBackend):
    """Breaks **causal monotonicity** in reads only: records come back in insertion
    order, so a slot written late with a low causal_seq is listed after a record with a
    higher one (a *reorder*: records out of causal order)."""

    def _ordered(self, rows: Iterable[Row]) -> list[Record]:
        return [row.record for row in rows]


class ExpiringTombstone(InMemoryBackend):
    """Breaks **deletion monotonicity**, only some time after a delete.

    The tombstone lives for ``after_ops`` operations on the store (reads included);
    then it is dropped as if it were a cache entry. The rows it hid are served again
    and writes are accepted, with no restore (a *resurrection*). Reads right after the
    delete look correct.
    """

    after_ops: ClassVar[int] = 8

    def _tombstoned(self, ent: StoredEntity) -> bool:
        if ent.deleted and self.store.ticks - ent.delete_tick > self.after_ops:
            ent.deleted = False
            ent.delete_seq = None
            ent.active.extend(ent.wiped)
            ent.wiped.clear()
        return ent.deleted


class RestoreRevives(InMemoryBackend):
    """Breaks **deletion monotonicity**, only after a restore: the restore undoes the
    soft delete, bringing back every record from before it (a *resurrection*)."""

    def _restore(self, ent: StoredEntity, op: Restore, version: int) -> Ack:
        hidden = list(ent.wiped)
        ack = super()._restore(ent, op, version)
        if ack.applied:
            ent.active.extend(hidden)
        return ack


class RestoreAcceptsLateWrites(InMemoryBackend):
    """Breaks **deletion monotonicity**, only after a restore: it forgets the delete's
    causal_seq, so a write issued before the delete that arrives after the restore is
    applied and served (a *resurrection* of a fact the delete should have buried)."""

    def _refusal(self, ent: StoredEntity, op: Write) -> Ack | None:
        return Ack(False, reason="tombstoned") if self._tombstoned(ent) else None


class SurfaceOnly(InMemoryBackend):
    """Breaks **semantic normalization**, and with it **uniqueness**.

    An "append unless identical" store: a write merges only into a record of its slot
    with the same surface wording, and is otherwise added beside the slot's records.
    A lexical paraphrase (喜欢美式 / 偏好美式咖啡) is then served next to the record it
    restates (a *duplicate*), and a different fact next to the old one (a *conflict*).
    """

    def _current(self, ent: StoredEntity, attr_key: str, op: Write) -> Row | None:
        wording = _wording(op.value)
        return next(
            (row for row in ent.active
             if row.attr_key == attr_key and _wording(row.record.value) == wording),
            None,
        )


@functools.lru_cache(maxsize=1 << 14)
def _wording(value: str) -> str:
    """A value's surface wording, each stored value folded once: a slot that piles up
    hundreds of records under a hot key would otherwise fold them all at every write,
    under the store's lock, and the run would measure this example's slowness."""
    return fold(value)


class RawAttributeKeys(InMemoryBackend):
    """Breaks **uniqueness** and **semantic normalization** through attribute names: it
    files records under the raw name, so ``coffee_preference`` and ``Coffee Preference``
    are two slots. Two facts written under two spellings are both served (a
    *conflict*); one fact written under two spellings is served twice (a *duplicate*)."""

    def _slot(self, attribute: str) -> str:
        return attribute


class DropsWrites(InMemoryBackend):
    """Breaks **durability**: a write that is the store's ``every``-th operation is
    acknowledged and never stored, after the record it replaces was already taken out.
    A read then finds nothing for the slot (a *lost* write)."""

    every: ClassVar[int] = 7

    def _insert(self, ent: StoredEntity, row: Row) -> None:
        if self.store.ticks % self.every:
            super()._insert(ent, row)


class LeakyNamespaces(InMemoryBackend):
    """Breaks **isolation**: reads look the entity up in every namespace, so a record
    written under one tenant is served to another (a *leak*)."""

    def _serve(self, namespace: str, entity_id: str) -> list[Record]:
        states = self.store.entities.get(entity_id, {}).values()
        return self._ordered(row for ent in states if not self._tombstoned(ent)
                             for row in ent.active)


class PhantomRecords(InMemoryBackend):
    """Serves a *phantom*: a read that is the store's ``every``-th operation also returns
    a torn copy of its last record, its text ending in U+FFFD, a value no write
    produced."""

    every: ClassVar[int] = 5

    def _serve(self, namespace: str, entity_id: str) -> list[Record]:
        records = super()._serve(namespace, entity_id)
        if records and self.store.ticks % self.every == 0:
            records.append(replace(records[-1], value=records[-1].value + "\ufffd"))
        return records


class FoldsNegation(InMemoryBackend):
    """Breaks **causal monotonicity** through its normalizer: value keys drop negation,
    so "does not like americano" counts as a restatement of "likes americano" and is
    merged into it. The newer, opposite fact is acknowledged, but reads keep serving
    the older one (a *reorder*: a stale fact served)."""

    def _value_key(self, value: str) -> str:
        cues = _negation_pattern(self.normalizer.lexicon)
        return fold(cues.sub(" ", spaced(super()._value_key(value))))


class NoRestore(InMemoryBackend):
    """Correct, without the restore capability: memcert must report the restore checks
    as skipped, never as passed."""

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError("NoRestore does not support restore")


class TruncatesValues(InMemoryBackend):
    """Breaks **durability**: it keeps the first ``limit`` characters of a value, as a
    ``VARCHAR(255)`` column of a lenient database does, and acknowledges the write. A
    read serves a value no write produced (a *phantom*, cut after 255 characters), and
    the write it came from is never served whole (a *lost* write). Short values pass."""

    limit: ClassVar[int] = 255

    def write(self, op: Write) -> Ack:
        return super().write(replace(op, value=op.value[: self.limit]))


class NormalizesValues(InMemoryBackend):
    """Breaks **durability**: it stores every value in NFC, as a store that "cleans"
    its input does. A value written decomposed (``Cafe`` and U+0301) is served composed:
    a *phantom* whose only difference from the write is its normalization form."""

    def write(self, op: Write) -> Ack:
        return super().write(replace(op, value=unicodedata.normalize("NFC", op.value)))


class StripsWhitespace(InMemoryBackend):
    """Breaks **durability**: it strips whitespace, of every Unicode kind, from both ends
    of a value, as an ORM's ``strip=True`` field does. A value that starts or ends with
    whitespace is served without it (a *phantom*, whitespace changed)."""

    def write(self, op: Write) -> Ack:
        return super().write(replace(op, value=op.value.strip()))


class AsciiAttributeKeys(InMemoryBackend):
    """Breaks **durability** through attribute names: its canonical key keeps only
    ``[a-z0-9]``, so every Chinese name folds to the empty key and ``memo_备注`` and
    ``memo_笔记`` to ``memo``. A write to one of two such slots replaces the other's
    record: the replaced write is acknowledged and never served again (a *lost*
    write). English names keep working."""

    def _slot(self, attribute: str) -> str:
        return re.sub(r"[^a-z0-9]", "", super()._slot(attribute))


@functools.cache
def _negation_pattern(lexicon: Lexicon) -> re.Pattern[str]:
    return compile_phrases(spaced(cue) for cue in lexicon.negation_cues)
