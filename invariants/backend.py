"""The backend contract: the only surface through which memcert touches a memory store.

Every other part of memcert (the chaos runner, fault injectors, stateful models, the
pytest plugin, the HTTP adapter) drives a backend through these names, so they are
public and fixed: extend them, never rename them.

What a backend promises
=======================

1. **Uniqueness.** ``read`` never returns two records for the same entity and the same
   canonical attribute. Two records that name one fact through attribute variants
   (``coffee_preference`` / ``Coffee Preference``) count as the same attribute.
   A violation is a *conflict*.

2. **Causal monotonicity.** A write whose ``causal_seq`` is lower than the current
   record's for that key never replaces it. ``read`` lists records in ascending
   ``causal_seq``. A violation is a *reorder*.

3. **Deletion monotonicity.** Once ``delete`` of an entity is acknowledged, no read
   returns any record of that entity, and writes to it are rejected, until a
   ``restore`` is acknowledged. After the restore nothing from before the delete comes
   back, including writes with a ``causal_seq`` below the delete's that arrive late.
   A violation is a *resurrection*.

4. **Semantic normalization.** Writes whose attribute names and values are variants of
   one fact leave one active record. Levels, each including the one before:

   - ``surface``: case, full/half width, Unicode form, whitespace, punctuation and
     separators (``coffee_preference`` / ``Coffee Preference`` / ``coffee-preference``).
   - ``lexical``: synonyms and reworded templates from a lexicon, in Chinese and
     English (喜欢美式 / 偏好美式咖啡 / 常喝美式; likes / prefers).
   - ``semantic``: free paraphrase; needs an embedding model.

   A negation is a different fact: "likes americano" and "does not like americano"
   must never fold together. A violation is a *duplicate*.

Two further guarantees:

- **Durability.** An acknowledged write stays readable until a write with a newer
  ``causal_seq`` supersedes it or the entity is deleted, across process crashes too.
  A violation is a *lost* write.
- **Isolation.** Nothing written in one namespace is ever visible from another.
  A violation is a *leak*.

What results mean
=================

- ``Ack(applied=True)``: the operation took effect.
- ``Ack(applied=False)``: the operation definitely did not take effect; ``reason``
  says why (``tombstoned``, ``stale``, ``not_deleted``, ...).
- Any exception: the outcome is unknown. The operation may or may not have been
  applied, and the checkers treat it so.

``causal_seq`` is assigned by the caller when the operation *starts*, from a
Lamport-style clock, not when it completes. A retry reuses the same ``op_id`` and the
same ``causal_seq``, and a backend must answer it with the first outcome.

Optional capabilities
=====================

Beyond ``restore``, a backend may also have ``entities(namespace)``, listing the entity
ids a namespace holds, so that ``memcert audit`` can read a live store whole
(:class:`invariants.capabilities.Enumerable`). It is not part of this protocol: a
backend without it is certified as before.

Factories
=========

A backend factory is any zero-argument callable, named as ``package.module:callable``,
that returns a backend. memcert calls it once per worker thread or process, so every
call must return a handle onto the *same* underlying store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "MAX_VALUE_BYTES",
    "Ack",
    "BackendFactory",
    "Delete",
    "MemoryBackend",
    "Operation",
    "Record",
    "Restore",
    "Write",
    "send",
]

MAX_VALUE_BYTES = 64 * 1024
"""The longest value, in bytes of UTF-8, that every backend must accept and serve back
verbatim; memcert never writes a longer one (``--max-value-bytes`` is checked against
it)."""


@dataclass(frozen=True, slots=True)
class Write:
    """Set ``attribute`` of ``entity_id`` to ``value``, as of ``causal_seq``.

    ``source`` names where the fact came from (a user turn, a tool, a web page); a
    backend may use it to decide how far to trust the content.
    """

    namespace: str
    entity_id: str
    attribute: str
    value: str
    causal_seq: int
    op_id: str
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """Forget everything about ``entity_id`` until an explicit ``Restore``."""

    namespace: str
    entity_id: str
    causal_seq: int
    op_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Restore:
    """Make a deleted entity writable again, without reviving anything it held."""

    namespace: str
    entity_id: str
    causal_seq: int
    op_id: str


@dataclass(frozen=True, slots=True)
class Ack:
    """A backend's definite answer; an unknown outcome is an exception instead."""

    applied: bool
    version: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """One active memory as the backend would serve it to an agent."""

    entity_id: str
    attribute: str
    value: str
    causal_seq: int
    version: int


Operation = Write | Delete | Restore


@runtime_checkable
class MemoryBackend(Protocol):
    """A memory store that memcert can certify.

    memcert never calls one handle from two threads at once: it asks the factory for one
    handle per worker. It may call a handle from a thread other than the one that made
    it (a fault that delivers an operation late does so from a timer thread), so a
    handle must not be bound to its creating thread (for sqlite3, pass
    ``check_same_thread=False``).
    """

    def write(self, op: Write) -> Ack:
        """Apply a write, or refuse it with ``Ack(applied=False, reason=...)``.

        Must not apply a write whose ``causal_seq`` is lower than the current
        record's for that key, nor any write to a deleted, unrestored entity.
        """
        ...

    def delete(self, op: Delete) -> Ack:
        """Delete every record of the entity and refuse writes until a restore.

        Must not physically forget the delete: a later stale write has to be refused.
        """
        ...

    def restore(self, op: Restore) -> Ack:
        """Make a deleted entity writable again.

        Must not revive any record from before the delete. A backend without the
        capability raises ``NotImplementedError``; memcert then reports the restore
        checks as skipped, never as passed.
        """
        ...

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        """Return the active records an agent would be served, in serving order.

        Must not return records of another namespace, nor records of a deleted entity.
        """
        ...

    def reset(self) -> None:
        """Empty the whole store, every namespace included."""
        ...

    def close(self) -> None:
        """Release this handle; other handles onto the same store stay usable."""
        ...


BackendFactory = Callable[[], MemoryBackend]


def send(backend: MemoryBackend, op: Operation) -> Ack:
    """Make the call of ``backend`` that ``op`` asks for: ``write``, ``delete`` or
    ``restore``. Everything in memcert that drives a backend sends changes through this
    one mapping, so no driver can pair an operation with another call."""
    if isinstance(op, Write):
        return backend.write(op)
    if isinstance(op, Delete):
        return backend.delete(op)
    return backend.restore(op)
