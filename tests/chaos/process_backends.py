"""A backend for the sharing probe: its store is a dict of this process, and it does not
say so, as most hand-written stores do not."""

from __future__ import annotations

from invariants.backend import Ack, Delete, Record, Restore, Write

_RECORDS: dict[tuple[str, str], list[Record]] = {}


class Unshared:
    def write(self, op: Write) -> Ack:
        _RECORDS.setdefault((op.namespace, op.entity_id), []).append(
            Record(op.entity_id, op.attribute, op.value, op.causal_seq, 1))
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        _RECORDS.pop((op.namespace, op.entity_id), None)
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        return list(_RECORDS.get((namespace, entity_id), []))

    def reset(self) -> None:
        _RECORDS.clear()

    def close(self) -> None:
        pass


def unshared() -> Unshared:
    return Unshared()
