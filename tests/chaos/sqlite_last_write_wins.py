"""A known-bad backend that lives in a SQLite file, so worker processes can share it.

It is the cheapest store there is, one upsert per write, and it ignores causal_seq:
whichever write arrives last wins, so a stale write overwrites a newer one.
"""

from __future__ import annotations

import os
import sqlite3

from invariants.backend import Ack, Delete, Record, Restore, Write


class LastWriteWinsFile:
    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS kv (ns TEXT, entity TEXT, attr TEXT, "
                         "value TEXT, seq INTEGER, PRIMARY KEY (ns, entity, attr))")
        self._db.execute("CREATE TABLE IF NOT EXISTS gone (ns TEXT, entity TEXT, "
                         "PRIMARY KEY (ns, entity))")

    def write(self, op: Write) -> Ack:
        if self._db.execute("SELECT 1 FROM gone WHERE ns = ? AND entity = ?",
                            (op.namespace, op.entity_id)).fetchone():
            return Ack(False, reason="tombstoned")
        self._db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?, ?, ?)",
                         (op.namespace, op.entity_id, op.attribute.casefold(), op.value,
                          op.causal_seq))
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        self._db.execute("DELETE FROM kv WHERE ns = ? AND entity = ?", (op.namespace, op.entity_id))
        self._db.execute("INSERT OR IGNORE INTO gone VALUES (?, ?)", (op.namespace, op.entity_id))
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError("no restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        rows = self._db.execute("SELECT entity, attr, value, seq FROM kv WHERE ns = ? AND "
                                "entity = ? ORDER BY seq", (namespace, entity_id)).fetchall()
        return [Record(e, a, v, s, 0) for e, a, v, s in rows]

    def reset(self) -> None:
        self._db.execute("DELETE FROM kv")
        self._db.execute("DELETE FROM gone")

    def close(self) -> None:
        self._db.close()


def factory() -> LastWriteWinsFile:
    """Handles onto the file named by LWW_DB, which the test sets for every process."""
    return LastWriteWinsFile(os.environ["LWW_DB"])
