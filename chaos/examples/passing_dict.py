"""Where the tutorial ends: the naive dict store with every fix, in one class.

``memcert certify chaos.examples.passing_dict:passing_dict --level surface`` certifies
it. Each decision is a step of docs/make-your-store-pass.md: fold attribute names into
keys, keep a tombstone per deleted entity, refuse a lower causal_seq, after a restore go
on refusing writes from before the delete, and answer each op_id once.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import ClassVar, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write
from reference_store.normalize import Normalizer

__all__ = ["OneStore", "PassingDict", "passing_dict"]

_Op = TypeVar("_Op", Write, Delete, Restore)


class PassingDict:
    """A whole store; one lock makes each call one step, so handles may share it."""

    def __init__(self) -> None:
        self.lock, self.versions = threading.Lock(), itertools.count(1)
        self.normalizer = Normalizer("surface")
        self.records: dict[tuple[str, str], dict[str, Record]] = {}  # by folded attribute
        self.tombstones: dict[tuple[str, str], int] = {}  # deleted -> the delete's seq
        self.lines: dict[tuple[str, str], int] = {}  # restored -> the lifted delete's seq
        self.answers: dict[tuple[str, str], Ack] = {}  # (namespace, op_id) -> first answer

    def write(self, op: Write) -> Ack:
        return self._once(op, self._write)

    def delete(self, op: Delete) -> Ack:
        return self._once(op, self._delete)

    def restore(self, op: Restore) -> Ack:
        return self._once(op, self._restore)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        with self.lock:
            records = self.records.get((namespace, entity_id), {}).values()
            return sorted(records, key=lambda record: (record.causal_seq, record.version))

    def reset(self) -> None:
        with self.lock:
            for table in (self.records, self.tombstones, self.lines, self.answers):
                table.clear()

    def close(self) -> None:
        """Nothing to release: the store lives as long as the factory."""

    def _once(self, op: _Op, decide: Callable[[_Op], Ack]) -> Ack:
        key = (op.namespace, op.op_id)
        with self.lock:
            if key not in self.answers:
                self.answers[key] = decide(op)
            return self.answers[key]

    def _write(self, op: Write) -> Ack:
        entity, key = (op.namespace, op.entity_id), self.normalizer.attribute_key(op.attribute)
        current = self.records.get(entity, {}).get(key)
        if entity in self.tombstones:
            return Ack(False, reason="tombstoned")
        if current is not None and op.causal_seq < current.causal_seq:
            return Ack(False, version=current.version, reason="stale")
        if entity in self.lines and op.causal_seq <= self.lines[entity]:
            return Ack(False, reason="stale")
        version = next(self.versions)
        self.records.setdefault(entity, {})[key] = Record(
            op.entity_id, op.attribute, op.value, op.causal_seq, version)
        return Ack(True, version=version)

    def _delete(self, op: Delete) -> Ack:
        entity = (op.namespace, op.entity_id)
        self.records.pop(entity, None)
        self.tombstones[entity] = max(op.causal_seq, self.tombstones.get(entity, op.causal_seq))
        return Ack(True)

    def _restore(self, op: Restore) -> Ack:
        entity = (op.namespace, op.entity_id)
        if entity not in self.tombstones:
            return Ack(False, reason="not_deleted")
        if op.causal_seq < self.tombstones[entity]:
            return Ack(False, reason="stale")
        self.lines[entity] = self.tombstones.pop(entity)
        return Ack(True)


class OneStore:
    """The factory: every call returns the same store, which lives in this process."""

    shares_across_processes: ClassVar[bool] = False

    def __init__(self) -> None:
        self.store = PassingDict()

    def __call__(self) -> PassingDict:
        return self.store


passing_dict = OneStore()
