"""Stores on one SQLite file that every process shares: two right, two wrong in a way
only worker processes or a crash show.

Each keeps the passing dict store's rules (:mod:`chaos.examples.passing_dict`): one
record per folded attribute, a tombstone per deleted entity, no lower causal_seq over a
higher one, no write from before a lifted delete, and one answer per op_id. They differ
only in how a decision is made atomic and when it becomes durable:

- :data:`transactional`: each operation is one ``BEGIN IMMEDIATE`` transaction, which
  SQLite serialises across processes. Certified with threads, with processes and under
  ``crash_worker``.
- :data:`process_local_lock`: check-then-insert under a ``threading.Lock``, in
  autocommit mode. Right under threads; two processes interleave their checks and
  inserts, so the process phase finds two records for one attribute (uniqueness).
- :data:`write_behind`: one connection per process, whose open transaction a background
  thread commits every 50 ms; a write is acknowledged before its commit. Right under
  threads and in a run without a kill; a SIGKILL rolls back what was acknowledged and
  not yet committed, which ``crash_worker`` sees as lost writes (durability). Another
  process cannot see those writes until the commit either, so the process phase may
  also see them missing.
- :data:`write_behind_fixed`: the same, with the commit before the acknowledgement.

The file is created on first use in a temporary folder and published in
``MEMCERT_EXAMPLE_SQLITE``, so worker processes started afterwards open the same one, as
the reference store does with ``MEMCERT_DB_URL``.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.normalize import Normalizer

__all__ = ["PATH_ENV", "SqliteFileStore", "process_local_lock", "shared_path",
           "transactional", "write_behind", "write_behind_fixed"]

PATH_ENV = "MEMCERT_EXAMPLE_SQLITE"
"""Where the shared file is; set on first use, inherited by worker processes."""
BATCH_S = 0.05
"""How often :data:`write_behind` commits."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (version INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT, entity_id TEXT, slot TEXT, attribute TEXT, value TEXT, causal_seq INT);
CREATE TABLE IF NOT EXISTS tombstones (namespace TEXT, entity_id TEXT, causal_seq INT,
    PRIMARY KEY (namespace, entity_id));
CREATE TABLE IF NOT EXISTS lines (namespace TEXT, entity_id TEXT, causal_seq INT,
    PRIMARY KEY (namespace, entity_id));
CREATE TABLE IF NOT EXISTS answers (namespace TEXT, op_id TEXT, applied INT, version INT,
    reason TEXT, PRIMARY KEY (namespace, op_id));
