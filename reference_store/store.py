"""The reference store: a memory backend that keeps every invariant memcert checks.

Each write, delete and restore is one transaction that first upserts the entity's row
in ``entities``. That upsert is the serialization point: on PostgreSQL it takes the row
lock, on SQLite the transaction already holds the database write lock (``BEGIN
IMMEDIATE``). Under that lock the store reads the tombstone state and the current record
of the key, and decides. Nothing is applied that was decided on data which may have
changed since, which is why concurrent writers can never both insert, and a stale write
can never slip past a newer one.

Every change to an entity's memories also bumps its ``next_version`` under that lock,
and the PostgreSQL paths rely on it. A write there first tries without a transaction:
it reads the entity and the key's record, decides, and sends its changes in one
statement that applies them only if the entity's tombstone state and the key's record
are still as read (``_guarded_steps``). If another operation got in between every time,
it takes the lock as above, in a statement that also reads the record
(``statements.lock_current``).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from sqlalchemy import Connection, Engine, delete, func, select, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument, InvalidInput

from . import lifecycle, retrieval, transfer
from . import statements as sql
from .config import StoreConfig
from .engine import (
    IMMEDIATE,
    Connections,
    DriverTransaction,
    is_memory_url,
    make_engine,
    normalize_url,
)
from .normalize import Embedder, Normalizer, load_lexicon
from .retrieval import Hit
from .schema import entities, memories, metadata, operations, tombstones
from .transfer import ImportReport
from .trust import place
from .validation import check_memory_type, check_op, check_strength, check_text

if TYPE_CHECKING:
    from .metrics import StoreMetrics

__all__ = ["ReferenceStore", "WriteOptions"]

T = TypeVar("T")

_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03", "23505"})


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What an agent-facing write adds to the contract's ``Write``."""

    memory_type: str = "semantic"
    tags: tuple[str, ...] = ()
    score: float = 1.0
    half_life_seconds: float | None = None


_Changes = tuple[tuple[sql.Prepared, dict[str, Any]], ...]
"""Statements and their parameters, in the order they must run."""
_Decide = Callable[[tuple[Any, ...], Callable[[], tuple[Any, ...] | None], float],
                   tuple[Ack, _Changes]]
"""An operation's rules (see ``_decide_write``)."""


_Steps = Generator[sql.Plan[Any], Any, Ack | None]
"""A guarded write's plans, each answered by its caller (see ``_guarded_steps``)."""

_Locked = Generator[sql.Plan[Any], Any, Ack]
"""A delete's or a restore's plans, sent in one transaction (see ``_planned_change``)."""

_GUARDED_TRIES = 3
"""Reads and guarded writes a write tries on PostgreSQL before it takes the entity lock:
each failed guard means another operation changed the key or deleted or restored the
entity in between."""


class _Replayed(Exception):
    """The op_id was seen before: the transaction is rolled back and the first outcome wins.

    ``outcome`` is that outcome when the write found it already logged, before changing
    anything; otherwise the caller reads it."""

    def __init__(self, outcome: Ack | None = None) -> None:
        super().__init__(outcome)
        self.outcome = outcome


