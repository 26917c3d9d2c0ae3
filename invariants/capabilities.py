"""What a backend can do, found by asking it rather than by trusting a declaration.

Restore is the one optional operation of the contract. Knowing before a run whether a
backend has it keeps the report honest when a short or unlucky run never reaches a
restore: the restore checks are then skipped for a reason, not silently passed.
"""

from __future__ import annotations

from invariants.backend import BackendFactory, Restore

__all__ = ["restore_supported"]


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
