"""The store a new user writes from the contract alone: where the tutorial starts.

It reads well and passes a quick test by hand, yet it keeps few of the write-time
promises: the last write to arrive wins whatever its ``causal_seq``, attribute names are
keys exactly as sent, and a delete forgets the entity instead of remembering it. What
the contract spells out it does: reads come in causal order, and a store without
restore says so with ``NotImplementedError``.
``memcert certify chaos.examples.naive_dict:naive_dict --level surface`` fails it, and
docs/make-your-store-pass.md fixes it one cause at a time, in
:mod:`chaos.examples.tutorial_steps`.

Two of its decisions are methods of their own, :meth:`NaiveDict.key` and
:meth:`NaiveDict.refusal`, so that each of the tutorial's steps overrides only what it
fixes, as the known-bad backends override one decision of the in-memory store.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write

__all__ = ["Handles", "NaiveDict", "Shelf", "naive_dict"]

EntityKey = tuple[str, str]
"""(namespace, entity_id): the namespace is part of every key."""


@dataclass
class Shelf:
    """Everything one store holds, shared by all its handles: each entity's records by
    key, and the counter versions come from. ``lock`` guards both; it is re-entrant, so
    a step of the tutorial can hold it around a call of the step before."""

    entities: dict[EntityKey, dict[str, Record]] = field(default_factory=dict)
    versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.RLock = field(default_factory=threading.RLock)

    def clear(self) -> None:
        """Forget everything but the version counter, under the lock already held."""
        self.entities.clear()


class NaiveDict:
    """A handle onto a :class:`Shelf`: last writer wins, names verbatim, no tombstones.

    The lock makes each call one step, so the dict's key is a unique index that no two
    writers can race past; what goes wrong is what the store decides, not when.
    """

    shelf_type: ClassVar[type[Shelf]] = Shelf
    """What a factory of this handle builds its one shelf from."""

    def __init__(self, shelf: Shelf) -> None:
        self.shelf = shelf

    def key(self, attribute: str) -> str:
        """The key a record is filed under: the attribute name as it was sent."""
        return attribute

    def refusal(self, op: Write, current: Record | None) -> Ack | None:
        """Why ``op`` must not replace ``current`` (the record under its key, if any),
        called under the lock: never, here."""
        return None

    def write(self, op: Write) -> Ack:
        key = self.key(op.attribute)
        with self.shelf.lock:
            records = self.shelf.entities.setdefault((op.namespace, op.entity_id), {})
            refused = self.refusal(op, records.get(key))
            if refused is not None:
                return refused
            version = next(self.shelf.versions)
            records[key] = Record(op.entity_id, op.attribute, op.value, op.causal_seq, version)
            return Ack(True, version=version)

    def delete(self, op: Delete) -> Ack:
        with self.shelf.lock:
            self.shelf.entities.pop((op.namespace, op.entity_id), None)
            return Ack(True)

    def restore(self, op: Restore) -> Ack:
        """A delete forgets the entity, so there is nothing a restore could lift."""
        raise NotImplementedError("naive_dict keeps no tombstones to restore from")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        with self.shelf.lock:
            records = self.shelf.entities.get((namespace, entity_id), {}).values()
            return sorted(records, key=lambda record: (record.causal_seq, record.version))

    def reset(self) -> None:
        with self.shelf.lock:
            self.shelf.clear()

    def close(self) -> None:
        """Nothing to release: the shelf lives as long as the factory."""


_Handle = TypeVar("_Handle", bound=NaiveDict)


class Handles(Generic[_Handle]):
    """A backend factory: every call returns a new handle onto the same shelf.

    The shelf lives in this process only, which ``shares_across_processes`` tells a
    runner (``--processes`` cannot use it).
    """

    shares_across_processes: ClassVar[bool] = False

    def __init__(self, handle: type[_Handle]) -> None:
        self.handle = handle
        self.shelf = handle.shelf_type()

    def __repr__(self) -> str:
        return f"Handles({self.handle.__name__})"

    def __call__(self) -> _Handle:
        return self.handle(self.shelf)


naive_dict = Handles(NaiveDict)