class ReferenceStore:
    """A handle onto one reference database; open as many as you like onto the same one."""

    def __init__(
        self,
        url: str | os.PathLike[str] | URL,
        config: StoreConfig | None = None,
        *,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
        engine: Engine | None = None,
        metrics: StoreMetrics | None = None,
    ) -> None:
        self.config = config or StoreConfig()
        self.metrics = metrics
        self.url = url if isinstance(url, URL) else normalize_url(os.fspath(url))
        if self.config.level == "semantic" and embedder is None:
            raise InvalidArgument(
                "level='semantic' needs an embedder; pass embedder=<callable mapping a "
                "list of texts to vectors>, or use level='lexical'."
            )
        lexicon = load_lexicon(self.config.lexicon_path) if self.config.lexicon_path else None
        self.normalizer = Normalizer(
            self.config.level,
            lexicon=lexicon,
            embedder=embedder,
            threshold=self.config.semantic_threshold,
        )
        self._clock = clock
        self._owns_engine = engine is None
        self.engine = engine if engine is not None else make_engine(self.url, self.config)
        self._dialect = self.engine.dialect.name
        self._serial = threading.RLock() if is_memory_url(self.url) else None
        self._jitter = random.Random()
        self._connections = Connections(self.engine)
        self._create_schema()
        # Compiled after the first connection, which tells the dialect what the server
        # supports (RETURNING, casts).
        self._sql = sql.prepare_all(self.engine.dialect)

    # -- the contract ---------------------------------------------------------------

    def write(self, op: Write) -> Ack:
        """Apply a contract write as a trusted semantic memory with default strength."""
        return self.remember(op)

    def remember(self, op: Write, options: WriteOptions = WriteOptions()) -> Ack:
        """Write with the agent-facing extras: memory type, tags, score and half-life."""
        row = self._write_row(op, options)
        return self._run_op(op, "write", self._write_rules(op, row), row["attr_key"])

    def _remember_locked(self, op: Write, options: WriteOptions) -> Ack:
        """:meth:`remember` under the entity lock from the start, for a write whose
        guarded attempts were sent elsewhere and kept missing (service/pool.py)."""
        row = self._write_row(op, options)
        return self._run_op(op, "write", self._write_rules(op, row), row["attr_key"],
                            guarded=False)

    def _planned_write(self, op: Write, options: WriteOptions) -> _Steps | None:
        """:meth:`remember`'s guarded attempts as plans, for a caller that sends them
        itself (service/pool.py, from its event loop), sends back each plan's answer,
        and answers a guarded write's refusal with :func:`guard_refused`. They end in
        the outcome, or in None when the lock must be taken (:meth:`_remember_locked`).

        None where writes are never guarded (SQLite) or where deciding may take long
        (the semantic level asks an embedder). Bad input raises here, at once.
        """
        read_state = self._sql.read_state
        if read_state is None or self.normalizer.level == "semantic":
            return None
        row = self._write_row(op, options)
        return self._guarded_steps(read_state, op, "write", self._write_rules(op, row),
                                   row["attr_key"])

    def _write_row(self, op: Write, options: WriteOptions) -> dict[str, Any]:
        """Check a write's input (raising before anything is sent) and build its row."""
        with self._counting_invalid("write"):
            check_op(op, max_value_bytes=self.config.max_value_bytes)
            check_memory_type(options.memory_type)
            for tag in options.tags:
                check_text("tags", tag, max_bytes=256)
            check_strength(options.score, options.half_life_seconds)
        attr_key = self.normalizer.attribute_key(op.attribute)
        value_key = self.normalizer.value_key(op.value)
        placed = place(op.source, op.value, options.memory_type, options.score)
        half_life = (self.config.default_half_life_seconds if options.half_life_seconds is None
                     else options.half_life_seconds)
        row = {
            "namespace": op.namespace,
            "entity_id": op.entity_id,
            "attribute": op.attribute,
            "attr_key": attr_key,
            "value": op.value,
            "value_key": value_key,
            "causal_seq": op.causal_seq,
            "op_id": op.op_id,
            "source": op.source,
            "trust": placed.trust,
            "memory_type": placed.memory_type,
            "instruction_like": placed.instruction_like,
            "tags": json.dumps(sorted(set(options.tags)), ensure_ascii=False)
                    if options.tags else "[]",
            "score": placed.score,
            "half_life_seconds": half_life,
            "access_count": 0,
            "status": "active",
        }
        return row

    def _write_rules(self, op: Write, row: dict[str, Any]) -> _Decide:
        return lambda state, current, now: self._decide_write(op, row, state, current, now)

    def delete(self, op: Delete) -> Ack:
        return self._run_op(op, "delete", self._entity_rules(op, "delete"))

    def restore(self, op: Restore) -> Ack:
        return self._run_op(op, "restore", self._entity_rules(op, "restore"))

    def _planned_change(self, op: Delete | Restore) -> _Locked | None:
        """A delete or a restore under the entity lock as plans, for a caller that sends
        them in one transaction itself (service/pool.py, from its event loop): the
        statements :meth:`delete` and :meth:`restore` send, in the same order, and the
        same rules. Each plan's answer is sent back, and a statement's refusal thrown
        in; they end in the outcome, or raise :class:`_Replayed` for an op_id already
        logged (the transaction must then be rolled back).

        None where the database takes one writer at a time (SQLite): there the lock is
        best waited for in a thread. Bad input raises here, at once.
        """
        kind = "delete" if isinstance(op, Delete) else "restore"
        decide = self._entity_rules(op, kind)
        if self._sql.read_state is None:
            return None
        return self._locked_steps(op, kind, decide)

    def _entity_rules(self, op: Delete | Restore, kind: str) -> _Decide:
        """Check a delete's or a restore's input (raising before anything is sent); its
        rules, which read the entity row and never a record."""
        with self._counting_invalid(kind):
            check_op(op, max_value_bytes=self.config.max_value_bytes)
        if isinstance(op, Delete):
            return lambda state, _, now: self._decide_delete(op, state, now)
        return lambda state, _, now: self._decide_restore(op, state, now)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        """Active records of one entity, oldest cause first."""
        return self._answer(self._plan_read(namespace, entity_id))

    # -- the agent-facing API ---------------------------------------------------------

    def search(self, namespace: str, query: str, *, tags: Iterable[str] = (),
               memory_type: str | None = None, limit: int = 10,
               now: float | None = None) -> list[Hit]:
        """Active memories ranked by 0.6 × similarity to ``query`` + 0.4 × strength."""
        return retrieval.search(self, namespace, query, tags=tags, memory_type=memory_type,
                                limit=limit, now=now)

    def recall(self, namespace: str, *, entity_id: str | None = None,
               tags: Iterable[str] = (), memory_type: str | None = None, limit: int = 10,
               now: float | None = None) -> list[Hit]:
        """The strongest active memories, optionally of one entity."""
        return retrieval.recall(self, namespace, entity_id=entity_id, tags=tags,
                                memory_type=memory_type, limit=limit, now=now)

    def touch(self, namespace: str, entity_id: str, attribute: str) -> int:
        """Count one use of a memory; returns the new access count (0 if none is active)."""
        return retrieval.touch(self, namespace, entity_id, attribute)

    def forget(self, namespace: str, entity_id: str, attribute: str | None = None) -> int:
        """Archive memories (never a physical delete); returns how many rows were archived."""
        return lifecycle.forget(self, namespace, entity_id, attribute)

    def export_jsonl(self, out: TextIO, *, namespace: str | None = None) -> int:
        """Write every row as JSON lines; returns the number of lines written."""
        return transfer.export_jsonl(self, out, namespace=namespace)

    def import_jsonl(self, lines: Iterable[str | bytes]) -> ImportReport:
        """Import an export; bad lines are reported, never half-written."""
        return transfer.import_jsonl(self, lines)

    def reset(self) -> None:
        with self._transaction() as conn:
            for table in (memories, tombstones, operations, entities):
                conn.execute(delete(table))

    def close(self) -> None:
        self._connections.close()
        if self._owns_engine:
            self.engine.dispose()

    def __enter__(self) -> ReferenceStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------------

    def _run_op(self, op: Write | Delete | Restore, kind: str, decide: _Decide,
                attr_key: str | None = None, *, guarded: bool = True) -> Ack:
        """One operation: the entity lock, the decision under it, its changes and the
        operation log, as one transaction; on PostgreSQL a write first tries without
        one (:meth:`_guarded_steps`). ``attr_key`` is a write's, whose decision reads the
        key's current record."""
        def attempt() -> Ack:
            with self._driver(write=True) as tx:
                state, current = self._lock(tx, op, attr_key)
                now = self._clock()
                ack, changes = decide(state, current, now)
                self._finish(tx, changes, _logged(op, kind, ack, now))
                return ack

        try:
            read_state = self._sql.read_state
            sent = (None if attr_key is None or read_state is None or not guarded
                    else self._sent(self._guarded_steps(read_state, op, kind, decide, attr_key)))
            ack = self._retrying(attempt) if sent is None else sent
        except _Replayed as replayed:
            if replayed.outcome is not None:
                return replayed.outcome
            return self._answer(self._plan_first_outcome(op.namespace, op.op_id))
        self._acknowledged(kind, ack)
        return ack

    def _acknowledged(self, kind: str, ack: Ack) -> None:
        if self.metrics is not None:
            self.metrics.acknowledged(kind, ack)

    def _guarded_steps(self, read_state: sql.Prepared, op: Write | Delete | Restore,
                       kind: str, decide: _Decide, attr_key: str) -> _Steps:
        """A write on PostgreSQL in two round trips and no transaction, as the plans to
        send, each plan's answer sent back: read what it decides on
        (:func:`~reference_store.statements.read_state`), decide, and send the changes
        with a guard that applies them only if the entity's tombstone state and the
        key's current record are still as read
        (:func:`~reference_store.statements.guarded_write`). It ends in the outcome, or
        in None if they changed under it every time: the lock must be taken.

        A replay whose first outcome is already logged is answered from the read alone
        (raising :class:`_Replayed` with it).
        """
        reading = {"p_namespace": op.namespace, "p_entity_id": op.entity_id,
                   "p_attr_key": attr_key, "p_op_id": op.op_id}
        for _ in range(_GUARDED_TRIES):
            row = yield sql.Plan(read_state, reading, _only_row)
            seen, deleted, delete_seq, restore_seq = row[:4]
            record, (applied, logged_version, reason) = row[4:9], row[9:]
            found = _found(record)
            if applied is not None:
                raise _Replayed(Ack(bool(applied), None if logged_version is None
                                    else int(logged_version), reason))
            # The version is the statement's to hand out; this one is only a placeholder.
            state = (1 if seen is None else seen + 1, bool(deleted), delete_seq, restore_seq)
            now = self._clock()
            ack, changes = decide(state, partial(_found, record), now)
            parts = tuple(part for part, _ in changes)
            statement = self._sql.guarded[(seen is None, found is not None,
                                           tuple(part.sql for part in parts))]
            params = sql.prefixed(
                {"p_namespace": op.namespace, "p_entity_id": op.entity_id,
                 "p_deleted": bool(deleted), "p_delete_seq": delete_seq,
                 "p_current_id": None if found is None else found[0],
                 "p_current_seq": None if found is None else found[3]},
                *(given for _, given in changes), _logged(op, kind, ack, now))
            version, held = yield sql.Plan(statement, params, _guard_answer, writes=True)
            if held:
                inserted = any(part is self._sql.insert_memory for part in parts)
                return Ack(True, int(version)) if inserted else ack
            if self.metrics is not None:
                self.metrics.guard_missed()
        return None

    def _locked_steps(self, op: Delete | Restore, kind: str, decide: _Decide) -> _Locked:
        """See :meth:`_planned_change`; the lock is :meth:`_lock`'s for an operation that
        reads no record."""
        state = yield sql.Plan(self._sql.lock_entity,
                               {"namespace": op.namespace, "entity_id": op.entity_id},
                               _only_row, writes=True)
        now = self._clock()
        ack, changes = decide(state, _no_record, now)
        yield from self._finish_steps(changes, _logged(op, kind, ack, now))
        return ack

    def _sent(self, steps: _Steps) -> Ack | None:
        """Run a write's guarded attempts from this thread."""
        answer: Any = None
        while True:
            try:
                plan = steps.send(answer)
            except StopIteration as done:
                result: Ack | None = done.value
                return result
            answer = (self._retrying(partial(self._send_guarded, plan)) if plan.writes
                      else self._answer(plan))

    def _send_guarded(self, plan: sql.Plan[tuple[Any, bool]]) -> tuple[Any, bool]:
        """Send a guarded write as a transaction of its own."""
        with self._driver(write=True, single=True) as tx:
            try:
                rows = tx.all(plan.statement, plan.params)
            except IntegrityError as error:
                return guard_refused(error)
        return plan.finish(rows)

    def _lock(self, tx: DriverTransaction, op: Write | Delete | Restore, attr_key: str | None
              ) -> tuple[tuple[Any, ...], Callable[[], tuple[Any, ...] | None]]:
        """The entity row as the lock returned it, and how to get the key's current
        record under the lock (a write's decision may not need it).

        On PostgreSQL a write takes the lock and reads the record in one statement
        (:func:`~reference_store.statements.lock_current`), whose record is kept only
        if nothing changed the entity between its snapshot and the lock.
        """
        where = {"p_namespace": op.namespace, "p_entity_id": op.entity_id,
                 "p_attr_key": attr_key}
        lock_current = self._sql.lock_current
        if attr_key is not None and lock_current is not None:
            row = tx.one(lock_current, where)
            state, seen, found = row[:4], row[4], row[5:]
            if state[0] == (0 if seen is None else seen) + 1:
                return state, partial(_found, found)
        else:
            state = tx.one(self._sql.lock_entity, {"namespace": op.namespace,
                                                   "entity_id": op.entity_id})
        return state, lambda: tx.first(self._sql.current_record, where)

    def _finish(self, tx: DriverTransaction, changes: _Changes, log: dict[str, Any]) -> None:
        """Send :meth:`_finish_steps` on ``tx``, throwing each refusal back in."""
        steps = self._finish_steps(changes, log)
        refused: IntegrityError | None = None
        while True:
            try:
                plan = steps.send(None) if refused is None else steps.throw(refused)
            except StopIteration:
                return
            refused = None
            try:
                tx.run(plan.statement, plan.params)
            except IntegrityError as error:
                refused = error

    def _finish_steps(self, changes: _Changes, log: dict[str, Any]
                      ) -> Generator[sql.Plan[Any], None, None]:
        """The decided changes, then the operation log's insert, which a replay's op_id
        makes fail (raising :class:`_Replayed` when that refusal is thrown in).

        On PostgreSQL the changes the log can be combined with go in its statement
        (:func:`~reference_store.statements.with_log`), and only those before them (a
        supersede) in statements of their own.
        """
        with_log = self._sql.with_log
        for start in range(len(changes) if with_log else 0):
            combined = with_log.get(tuple(statement.sql for statement, _ in changes[start:]))
            if combined is not None:
                for statement, params in changes[:start]:
                    yield sql.Plan(statement, params, _no_rows, writes=True)
                yield from self._log_steps(
                    combined, sql.prefixed(*(p for _, p in changes[start:]), log), alone=False)
                return
        for statement, params in changes:
            yield sql.Plan(statement, params, _no_rows, writes=True)
        yield from self._log_steps(self._sql.insert_operation, log, alone=True)

    @staticmethod
    def _log_steps(statement: sql.Prepared, params: dict[str, Any], *, alone: bool
                   ) -> Generator[sql.Plan[Any], None, None]:
        try:
            yield sql.Plan(statement, params, _no_rows, writes=True)
        except IntegrityError as error:
            # Combined with changes, the refusal may be theirs: only the log's is a replay.
            if alone or _refused_by(error, operations.name):
                raise _Replayed from error
            raise

    @contextmanager
    def _counting_invalid(self, kind: str) -> Iterator[None]:
        """Count input refused before any transaction, then let the error through."""
        try:
            yield
        except InvalidInput:
            if self.metrics is not None:
                self.metrics.invalid(kind)
            raise

    def _plan_first_outcome(self, namespace: str, op_id: str) -> sql.Plan[Ack]:
        """The outcome logged for ``op_id``, read by one statement of its own (one round
        trip to PostgreSQL, not three): the row is committed, since the insert it
        refused waited for the transaction that logged it."""
        return sql.Plan(self._sql.first_outcome, {"p_namespace": namespace, "p_op_id": op_id},
                        _ack)

    # Each decision gets the entity row as the lock returned it: (next_version, deleted,
    # delete_seq, restore_seq), how to read the key's current record under the lock,
    # and the clock read once under that lock. It returns the outcome and the changes
    # that make it so, in the order they must run.

    def _decide_write(self, op: Write, row: dict[str, Any], state: tuple[Any, ...],
                      current: Callable[[], tuple[Any, ...] | None], now: float
                      ) -> tuple[Ack, _Changes]:
        next_version, deleted, delete_seq, _ = state
        version = int(next_version)
        if deleted:
            return Ack(False, reason="tombstoned"), ()
        if delete_seq is not None and op.causal_seq <= delete_seq:
            return Ack(False, reason="predates_delete"), ()
        found = current()
        changes: _Changes = ()
        if found is not None:
            current_id, current_value, current_key, current_seq, current_version = found
            if op.causal_seq < current_seq:
                return Ack(False, version=int(current_version), reason="stale"), ()
            if current_key == row["value_key"] or (
                self.normalizer.level == "semantic"
                and self.normalizer.same_fact(current_value, op.value)
            ):
                return Ack(True, version=int(current_version), reason="merged"), (
                    (self._sql.merge, {"p_id": current_id, "p_causal_seq": op.causal_seq,
                                       "p_now": now}),)
            changes = ((self._sql.supersede, {"p_id": current_id, "p_version": version,
                                              "p_now": now}),)
        return Ack(True, version=version), (*changes, (self._sql.insert_memory, {
            **row, "version": version, "created_at": now, "updated_at": now,
            "last_accessed_at": None, "superseded_by": None}))

    def _decide_delete(self, op: Delete, state: tuple[Any, ...], now: float
                       ) -> tuple[Ack, _Changes]:
        next_version, deleted, delete_seq, restore_seq = state
        version = int(next_version)
        if restore_seq is not None and op.causal_seq < restore_seq:
            return Ack(False, reason="stale"), ()
        key = {"p_namespace": op.namespace, "p_entity_id": op.entity_id}
        horizon = op.causal_seq if delete_seq is None else max(delete_seq, op.causal_seq)
        return Ack(True, version=version, reason="already_deleted" if deleted else None), (
            (self._sql.mark_deleted, {**key, "p_delete_seq": horizon}),
            (self._sql.insert_tombstone, {
                "namespace": op.namespace, "entity_id": op.entity_id, "version": version,
                "causal_seq": op.causal_seq, "op_id": op.op_id, "reason": op.reason,
                "created_at": now, "restored_at": None, "restore_seq": None,
                "restore_op_id": None}),
            (self._sql.delete_active, {**key, "p_version": version, "p_now": now}))

    def _decide_restore(self, op: Restore, state: tuple[Any, ...], now: float
                        ) -> tuple[Ack, _Changes]:
        next_version, deleted, delete_seq, _ = state
        version = int(next_version)
        if not deleted:
            return Ack(False, reason="not_deleted"), ()
        if op.causal_seq < delete_seq:
            return Ack(False, reason="stale"), ()
        key = {"p_namespace": op.namespace, "p_entity_id": op.entity_id}
        return Ack(True, version=version), (
            (self._sql.mark_restored, {**key, "p_restore_seq": op.causal_seq}),
            (self._sql.close_tombstones, {**key, "p_now": now, "p_restore_seq": op.causal_seq,
                                          "p_op_id": op.op_id}))

    # -- calls of one statement ----------------------------------------------------------

    def _plan_read(self, namespace: str, entity_id: str) -> sql.Plan[list[Record]]:
        """:meth:`read` as a plan (see :class:`~reference_store.statements.Plan`)."""
        return sql.Plan(self._sql.read_active,
                        {"p_namespace": namespace, "p_entity_id": entity_id}, _records)

    def _plan_reads(self, keys: Sequence[tuple[str, str]]) -> sql.Plan[list[list[Record]]]:
        """The reads of many (namespace, entity) pairs as one plan, answered in their
        order; PostgreSQL only (see :func:`~reference_store.statements.read_active_many`)."""
        statement = self._sql.read_active_many
        if statement is None:
            raise NotImplementedError(f"{self.engine.dialect.name} cannot read many entities "
                                      "in one statement")
        return sql.Plan(statement, {"p_namespaces": [ns for ns, _ in keys],
                                    "p_entity_ids": [entity for _, entity in keys]},
                        lambda rows: _records_of_each(rows, len(keys)))

    def _answer(self, plan: sql.Plan[T]) -> T:
        """Send a plan's one statement, as a transaction of its own, and finish it."""
        def attempt() -> Sequence[tuple[Any, ...]]:
            with self._driver(write=plan.writes, single=True) as tx:
                return tx.all(plan.statement, plan.params)

        return plan.finish(self._retrying(attempt) if plan.writes else attempt())

    # -- plumbing -------------------------------------------------------------------

    def _driver(self, *, write: bool, single: bool = False) -> DriverTransaction:
        """A transaction for the prepared statements in ``self._sql``; ``single`` when it
        is one statement, which then runs without BEGIN and COMMIT (see
        :class:`DriverTransaction`)."""
        return DriverTransaction(self._connections, write=write, serial=self._serial,
                                 single=single)

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """A write transaction holding the database write lock on SQLite."""
        with self._serialized(), self.engine.connect() as conn:
            conn = conn.execution_options(**{IMMEDIATE: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _connect(self) -> Iterator[Connection]:
        """A read-only snapshot."""
        with self._serialized(), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _serialized(self) -> Iterator[None]:
        if self._serial is None:
            yield
        else:
            with self._serial:
                yield

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` again on lock contention, with bounded jittered backoff."""
        for tries in range(self.config.max_retries + 1):
            try:
                return attempt()
            except DBAPIError as error:
                if tries == self.config.max_retries or not _transient(error):
                    raise
                if self.metrics is not None:
                    self.metrics.retried()
                time.sleep(min(0.1, 0.002 * 2**tries) * self._jitter.random())
        raise AssertionError("unreachable")

    def _create_schema(self) -> None:
        """Create tables once, even when many processes open the store at the same moment."""
        def attempt() -> None:
            with self._transaction() as conn:
                if self._dialect == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(726710001)"))
                metadata.create_all(conn)

        self._retrying(attempt)

    def count_rows(self, *, status: str | None = None) -> int:
        """Rows in the memory table, for audits and for tests that prove nothing was written."""
        query = select(func.count()).select_from(memories)
        if status is not None:
            query = query.where(memories.c.status == status)
        with self._connect() as conn:
            return int(conn.execute(query).scalar_one())


def _logged(op: Write | Delete | Restore, kind: str, ack: Ack, now: float) -> dict[str, Any]:
    """The operation log's row of an operation and its outcome."""
    return {"namespace": op.namespace, "entity_id": op.entity_id, "op_id": op.op_id,
            "kind": kind, "applied": ack.applied, "version": ack.version,
            "reason": ack.reason, "created_at": now}


def guard_refused(error: IntegrityError) -> tuple[Any, bool]:
    """What a guarded write refused by the database means: a replay (its op_id is
    logged: raises :class:`_Replayed`), a guard that did not hold (an active record of
    the key was made since the read, which the unique index refuses: no version, not
    held), or an error, raised."""
    if _refused_by(error, operations.name):
        raise _Replayed from error
    if _constraint(error) == _ONE_ACTIVE:
        return None, False
    raise error


def _guard_answer(rows: Sequence[tuple[Any, ...]]) -> tuple[Any, bool]:
    """A guarded write's one row: the version it handed out, and whether its guard held."""
    ((version, held),) = rows
    return version, bool(held)


_ONE_ACTIVE = "memories_one_active"
"""The unique index of a key's active record (schema.py)."""


def _constraint(error: IntegrityError) -> str | None:
    """The constraint or unique index that refused a row (PostgreSQL says)."""
    name: str | None = _detail(error, "constraint_name")
    return name


def _refused_by(error: IntegrityError, table: str) -> bool:
    """Whether the refusal names ``table`` (PostgreSQL says; SQLite never does)."""
    return bool(_detail(error, "table_name") == table)


def _detail(error: IntegrityError, field: str) -> Any:
    """A field of the server's error report: psycopg's errors keep it in ``diag``, and
    asyncpg's (the HTTP service's loop, ``service/loop_connections.py``) on themselves."""
    return getattr(getattr(error.orig, "diag", error.orig), field, None)


def _found(record: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """A current record read by an outer join: None where the key has none."""
    return None if record[0] is None else record


def _no_record() -> None:
    """The record a delete or a restore reads: none, they decide on the entity alone."""
    return None


def _no_rows(rows: Sequence[tuple[Any, ...]]) -> None:
    return None


def _only_row(rows: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
    (row,) = rows
    return row


def _ack(rows: Sequence[tuple[Any, ...]]) -> Ack:
    ((applied, version, reason),) = rows
    return Ack(bool(applied), None if version is None else int(version), reason)


def _records(rows: Sequence[tuple[Any, ...]]) -> list[Record]:
    return [Record(entity, attribute, value, int(causal_seq), int(version))
            for entity, attribute, value, causal_seq, version in rows]


def _records_of_each(rows: Sequence[tuple[Any, ...]], count: int) -> list[list[Record]]:
    """Split rows numbered from 1 (a batch read's) into ``count`` reads' records."""
    groups: list[list[tuple[Any, ...]]] = [[] for _ in range(count)]
    for row in rows:
        groups[row[0] - 1].append(row[1:])
    return [_records(group) for group in groups]


def _transient(error: DBAPIError) -> bool:
    """Lock, serialization and unique-index races, which a fresh attempt resolves."""
    if isinstance(error, OperationalError) and error.orig is not None:
        message = str(error.orig).lower()
        if "locked" in message or "busy" in message:
            return True
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate in _TRANSIENT_SQLSTATES or (
        isinstance(error, IntegrityError) and "unique" in str(error.orig).lower()
    )
