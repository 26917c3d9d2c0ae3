"""The stateful machine's oracle: what a correct backend would decide, op by op.

The oracle replays the contract's decisions (applied, merged, stale, tombstoned,
predates_delete, not_deleted) in the order the machine sends operations. The machine
counts the decision it expects of each operation, so a run reports which of the
contract's cases it exercised, and it restores only entities the oracle says are
deleted. It never judges the backend: a backend may answer differently for reasons the
contract allows (an unknown outcome, a concurrent interleaving), and only the checkers
decide what is a violation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ContractModel"]


@dataclass(slots=True)
class _Entity:
    current: dict[str, tuple[str, int]] = field(default_factory=dict)
    """slot -> (fact id, causal_seq) of the record a correct backend would serve."""
    deleted: bool = False
    delete_seq: int | None = None
    restore_seq: int | None = None


class ContractModel:
    """A sequential model of one store; each method returns the decision it predicts."""

    def __init__(self) -> None:
        self._entities: dict[tuple[str, str], _Entity] = {}

    def _entity(self, namespace: str, entity_id: str) -> _Entity:
        return self._entities.setdefault((namespace, entity_id), _Entity())

    def delete_seq(self, namespace: str, entity_id: str) -> int | None:
        """The highest causal_seq of the entity's deletes, if it was ever deleted."""
        ent = self._entities.get((namespace, entity_id))
        return None if ent is None else ent.delete_seq

    def is_deleted(self, namespace: str, entity_id: str) -> bool:
        ent = self._entities.get((namespace, entity_id))
        return ent is not None and ent.deleted

    def write(self, namespace: str, entity_id: str, slot: str, fact: str, seq: int) -> str:
        ent = self._entity(namespace, entity_id)
        if ent.deleted:
            return "tombstoned"
        if ent.delete_seq is not None and seq <= ent.delete_seq:
            return "predates_delete"
        held = ent.current.get(slot)
        if held is not None and seq < held[1]:
            return "stale"
        ent.current[slot] = (fact, seq)
        return "merged" if held is not None and held[0] == fact else "applied"

    def delete(self, namespace: str, entity_id: str, seq: int) -> str:
        ent = self._entity(namespace, entity_id)
        if ent.restore_seq is not None and seq < ent.restore_seq:
            return "stale"
        again = ent.deleted
        ent.deleted = True
        ent.delete_seq = seq if ent.delete_seq is None else max(ent.delete_seq, seq)
        ent.current.clear()
        return "already_deleted" if again else "applied"

    def restore(self, namespace: str, entity_id: str, seq: int) -> str:
        ent = self._entity(namespace, entity_id)
        if not ent.deleted or ent.delete_seq is None:
            return "not_deleted"
        if seq < ent.delete_seq:
            return "stale"
        ent.deleted = False
        ent.restore_seq = seq
        return "applied"
