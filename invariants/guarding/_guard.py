"""The guard: sampling, the queue, the worker, and the guarded handles.

Every call of a guarded handle is forwarded unchanged, on the caller's thread. For an
entity the sample picks, the caller's thread adds only a few steps to a queue: the
invocation before the call, the answer after it, and, after a change, a request to
verify. A background worker makes the verification reads, through the backend's own
``read``, and feeds everything to the judge (``_judge``) in the order it happened.

The queue is bounded, and the caller never waits for it: an operation that finds it
full is forwarded unchecked and counted as dropped (``queue_full``). Its entity's
history then has a gap, so the guard stops judging that entity (later operations are
dropped as ``incomplete``) rather than accuse the backend of what it did not see.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from queue import Empty, SimpleQueue
from typing import Any

from invariants.backend import Ack, Delete, MemoryBackend, Record, Restore, Write
from invariants.causes import FIXES
from invariants.errors import InvalidArgument
from invariants.history import EntryType, OpName, Read, describe_error
from invariants.normalize import Level, Normalizer
from invariants.verdict import ReadRef, cited

from ._judge import GUARD_CHECKERS, SHARED_CHECKERS, Finding, Judge, Step

__all__ = ["Guard", "GuardedBackend", "InvariantViolated", "guard"]

log = logging.getLogger("memcert.guard")

READER = -1
"""The worker number of the guard's own verification reads in the history."""

_STOP = object()
_crc32 = zlib.crc32
_RESET = object()


@dataclass(frozen=True, slots=True)
class _Verify:
    namespace: str
    entity_id: str
    trigger: str


class _Barrier:
    __slots__ = ("done", "second")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.second = False


class InvariantViolated(AssertionError):
    """Assertion mode (``sample=1.0``): a guarded call showed a broken invariant.

    Raised by the call whose verification read (after a change) or whose own read
    showed the violation, once the backend has answered: ``result`` is what the backend
    returned (the Ack or the records), and the operation has taken effect as the
    backend says. A violation that the guard's scheduled re-read of a deleted entity
    finds is raised by the next call of any of the guard's handles, before that call is
    forwarded: ``result`` is None then, and that call was not made.
    """

    def __init__(self, findings: Sequence[Finding], result: Ack | list[Record] | None) -> None:
        self.findings = tuple(findings)
        self.result = result
        first = self.findings[0]
        more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        super().__init__(f"{_headline(first)}{more}\n{first.text}")


