"""What a backend can do, found by asking it rather than by trusting a declaration.

Restore is the one optional operation of the contract. Knowing before a run whether a
backend has it keeps the report honest when a short or unlucky run never reaches a
restore: the restore checks are then skipped for a reason, not silently passed.

Enumeration is an optional method beside the contract: ``entities(namespace)`` lists
the entity ids a namespace holds, so that ``memcert audit`` can read every entity of a
store with no workload. A backend without it cannot be audited through its factory
(export its data instead); :func:`enumeration_supported` says which it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from invariants.backend import BackendFactory, MemoryBackend, Restore

__all__ = ["Enumerable", "enumeration_supported", "restore_supported"]


@runtime_checkable
class Enumerable(Protocol):
    """A backend that can list what it holds: the optional ``entities`` capability."""

    def entities(self, namespace: str) -> Iterable[str]:
        """Every entity id of ``namespace`` that may hold records, each once, in any
        order; deleted entities may be listed (their reads are empty).

        Must not write, and must not list entities of another namespace. It may be a
        generator, so a large store is listed without holding every id at once.
        """
        ...


def enumeration_supported(backend: MemoryBackend) -> bool:
    """Whether ``backend`` has the ``entities`` capability (a callable ``entities``)."""
    return isinstance(backend, Enumerable) and callable(getattr(backend, "entities", None))


def restore_supported(factory: BackendFactory, *, attempts: int = 3) -> bool:
    """Detect the restore capability: restoring an entity that was never deleted is
    refused (``not_deleted``) by a backend that has it, and raises
    ``NotImplementedError`` in one that has not. The store is reset around the probe.

    A probe that fails for another reason (a timeout, a dropped connection) is tried
    again, up to ``attempts`` times; if none gets an answer, the backend is taken to
    have restore, and a run still learns otherwise from its first refused restore.
    """
    handle = factory()
    try:
        handle.reset()
        for attempt in range(attempts):
            try:
                handle.restore(Restore("memcert_probe", "probe", 1,
                                       f"memcert-probe-restore-{attempt}"))
            except NotImplementedError:
                return False
            except Exception:  # an unknown outcome: ask again
                continue
            return True
        return True
    finally:
        handle.reset()
        handle.close()
