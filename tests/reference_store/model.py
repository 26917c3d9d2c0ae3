"""A sequential oracle of the contract, used to judge the reference store's decisions.

Tests replay the operations the store applied, in the order of the versions it handed
out, and compare what the store says with what this model says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from invariants.backend import Delete, Restore, Write


@dataclass
class EntityModel:
    records: dict[str, tuple[str, int]] = field(default_factory=dict)
    deleted: bool = False
    delete_seq: int | None = None
    restore_seq: int | None = None

    def apply(self, op: Write | Delete | Restore, attr_key: str | None = None) -> str | None:
        """Apply ``op``; return None if it applies, else the reason it is refused."""
        if isinstance(op, Write):
            assert attr_key is not None
            if self.deleted:
                return "tombstoned"
            if self.delete_seq is not None and op.causal_seq <= self.delete_seq:
                return "predates_delete"
            current = self.records.get(attr_key)
            if current is not None and op.causal_seq < current[1]:
                return "stale"
            self.records[attr_key] = (op.value, op.causal_seq)
            return None
        if isinstance(op, Delete):
            if self.restore_seq is not None and op.causal_seq < self.restore_seq:
                return "stale"
            self.deleted = True
            self.delete_seq = max(op.causal_seq, self.delete_seq or 0)
            self.records.clear()
            return None
        if not self.deleted:
            return "not_deleted"
        assert self.delete_seq is not None
        if op.causal_seq < self.delete_seq:
            return "stale"
        self.deleted = False
        self.restore_seq = op.causal_seq
        return None

    def values(self) -> set[str]:
        return {value for value, _ in self.records.values()}
