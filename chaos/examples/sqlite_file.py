"""Stores on one SQLite file that every process shares: one right, two wrong in ways
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
- :data:`write_behind`: a write is decided as the store would, from the file and what
  is queued, answered, and queued in memory; a background thread applies the queue
  every 50 ms, and every other operation applies it first.
  Right under threads and in a run without a kill; a SIGKILL loses what was
  acknowledged and still queued, which ``crash_worker`` sees as lost writes
  (durability). Another process cannot see queued writes either, so the process phase
  may also see them missing. :data:`transactional` is its fix.

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
from typing import Any, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.normalize import Normalizer

__all__ = ["PATH_ENV", "SqliteFileStore", "process_local_lock", "shared_path",
           "transactional", "write_behind"]

PATH_ENV = "MEMCERT_EXAMPLE_SQLITE"
"""Where the shared file is; set on first use, inherited by worker processes."""
BATCH_S = 0.05
"""How often :data:`write_behind` commits."""

_T = TypeVar("_T")

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
                 guard: Callable[[], AbstractContextManager[Any]]) -> None:
        self.db, self.guard = connection, guard
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

    def close(self) -> None:
        self.db.close()

    def _once(self, namespace: str, op_id: str, decide: Callable[[], Ack]) -> Ack:
        with self.guard():
            known = self.answered(namespace, op_id)
            if known is not None:
                return known
            ack = decide()
            self.db.execute("INSERT INTO answers VALUES (?, ?, ?, ?, ?)",
                            (namespace, op_id, int(ack.applied), ack.version, ack.reason))
        return ack

    def _seq(self, table: str, namespace: str, entity_id: str) -> int | None:
        row = self.db.execute(f"SELECT causal_seq FROM {table} WHERE namespace = ? "
                              "AND entity_id = ?", (namespace, entity_id)).fetchone()
        return None if row is None else int(row[0])

    def refusal(self, op: Write, slot: str, newest: int | None = None) -> Ack | None:
        """Why ``op`` must be refused, as its answer, or None to apply it; ``newest`` is
        a causal_seq the slot holds beyond what the file says (a queued write)."""
        if self._seq("tombstones", op.namespace, op.entity_id) is not None:
            return Ack(False, reason="tombstoned")
        current = self.db.execute(
            "SELECT causal_seq, version FROM records WHERE namespace = ? AND entity_id = ? "
            "AND slot = ? ORDER BY causal_seq DESC LIMIT 1",
            (op.namespace, op.entity_id, slot)).fetchone()
        if current is not None and op.causal_seq < current[0]:
            return Ack(False, version=current[1], reason="stale")
        if newest is not None and op.causal_seq < newest:
            return Ack(False, reason="stale")
        line = self._seq("lines", op.namespace, op.entity_id)
        if line is not None and op.causal_seq <= line:
            return Ack(False, reason="stale")
        return None

    def answered(self, namespace: str, op_id: str) -> Ack | None:
        """The answer already given to ``op_id``, if any."""
        row = self.db.execute("SELECT applied, version, reason FROM answers WHERE "
                              "namespace = ? AND op_id = ?", (namespace, op_id)).fetchone()
        return None if row is None else Ack(bool(row[0]), version=row[1], reason=row[2])

    def _write(self, op: Write) -> Ack:
        slot = self.normalizer.attribute_key(op.attribute)
        refused = self.refusal(op, slot)
        if refused is not None:
            return refused
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


class _WriteQueue:
    """This process's writes waiting for the background thread, which applies them in
    one transaction every :data:`BATCH_S`. Deletes, restores and reads first apply what
    is waiting, so within this process every operation sees every write before it."""

    def __init__(self) -> None:
        self.store = transactional()
        self.lock = threading.Lock()
        self.waiting: list[Write] = []
        self.answers: dict[tuple[str, str], Ack] = {}
        self.newest: dict[tuple[str, str, str], int] = {}
        threading.Thread(target=self._every_batch, name="memcert-example-batch",
                         daemon=True).start()

    def put(self, op: Write) -> Ack:
        """Decide ``op`` as the store would, from the file and what is queued, queue it
        if applied, and answer at once."""
        key = (op.namespace, op.op_id)
        slot = self.store.normalizer.attribute_key(op.attribute)
        with self.lock:
            known = self.answers.get(key) or self.store.answered(*key)
            if known is not None:
                return known
            ack = self.store.refusal(op, slot, self.newest.get(
                (op.namespace, op.entity_id, slot))) or Ack(True)
            if ack.applied:
                self.waiting.append(op)
                self.newest[(op.namespace, op.entity_id, slot)] = op.causal_seq
            self.answers[key] = ack
            return ack

    def drain(self) -> None:
        with self.lock:
            self.apply_waiting()

    def apply_waiting(self) -> None:
        """Apply what is queued; the caller holds :attr:`lock`, as for any use of
        :attr:`store`, whose one connection holds one transaction at a time."""
        waiting, self.waiting = self.waiting, []
        for op in waiting:
            self.store.write(op)
        self.answers.clear()
        self.newest.clear()

    def _every_batch(self) -> None:
        pause = threading.Event()
        while not pause.wait(BATCH_S):
            self.drain()


class _WriteBehind:
    """A handle onto this process's queue: writes are answered once queued."""

    def __init__(self, queue: _WriteQueue) -> None:
        self.queue = queue

    def write(self, op: Write) -> Ack:
        return self.queue.put(op)

    def delete(self, op: Delete) -> Ack:
        return self._after_queue(lambda store: store.delete(op))

    def restore(self, op: Restore) -> Ack:
        return self._after_queue(lambda store: store.restore(op))

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        return self._after_queue(lambda store: store.read(namespace, entity_id))

    def reset(self) -> None:
        with self.queue.lock:
            self.queue.waiting.clear()
            self.queue.answers.clear()
            self.queue.newest.clear()
            self.queue.store.reset()

    def close(self) -> None:
        self.queue.drain()

    def _after_queue(self, act: Callable[[SqliteFileStore], _T]) -> _T:
        with self.queue.lock:
            self.queue.apply_waiting()
            return act(self.queue.store)


_QUEUES: dict[Path, _WriteQueue] = {}
_QUEUES_LOCK = threading.Lock()


def write_behind() -> _WriteBehind:
    """Answers a write once it is queued, before the background thread applies it: the
    bug. A SIGKILL loses what was queued."""
    path = shared_path()
    with _QUEUES_LOCK:
        if path not in _QUEUES:
            _QUEUES[path] = _WriteQueue()
        return _WriteBehind(_QUEUES[path])