class Guard:
    """One sampled guard: its judge, queue, worker and metrics, shared by its handles.

    Build it with a ``reader``, the handle its worker makes verification reads through
    (a handle of its own is best: the worker reads from its own thread), then wrap each
    handle the application uses with :meth:`wrap`; all of them feed one history, so
    writes from one thread and reads from another are judged together. Use it as a
    context manager, or call :meth:`close`. :func:`guard` does all this for one handle.

    ``sample`` is the fraction of entities checked; ``assertion`` (by default
    ``sample == 1.0``) makes each change verified on the caller's thread and a
    violation raise :class:`InvariantViolated`. ``level`` (or a ``normalizer``) says
    which attribute names and values are one slot or one fact: the level the backend
    claims. ``exclusive=False`` says writers the guard does not watch share the store,
    and drops the durability check they would trip. ``registry`` is a
    ``prometheus_client`` registry to export to, under ``backend_name`` and
    ``scenario``. ``queue_size`` bounds the queue, ``deleted_entities`` the LRU of
    deleted entities re-read every ``recheck_s``, ``max_entities`` the entities
    tracked. docs/guard.md says what each costs.
    """

    def __init__(
        self,
        reader: MemoryBackend,
        *,
        sample: float = 0.01,
        level: Level = "lexical",
        registry: Any = None,
        assertion: bool | None = None,
        backend_name: str = "backend",
        scenario: str = "production",
        on_violation: Callable[[Finding], object] | None = None,
        exclusive: bool = True,
        queue_size: int = 10_000,
        deleted_entities: int = 1024,
        recheck_s: float = 1.0,
        max_entities: int = 100_000,
        normalizer: Normalizer | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        _check(reader, sample, backend_name, scenario, on_violation, queue_size,
               deleted_entities, recheck_s, max_entities, exclusive)
        if assertion is not None and not isinstance(assertion, bool):
            raise InvalidArgument(
                f"assertion={assertion!r} (type {type(assertion).__name__}) is not a bool; "
                "pass True to raise on a violation, False to only report, or None for "
                "sample == 1.0")
        self.sample = float(sample)
        self.assertion = self.sample >= 1.0 if assertion is None else assertion
        self._threshold = int(self.sample * 2**32)
        self._reader = reader
        normalizer = normalizer if normalizer is not None else Normalizer(level)
        self._judge = Judge(normalizer, GUARD_CHECKERS if exclusive else SHARED_CHECKERS)
        self._on_violation = on_violation
        self._log = logger if logger is not None else log
        self._queue: SimpleQueue[object] = SimpleQueue()
        self._queue_size = queue_size
        self._drain_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._drops: dict[str, int] = {}
        self._verified: dict[str, int] = {}
        self._incomplete: set[tuple[str, str]] = set()
        self._tracked: set[tuple[str, str]] = set()
        self._max_entities = max_entities
        self._deleted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._deleted_size = deleted_entities
        self._recheck_s = recheck_s
        self._pending: list[Finding] = []
        self._closed = False
        self._stop = threading.Event()
        self._registry = registry
        self._collector: Any = None
        if registry is not None:
            from ._metrics import GuardMetrics

            self._collector = GuardMetrics(backend=backend_name, scenario=scenario,
                                           snapshot=self._snapshot)
            registry.register(self._collector)
        self._worker = threading.Thread(target=self._run, name="memcert-guard", daemon=True)
        self._worker.start()

    # -- lifecycle ---------------------------------------------------------------------

    def wrap(self, backend: MemoryBackend) -> GuardedBackend:
        """A handle that forwards every call to ``backend`` and feeds this guard."""
        return GuardedBackend(backend, self)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything queued so far is checked, verification reads included;
        False if ``timeout`` passed first. Tests call it before asserting."""
        if self._closed:
            return True
        if self.assertion:
            self._drain()
            return True
        barrier = _Barrier()
        self._queue.put(barrier)
        return barrier.done.wait(timeout)

    def close(self, timeout: float | None = 10.0) -> None:
        """Check what is queued, stop the worker and leave the registry; the handles
        keep forwarding, unchecked. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._queue.put(_STOP)
        self._worker.join(timeout)
        if self._collector is not None:
            self._registry.unregister(self._collector)
            self._collector = None

    @property
    def depth(self) -> int:
        """Entries waiting in the queue."""
        return self._queue.qsize()

    def dropped(self) -> dict[str, int]:
        """Sampled operations not checked so far, by reason."""
        with self._stats_lock:
            return dict(self._drops)

    def counts(self) -> dict[str, int]:
        """Violations found so far, per checker."""
        return self._judge.counts()[0]

    def sampled(self, entity_id: str) -> bool:
        """Whether the sample picks ``entity_id``: a stable hash, the same in every
        process, so all of an entity's operations are checked or none are."""
        return _crc32(entity_id.encode("utf-8", "surrogatepass")) < self._threshold

    # -- the caller's side ---------------------------------------------------------------

    def begin(self, worker: int, f: OpName, op: Write | Delete | Restore | Read) -> bool:
        """Queue an operation's invocation if it is to be checked; never waits."""
        if self._closed or _crc32(
                op.entity_id.encode("utf-8", "surrogatepass")) >= self._threshold:
            return False
        key = (op.namespace, op.entity_id)
        if key in self._incomplete:
            self._drop("incomplete")
            return False
        if key not in self._tracked:
            if len(self._tracked) >= self._max_entities:
                self._drop("entity_limit")
                return False
            self._tracked.add(key)
        if self._queue.qsize() >= self._queue_size:
            if f != "read":
                self._incomplete.add(key)
            self._drop("queue_full")
            return False
        self._queue.put(Step(worker, time.time_ns(), "invoke", f, op))
        return True

    def end(self, worker: int, f: OpName, op: Write | Delete | Restore | Read,
            outcome: Ack | list[Record] | BaseException) -> object:
        """Queue an operation's answer; returns the token its findings are filed under."""
        token: object = None
        if isinstance(outcome, BaseException):
            unsupported = isinstance(outcome, NotImplementedError) and f == "restore"
            kind: EntryType = "fail" if unsupported or f == "read" else "info"
            step = Step(worker, time.time_ns(), kind, f, op, describe_error(outcome))
        elif isinstance(outcome, Ack):
            step = Step(worker, time.time_ns(), "ok" if outcome.applied else "fail", f, op,
                        outcome)
        else:
            token = object() if self.assertion else None
            step = Step(worker, time.time_ns(), "ok", f, op, tuple(outcome), token)
        self._queue.put(step)
        return token

    def after_change(self, backend: MemoryBackend, worker: int,
                     op: Write | Delete | Restore, ack: Ack) -> None:
        """Verify a change the backend answered: queued for the worker, or, in assertion
        mode, read at once on the caller's thread through its own handle."""
        if not self.assertion:
            if self._queue.qsize() >= self._queue_size:
                self._drop("queue_full")
                return
            self._queue.put(_Verify(op.namespace, op.entity_id, "ack"))
            return
        token = self._verify(backend, worker, op.namespace, op.entity_id, "ack")
        self.settle(token, ack)

    def note_reset(self) -> None:
        """The store was emptied: judge what follows from a fresh history."""
        self._queue.put(_RESET)
        if self.assertion:
            self._drain()

    def settle(self, token: object, result: Ack | list[Record]) -> None:
        """Assertion mode: check everything queued now, and raise what the read filed
        under ``token`` found."""
        if token is None:
            return
        self._drain()
        found = self._judge.take(token)
        if found:
            raise InvariantViolated(found, result)

    def raise_pending(self) -> None:
        """Assertion mode: raise what the scheduled re-reads found since the last call."""
        with self._stats_lock:
            found, self._pending = self._pending, []
        if found:
            raise InvariantViolated(found, None)

    # -- the worker's side ---------------------------------------------------------------

    def _verify(self, backend: MemoryBackend, worker: int, namespace: str, entity_id: str,
                trigger: str) -> object:
        if (namespace, entity_id) in self._incomplete:
            return None
        with self._stats_lock:
            self._verified[trigger] = self._verified.get(trigger, 0) + 1
        read = Read(namespace, entity_id)
        self._queue.put(Step(worker, time.time_ns(), "invoke", "read", read))
        try:
            records = backend.read(namespace, entity_id)
        except Exception as error:  # a read that fails proves nothing either way
            self._queue.put(Step(worker, time.time_ns(), "fail", "read", read,
                                 describe_error(error)))
            return None
        # Only a caller waits for its read's findings; the worker's go to every caller.
        token = object() if self.assertion and worker != READER else None
        self._queue.put(Step(worker, time.time_ns(), "ok", "read", read, tuple(records),
                             token))
        return token

    def _run(self) -> None:
        next_recheck = time.monotonic() + self._recheck_s
        while True:
            wait = max(0.0, next_recheck - time.monotonic())
            item: object = None
            if self.assertion:
                # Callers consume the queue themselves, under the drain lock, so that
                # steps are judged in order; the worker only runs the schedule.
                if self._stop.wait(wait):
                    self._drain()
                    return
            else:
                try:
                    item = self._queue.get(timeout=wait)
                except Empty:
                    item = None
            try:
                if item is _STOP:
                    self._drain()
                    return
                if item is not None:
                    self._handle(item)
                if time.monotonic() >= next_recheck:
                    self._recheck()
                    next_recheck = time.monotonic() + self._recheck_s
            except Exception:  # the guard must never take the application down
                self._log.exception("memcert guard: the worker failed on one item")

    def _drain(self) -> None:
        """Consume every step queued now, in order (assertion mode, and at the end)."""
        with self._drain_lock:
            while True:
                try:
                    item = self._queue.get_nowait()
                except Empty:
                    return
                if item is not _STOP:
                    self._handle(item)

    def _handle(self, item: object) -> None:
        if isinstance(item, Step):
            self._consume(item)
        elif isinstance(item, _Verify):
            self._verify(self._reader, READER, item.namespace, item.entity_id, item.trigger)
        elif item is _RESET:
            self._judge.reset()
            with self._stats_lock:
                self._deleted.clear()
                self._incomplete.clear()
                self._tracked.clear()
        elif isinstance(item, _Barrier):
            if item.second:
                item.done.set()
            else:
                item.second = True
                self._queue.put(item)

    def _consume(self, step: Step) -> None:
        op = step.op
        key = (op.namespace, op.entity_id)
        if step.type == "ok" and step.f == "read" and key in self._incomplete:
            step = Step(step.worker, step.time_ns, "fail", "read", op,
                        "not judged: an operation of this entity was dropped")
        found = self._judge.consume((step,))
        if step.type == "ok" and isinstance(op, Delete):
            with self._stats_lock:
                self._deleted[key] = None
                self._deleted.move_to_end(key)
                while len(self._deleted) > self._deleted_size:
                    self._deleted.popitem(last=False)
        elif step.type == "ok" and isinstance(op, Restore):
            with self._stats_lock:
                self._deleted.pop(key, None)
        for finding in found:
            self._report(finding, owned=step.token is not None)

    def _recheck(self) -> None:
        with self._stats_lock:
            due = [key for key in self._deleted if key not in self._incomplete]
        for namespace, entity_id in due:
            self._verify(self._reader, READER, namespace, entity_id, "deleted")
        if self.assertion and due:
            self._drain()

    def _report(self, finding: Finding, *, owned: bool) -> None:
        v = finding.violation
        refs = cited(v.explanation)
        read = next((ref for _, ref in refs if isinstance(ref, ReadRef)), None)
        self._log.warning(
            "%s\n%s", _headline(finding), finding.text,
            extra={
                "memcert_source": "guard",
                "memcert_invariant": finding.checker,
                "memcert_kind": v.kind,
                "memcert_cause": v.cause,
                "memcert_fix": FIXES.get(v.cause, ""),
                "memcert_namespace": v.key.namespace,
                "memcert_entity_id": v.key.entity_id,
                "memcert_slot": v.key.slot,
                "memcert_operations": [
                    {"name": name, **_plain(ref)} for name, ref in refs
                    if not isinstance(ref, ReadRef)],
                "memcert_read": None if read is None else _plain(read),
                "memcert_violation": v.to_dict(),
            },
        )
        if self._on_violation is not None:
            try:
                self._on_violation(finding)
            except Exception:  # the application's callback must not stop the checks
                self._log.exception("memcert guard: on_violation raised")
        if self.assertion and not owned:
            with self._stats_lock:
                self._pending.append(finding)

    def _drop(self, reason: str) -> None:
        with self._stats_lock:
            self._drops[reason] = self._drops.get(reason, 0) + 1

    def _snapshot(self) -> tuple[Any, ...]:
        violations, terms, causes, sampled = self._judge.counts()
        with self._stats_lock:
            verified, drops = dict(self._verified), dict(self._drops)
        return violations, terms, causes, sampled, verified, drops, self._queue.qsize()


class GuardedBackend:
    """A :class:`~invariants.backend.MemoryBackend` that forwards to ``backend`` and
    feeds its guard. Its answers are the backend's, unchanged; it never writes on its
    own, and never retries. In assertion mode a call may raise
    :class:`InvariantViolated` after the backend answered it."""

    def __init__(self, backend: MemoryBackend, guard: Guard, *, owns_guard: bool = False
                 ) -> None:
        self.backend = backend
        self.guard = guard
        self._owns_guard = owns_guard

    def write(self, op: Write) -> Ack:
        return self._change("write", op, self.backend.write)

    def delete(self, op: Delete) -> Ack:
        return self._change("delete", op, self.backend.delete)

    def restore(self, op: Restore) -> Ack:
        return self._change("restore", op, self.backend.restore)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        g = self.guard
        if g._pending:
            g.raise_pending()
        # The unsampled path is the hot one: one hash and one comparison.
        if _crc32(entity_id.encode("utf-8", "surrogatepass")) >= g._threshold:
            return self.backend.read(namespace, entity_id)
        query = Read(namespace, entity_id)
        worker = threading.get_ident()
        if not g.begin(worker, "read", query):
            return self.backend.read(namespace, entity_id)
        try:
            records = self.backend.read(namespace, entity_id)
        except BaseException as error:
            g.end(worker, "read", query, error)
            raise
        g.settle(g.end(worker, "read", query, records), records)
        return records

    def reset(self) -> None:
        self.backend.reset()
        self.guard.note_reset()

    def close(self) -> None:
        """Close the backend handle, and the guard too when :func:`guard` made it."""
        try:
            self.backend.close()
        finally:
            if self._owns_guard:
                self.guard.close()

    def __enter__(self) -> GuardedBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _change(self, f: OpName, op: Any, call: Callable[[Any], Ack]) -> Ack:
        g = self.guard
        if g._pending:
            g.raise_pending()
        if _crc32(op.entity_id.encode("utf-8", "surrogatepass")) >= g._threshold:
            return call(op)
        worker = threading.get_ident()
        if not g.begin(worker, f, op):
            return call(op)
        try:
            ack = call(op)
        except BaseException as error:
            g.end(worker, f, op, error)
            raise
        g.end(worker, f, op, ack)
        g.after_change(self.backend, worker, op, ack)
        return ack


def guard(
    backend: MemoryBackend,
    sample: float = 0.01,
    level: Level = "lexical",
    registry: Any = None,
    *,
    reader: MemoryBackend | None = None,
    **options: Any,
) -> GuardedBackend:
    """``backend`` behind a sampled guard of its own: see docs/guard.md.

    The guard's worker reads through ``reader``, by default ``backend`` itself, which
    must then accept a read from the guard's thread while the caller uses it (pass a
    handle of its own otherwise). ``options`` are :class:`Guard`'s. Closing the handle
    closes the guard after checking what is queued.
    """
    core = Guard(backend if reader is None else reader, sample=sample, level=level,
                 registry=registry, **options)
    return GuardedBackend(backend, core, owns_guard=True)


def _headline(finding: Finding) -> str:
    v = finding.violation
    return (f"memcert guard: {v.kind} ({finding.checker}, cause {v.cause}) in "
            f"{v.key.namespace}/{v.key.entity_id}")


def _plain(ref: Any) -> dict[str, Any]:
    return asdict(ref)


def _check(reader: object, sample: object, backend_name: object, scenario: object,
           on_violation: object, queue_size: object, deleted_entities: object,
           recheck_s: object, max_entities: object, exclusive: object) -> None:
    """Refuse bad options before anything starts, naming the option."""
    if not all(callable(getattr(reader, name, None)) for name in ("read", "write")):
        raise InvalidArgument(
            f"reader={reader!r} (type {type(reader).__name__}) is not a MemoryBackend; "
            "pass a handle onto the guarded store (it needs read)")
    if isinstance(sample, bool) or not isinstance(sample, int | float) or not (
            0 <= sample <= 1):
        raise InvalidArgument(
            f"sample={sample!r} (type {type(sample).__name__}) is not a fraction in [0, 1]; "
            "pass e.g. sample=0.01 in production, or sample=1.0 to assert in tests")
    for name, value in (("backend_name", backend_name), ("scenario", scenario)):
        if not isinstance(value, str) or not value:
            raise InvalidArgument(
                f"{name}={value!r} (type {type(value).__name__}) is not a non-empty label "
                "value; pass a short string, e.g. 'production'")
    if on_violation is not None and not callable(on_violation):
        raise InvalidArgument(
            f"on_violation={on_violation!r} (type {type(on_violation).__name__}) is not "
            "callable; pass a function of one Finding, or None")
    for name, value in (("queue_size", queue_size), ("deleted_entities", deleted_entities),
                        ("max_entities", max_entities)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(
                f"{name}={value!r} (type {type(value).__name__}) is not a count; pass an "
                "int >= 1")
    if isinstance(recheck_s, bool) or not isinstance(recheck_s, int | float) or not (
            recheck_s > 0):
        raise InvalidArgument(
            f"recheck_s={recheck_s!r} (type {type(recheck_s).__name__}) is not a positive "
            "number of seconds; pass e.g. recheck_s=1.0")
    if not isinstance(exclusive, bool):
        raise InvalidArgument(
            f"exclusive={exclusive!r} (type {type(exclusive).__name__}) is not a bool; pass "
            "True if every writer of the store is guarded here, False otherwise")