"""


def shared_path() -> Path:
    """The file every handle of this process tree opens."""
    named = os.environ.get(PATH_ENV)
    if named:
        return Path(named)
    path = Path(tempfile.mkdtemp(prefix="memcert-example-")) / "store.sqlite3"
    os.environ[PATH_ENV] = str(path)
    return path


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=60, isolation_level=None,
                                 check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.executescript(_SCHEMA)
    return connection


class SqliteFileStore:
    """A handle: a connection, and how each decision is guarded.

    ``guard`` makes one decision (a read of the entity's state, then the changes) a
    step; ``durable`` is called after it, before the answer.
    """

    def __init__(self, connection: sqlite3.Connection,
                 guard: Callable[[], AbstractContextManager[Any]],
                 durable: Callable[[], None] = lambda: None, *, owned: bool = True) -> None:
        self.db, self.guard, self.durable, self.owned = connection, guard, durable, owned
        self.normalizer = Normalizer("lexical")

    def write(self, op: Write) -> Ack:
        return self._once(op.namespace, op.op_id, lambda: self._write(op))

    def delete(self, op: Delete) -> Ack:
        return self._once(op.namespace, op.op_id, lambda: self._delete(op))

    def restore(self, op: Restore) -> Ack:
        return self._once(op.namespace, op.op_id, lambda: self._restore(op))

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        with self.guard():
            rows = self.db.execute(
                "SELECT entity_id, attribute, value, causal_seq, version FROM records "
                "WHERE namespace = ? AND entity_id = ? ORDER BY causal_seq, version",
                (namespace, entity_id)).fetchall()
        return [Record(*row) for row in rows]

    def reset(self) -> None:
        with self.guard():
            for table in ("records", "tombstones", "lines", "answers"):
                self.db.execute(f"DELETE FROM {table}")
        self.durable()

    def close(self) -> None:
        if self.owned:
            self.db.close()

    def _once(self, namespace: str, op_id: str, decide: Callable[[], Ack]) -> Ack:
        with self.guard():
            row = self.db.execute("SELECT applied, version, reason FROM answers WHERE "
                                  "namespace = ? AND op_id = ?", (namespace, op_id)).fetchone()
            if row is not None:
                return Ack(bool(row[0]), version=row[1], reason=row[2])
            ack = decide()
            self.db.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?)",
                            (namespace, op_id, int(ack.applied), ack.version, ack.reason))
        self.durable()
        return ack

    def _seq(self, table: str, namespace: str, entity_id: str) -> int | None:
        row = self.db.execute(f"SELECT causal_seq FROM {table} WHERE namespace = ? "
                              "AND entity_id = ?", (namespace, entity_id)).fetchone()
        return None if row is None else int(row[0])

    def _write(self, op: Write) -> Ack:
        slot = self.normalizer.attribute_key(op.attribute)
        if self._seq("tombstones", op.namespace, op.entity_id) is not None:
            return Ack(False, reason="tombstoned")
        current = self.db.execute(
            "SELECT causal_seq, version FROM records WHERE namespace = ? AND entity_id = ? "
            "AND slot = ? ORDER BY causal_seq DESC LIMIT 1",
            (op.namespace, op.entity_id, slot)).fetchone()
        if current is not None and op.causal_seq < current[0]:
            return Ack(False, version=current[1], reason="stale")
        line = self._seq("lines", op.namespace, op.entity_id)
        if line is not None and op.causal_seq <= line:
            return Ack(False, reason="stale")
        self.db.execute("DELETE FROM records WHERE namespace = ? AND entity_id = ? AND "
                        "slot = ?", (op.namespace, op.entity_id, slot))
        cursor = self.db.execute(
            "INSERT INTO records (namespace, entity_id, slot, attribute, value, causal_seq) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (op.namespace, op.entity_id, slot, op.attribute, op.value, op.causal_seq))
        return Ack(True, version=cursor.lastrowid)

    def _delete(self, op: Delete) -> Ack:
        self.db.execute("DELETE FROM records WHERE namespace = ? AND entity_id = ?",
                        (op.namespace, op.entity_id))
        held = self._seq("tombstones", op.namespace, op.entity_id)
        self.db.execute("INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?)",
                        (op.namespace, op.entity_id, max(op.causal_seq, held or op.causal_seq)))
        return Ack(True)

    def _restore(self, op: Restore) -> Ack:
        held = self._seq("tombstones", op.namespace, op.entity_id)
        if held is None:
            return Ack(False, reason="not_deleted")
        if op.causal_seq < held:
            return Ack(False, reason="stale")
        self.db.execute("DELETE FROM tombstones WHERE namespace = ? AND entity_id = ?",
                        (op.namespace, op.entity_id))
        self.db.execute("INSERT OR REPLACE INTO lines VALUES (?, ?, ?)",
                        (op.namespace, op.entity_id, held))
        return Ack(True)


def transactional() -> SqliteFileStore:
    """Each decision one ``BEGIN IMMEDIATE`` transaction: right across processes."""
    db = _connect(shared_path())

    @contextmanager
    def immediate() -> Iterator[None]:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    return SqliteFileStore(db, immediate)


_LOCAL_LOCK = threading.Lock()


def process_local_lock() -> SqliteFileStore:
    """Each decision under a lock of this process only, in autocommit mode: the bug."""
    return SqliteFileStore(_connect(shared_path()), lambda: _LOCAL_LOCK)


class _Batched:
    """This process's one connection, with a transaction left open after each write and
    committed by a background thread every :data:`BATCH_S` (or, fixed, at once)."""

    def __init__(self, *, commit_before_ack: bool) -> None:
        self.db = _connect(shared_path())
        self.lock = threading.RLock()
        self.commit_before_ack = commit_before_ack
        self.open = False
        if not commit_before_ack:
            threading.Thread(target=self._commit_every_batch, name="memcert-example-batch",
                             daemon=True).start()

    @contextmanager
    def guard(self) -> Iterator[None]:
        with self.lock:
            if not self.open:
                self.db.execute("BEGIN IMMEDIATE")
                self.open = True
            yield

    def durable(self) -> None:
        if self.commit_before_ack:
            self._commit()

    def _commit(self) -> None:
        with self.lock:
            if self.open:
                self.db.execute("COMMIT")
                self.open = False

    def _commit_every_batch(self) -> None:
        while True:
            threading.Event().wait(BATCH_S)
            self._commit()


_BATCHES: dict[bool, _Batched] = {}
_BATCHES_LOCK = threading.Lock()


def _batched(commit_before_ack: bool) -> SqliteFileStore:
    with _BATCHES_LOCK:
        batch = _BATCHES.get(commit_before_ack)
        if batch is None:
            batch = _BATCHES[commit_before_ack] = _Batched(commit_before_ack=commit_before_ack)
    return SqliteFileStore(batch.db, batch.guard, batch.durable, owned=False)


def write_behind() -> SqliteFileStore:
    """Acknowledges a write before the background thread commits it: the bug."""
    return _batched(False)


def write_behind_fixed() -> SqliteFileStore:
    """The same store, committing before it answers."""
    return _batched(True)

