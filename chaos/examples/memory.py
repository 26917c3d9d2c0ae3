"""A correct in-process backend, and the factory that hands out handles onto one store.

:class:`InMemoryBackend` makes the reference store's decisions, without a database:
stale writes are refused (``stale``), writes to a deleted entity too (``tombstoned``),
and after a restore so are writes from before the delete (``predates_delete``); a
restatement of the current fact merges into it (``merged``, causal_seq advanced, wording
kept); a retry of an ``op_id`` gets the first outcome. All state sits in a
:class:`MemoryStore` behind one lock, so any number of threads may share it.

The decisions are split into small methods so that each known-bad backend
(:mod:`chaos.examples.known_bad`) overrides exactly one of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument
from reference_store.config import DEFAULT_MAX_VALUE_BYTES
from reference_store.normalize import Embedder, Level, Normalizer
from reference_store.validation import check_op

__all__ = ["InMemoryBackend", "MemoryStore", "Row", "SharedFactory", "StoredEntity"]

_Op = TypeVar("_Op", Write, Delete, Restore)


@dataclass(slots=True)
class Row:
    """One active record with the keys it was filed under."""

    record: Record
    attr_key: str
    value_key: str


@dataclass(slots=True)
class StoredEntity:
    """What the in-memory store holds for one (namespace, entity): its rows and its
    delete state.

    ``wiped`` holds the rows the deletes since the last restore took out of service: a
    soft delete, as the reference store keeps its rows with status ``deleted``. A
    correct backend never serves them again. ``delete_tick`` is the store's
    operation count when the last delete landed.
    """

    active: list[Row] = field(default_factory=list)
    wiped: list[Row] = field(default_factory=list)
    deleted: bool = False
    delete_seq: int | None = None
    restore_seq: int | None = None
    next_version: int = 0
    delete_tick: int = 0


class MemoryStore:
    """Everything one in-memory store holds; every handle onto it shares this object.

    ``lock`` guards all of it. ``ticks`` counts the operations served, reads included.
    """

    def __init__(
        self,
        level: Level = "lexical",
        *,
        embedder: Embedder | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.normalizer = Normalizer(level, embedder=embedder)
        self.max_value_bytes = max_value_bytes
        self.lock = threading.Lock()
        self.ticks = 0
        self.entities: dict[str, dict[str, StoredEntity]] = {}
        """entity_id -> namespace -> state."""
        self.outcomes: dict[tuple[str, str], Ack] = {}
        """(namespace, op_id) -> the first outcome, for retries."""

    def entity(self, namespace: str, entity_id: str) -> StoredEntity:
        return self.entities.setdefault(entity_id, {}).setdefault(namespace, StoredEntity())

    def find(self, namespace: str, entity_id: str) -> StoredEntity | None:
        return self.entities.get(entity_id, {}).get(namespace)

    def clear(self) -> None:
        self.entities.clear()
        self.outcomes.clear()
        self.ticks = 0


class InMemoryBackend:
    """A handle onto a :class:`MemoryStore` that keeps every invariant of the contract.

    Without ``store`` the handle gets a private store of its own; use
    :class:`SharedFactory` to hand out many handles onto one.
    """

    def __init__(self, level: Level = "lexical", *, store: MemoryStore | None = None) -> None:
        if store is None:
            store = MemoryStore(level)
        elif store.normalizer.level != level:
            raise InvalidArgument(
                f"level={level!r} does not match the store's level "
                f"{store.normalizer.level!r}. Pass level={store.normalizer.level!r}, or a "
                f"store built with MemoryStore({level!r})."
            )
        self.store = store
        self.normalizer = store.normalizer

    def __repr__(self) -> str:
        return f"{type(self).__name__}(level={self.normalizer.level!r})"

    # -- the contract ---------------------------------------------------------------

    def write(self, op: Write) -> Ack:
        check_op(op, max_value_bytes=self.store.max_value_bytes)
        attr_key, value_key = self._slot(op.attribute), self._value_key(op.value)
        return self._once(op, lambda ent, version: self._write(ent, op, version, attr_key,
                                                               value_key))

    def delete(self, op: Delete) -> Ack:
        check_op(op, max_value_bytes=self.store.max_value_bytes)
        return self._once(op, lambda ent, version: self._delete(ent, op, version))

    def restore(self, op: Restore) -> Ack:
        check_op(op, max_value_bytes=self.store.max_value_bytes)
        return self._once(op, lambda ent, version: self._restore(ent, op, version))

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        with self.store.lock:
            self.store.ticks += 1
            return self._serve(namespace, entity_id)

    def entities(self, namespace: str) -> list[str]:
        """The entities the namespace holds, deleted ones too: the optional capability
        ``memcert audit`` enumerates a store by."""
        with self.store.lock:
            return [entity_id for entity_id, spaces in self.store.entities.items()
                    if namespace in spaces]

    def reset(self) -> None:
        with self.store.lock:
            self.store.clear()

    def close(self) -> None:
        """Nothing to release: the store lives as long as some handle or factory holds it."""

    # -- decisions, each under the store's lock -----------------------------------------

    def _once(self, op: _Op, body: Callable[[StoredEntity, int], Ack]) -> Ack:
        """Decide ``op`` once: a retry of its op_id gets the first outcome, unchanged.

        Every first attempt allocates the entity's next version, refused or not, as the
        reference store's entity upsert does.
        """
        store = self.store
        with store.lock:
            store.ticks += 1
            key = (op.namespace, op.op_id)
            first = store.outcomes.get(key)
            if first is not None:
                return first
            ent = store.entity(op.namespace, op.entity_id)
            ent.next_version += 1
            ack = store.outcomes[key] = body(ent, ent.next_version)
            return ack

    def _write(
        self, ent: StoredEntity, op: Write, version: int, attr_key: str, value_key: str
    ) -> Ack:
        current = self._current(ent, attr_key, op)
        refusal = self._refusal(ent, op)
        if refusal is not None:
            return refusal
        if current is not None:
            if self._stale(current, op):
                return Ack(False, version=current.record.version, reason="stale")
            if self._same_fact(current, op, value_key):
                current.record = replace(current.record, causal_seq=op.causal_seq)
                return Ack(True, version=current.record.version, reason="merged")
            ent.active = [row for row in ent.active if row is not current]
        record = Record(op.entity_id, op.attribute, op.value, op.causal_seq, version)
        self._insert(ent, Row(record, attr_key, value_key))
        return Ack(True, version=version)

    def _delete(self, ent: StoredEntity, op: Delete, version: int) -> Ack:
        if ent.restore_seq is not None and op.causal_seq < ent.restore_seq:
            return Ack(False, reason="stale")
        already = self._tombstoned(ent)
        ent.deleted = True
        ent.delete_seq = op.causal_seq if ent.delete_seq is None else max(ent.delete_seq,
                                                                          op.causal_seq)
        ent.delete_tick = self.store.ticks
        ent.wiped.extend(ent.active)
        ent.active = []
        return Ack(True, version=version, reason="already_deleted" if already else None)

    def _restore(self, ent: StoredEntity, op: Restore, version: int) -> Ack:
        if not self._tombstoned(ent) or ent.delete_seq is None:
            return Ack(False, reason="not_deleted")
        if op.causal_seq < ent.delete_seq:
            return Ack(False, reason="stale")
        ent.deleted = False
        ent.restore_seq = op.causal_seq
        ent.wiped.clear()
        return Ack(True, version=version)

    def _serve(self, namespace: str, entity_id: str) -> list[Record]:
        ent = self.store.find(namespace, entity_id)
        if ent is None or self._tombstoned(ent):
            return []
        return self._ordered(ent.active)

    # -- the single decisions the known-bad backends override -----------------------------

    def _slot(self, attribute: str) -> str:
        return self.normalizer.attribute_key(attribute)

    def _value_key(self, value: str) -> str:
        return self.normalizer.value_key(value)

    def _current(self, ent: StoredEntity, attr_key: str, op: Write) -> Row | None:
        """The record a write to ``attr_key`` competes with."""
        return next((row for row in ent.active if row.attr_key == attr_key), None)

    def _refusal(self, ent: StoredEntity, op: Write) -> Ack | None:
        """Why the entity's deletion state refuses ``op``, if it does."""
        if self._tombstoned(ent):
            return Ack(False, reason="tombstoned")
        if ent.delete_seq is not None and op.causal_seq <= ent.delete_seq:
            return Ack(False, reason="predates_delete")
        return None

    def _tombstoned(self, ent: StoredEntity) -> bool:
        return ent.deleted

    def _stale(self, current: Row, op: Write) -> bool:
        return op.causal_seq < current.record.causal_seq

    def _same_fact(self, current: Row, op: Write, value_key: str) -> bool:
        return current.value_key == value_key or (
            self.normalizer.level == "semantic"
            and self.normalizer.same_fact(current.record.value, op.value)
        )

    def _insert(self, ent: StoredEntity, row: Row) -> None:
        ent.active.append(row)

    def _ordered(self, rows: Iterable[Row]) -> list[Record]:
        """Serving order: ascending causal_seq, ties by version."""
        return sorted((row.record for row in rows),
                      key=lambda r: (r.causal_seq, r.version))


class SharedFactory:
    """A backend factory whose every call returns a new handle onto one store.

    The store is made on the first call, so importing a module of factories costs
    nothing. Handles share it within this process only: a factory of this kind cannot
    serve worker processes, which is what ``shares_across_processes`` tells a runner.
    The contract's ``reset()`` on any handle empties it.
    """

    shares_across_processes: ClassVar[bool] = False

    def __init__(
        self,
        backend: type[InMemoryBackend] = InMemoryBackend,
        level: Level = "lexical",
        *,
        embedder: Embedder | None = None,
    ) -> None:
        self.backend = backend
        self.level: Level = level
        self._embedder = embedder
        self._store: MemoryStore | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SharedFactory({self.backend.__name__}, level={self.level!r})"

    def __call__(self) -> InMemoryBackend:
        with self._lock:
            if self._store is None:
                self._store = MemoryStore(self.level, embedder=self._embedder)
            store = self._store
        return self.backend(self.level, store=store)
