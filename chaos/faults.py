"""Fault injectors: wrappers that are backends themselves, around any backend.

A fault plays the part of an httpx transport wrapper: it is the one place where the
delivery of an operation to the backend changes, so any backend can be certified under
it without knowing about it. Each fault takes the backend it wraps (``inner``), the
worker's seeded ``random.Random`` and its parameters; counts in ``fired`` how often it
really acted, so a scenario can prove its condition occurred; and ``heal()`` stops it
and releases anything it holds. Reads always pass through. The skewed clock wraps the
worker's Lamport clock instead of the backend.

Exceptions a fault raises instead of an answer, drawn here in one place::

    InjectedFault                           raised by a fault, never by a backend
    ├── Timeout (TimeoutError)              held back; it lands later (out_of_order)
    ├── LostAcknowledgement (ConnectionError)
    │                                       applied, then the answer was lost (lost_ack)
    └── Unavailable (ConnectionError)       refused before the backend saw it
                                            (fail_before_apply)

To the client each one is an unknown outcome (``info``), as a real timeout or dropped
connection would be; reports tell them from real backend errors by the base class.

What each fault takes (its parameters, their ranges and meaning) is declared once, as
data, in :data:`scenarios.fault_kinds.FAULT_KINDS`; each injector's ``PARAMS`` is its
entry there, so building a fault and loading a scenario file check values alike.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

from invariants.backend import Ack, Delete, MemoryBackend, Record, Restore, Write
from invariants.errors import InvalidArgument
from scenarios.fault_kinds import FAULT_KINDS
from scenarios.plan import FaultSpec
from scenarios.ranges import NumberRange

__all__ = [
    "FAULTS",
    "Clock",
    "Delay",
    "DuplicateDelivery",
    "FailBeforeApply",
    "Fault",
    "InjectedFault",
    "LamportClock",
    "LostAck",
    "LostAcknowledgement",
    "OutOfOrder",
    "SkewedClock",
    "Timeout",
    "Unavailable",
    "build_clock",
    "build_faults",
    "layers",
    "validate_specs",
]

_Op = TypeVar("_Op", Write, Delete, Restore)


class InjectedFault(Exception):
    """An outcome a fault made up; ``fault`` names the fault, ``op_id`` the operation."""

    def __init__(self, fault: str, op: Write | Delete | Restore, what: str) -> None:
        self.fault = fault
        self.op_id = op.op_id
        super().__init__(f"{fault}: {type(op).__name__.lower()} {op.op_id!r} {what} (injected)")


class Timeout(InjectedFault, TimeoutError):
    """The operation was held back and will reach the backend after later ones."""


class LostAcknowledgement(InjectedFault, ConnectionError):
    """The backend applied the operation, and its answer never reached the client."""


class Unavailable(InjectedFault, ConnectionError):
    """The operation was refused before it reached the backend: nothing was applied."""


_CLOCK_START = NumberRange(0, math.inf, "a whole number >= 0", integer=True)


# -- clocks -----------------------------------------------------------------------------


@runtime_checkable
class Clock(Protocol):
    """Where a worker draws causal seqs from when an operation starts."""

    def next(self) -> int:
        """The causal seq for an operation starting now.

        Must not block on the backend: it is called before the operation is sent.
        """
        ...

    def observe(self, seq: int) -> None:
        """Merge a seq seen elsewhere (Lamport), so that later ``next()`` values exceed it."""
        ...


class LamportClock:
    """A Lamport clock shared by every worker thread of one run."""

    def __init__(self, start: int = 0) -> None:
        self._value = int(_CLOCK_START.check("LamportClock", "start", start))
        self._lock = threading.Lock()

    @property
    def value(self) -> int:
        return self._value

    def next(self) -> int:
        with self._lock:
            self._value += 1
            return self._value

    def observe(self, seq: int) -> None:
        with self._lock:
            self._value = max(self._value, seq)


class SkewedClock:
    """A client whose clock lags: ``next()`` sometimes returns a value up to ``max_skew``
    below the true one (never below 0), so its writes can arrive already stale.

    ``fired`` counts the values actually lowered. Only the value handed out lags: the
    shared clock underneath still advances, as another client's would.
    """

    fault_name: ClassVar[str] = "skewed_clock"
    PARAMS: ClassVar[Mapping[str, NumberRange]] = FAULT_KINDS[fault_name].params

    def __init__(self, inner: Clock, rng: random.Random, p: float, max_skew: float) -> None:
        self.inner = inner
        self.rng = rng
        self.p = _checked(self, "p", p)
        self.max_skew = int(_checked(self, "max_skew", max_skew))
        self.fired = 0
        self.healed = False

    def next(self) -> int:
        value = self.inner.next()
        if self.healed or not self.rng.random() < self.p:
            return value
        skewed = max(0, value - self.rng.randint(1, self.max_skew))
        if skewed < value:
            self.fired += 1
        return skewed

    def observe(self, seq: int) -> None:
        self.inner.observe(seq)

    def heal(self) -> None:
        """Hand out true values from now on, here and in every clock fault underneath."""
        self.healed = True
        if isinstance(self.inner, SkewedClock):
            self.inner.heal()


# -- backend faults ---------------------------------------------------------------------


class Fault(ABC):
    """Base of the backend wrappers: passes everything through to ``inner``.

    A subclass changes only ``_deliver``, which carries a write, delete or restore to
    the backend. ``heal()`` heals the layers underneath first, so that operations it
    then releases pass through them unharmed.
    """

    fault_name: ClassVar[str]
    PARAMS: ClassVar[Mapping[str, NumberRange]]
    """Every parameter the constructor takes after ``inner`` and ``rng``, all required."""

    def __init__(self, inner: MemoryBackend, rng: random.Random) -> None:
        self.inner = inner
        self.rng = rng
        self.fired = 0
        self.healed = False

    def __repr__(self) -> str:
        params = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.PARAMS)
        return f"{type(self).__name__}({self.inner!r}, {params})"

    def write(self, op: Write) -> Ack:
        return self._deliver(op, self.inner.write)

    def delete(self, op: Delete) -> Ack:
        return self._deliver(op, self.inner.delete)

    def restore(self, op: Restore) -> Ack:
        return self._deliver(op, self.inner.restore)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        return self.inner.read(namespace, entity_id)

    def reset(self) -> None:
        self.inner.reset()

    def close(self) -> None:
        """Heal first: an operation still held must land before the handle goes."""
        self.heal()
        self.inner.close()

    def heal(self) -> None:
        """Stop injecting, in this layer and every one underneath, and release what is held.

        Must not return while an operation it held back can still reach the backend.
        """
        self.healed = True
        if isinstance(self.inner, Fault):
            self.inner.heal()

    def _roll(self, p: float) -> bool:
        return not self.healed and self.rng.random() < p

    @abstractmethod
    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        """Carry ``op`` to the backend through ``call``, or not; must not touch reads."""


class Delay(Fault):
    """Sleeps ``mean_s`` ± ``jitter_s`` (uniform) before delivering, so that operations of
    different workers overlap in time. ``fired`` counts the delays longer than zero."""

    fault_name = "delay"
    PARAMS = FAULT_KINDS[fault_name].params

    def __init__(
        self, inner: MemoryBackend, rng: random.Random, mean_s: float, jitter_s: float
    ) -> None:
        super().__init__(inner, rng)
        self.mean_s = _checked(self, "mean_s", mean_s)
        self.jitter_s = _checked(self, "jitter_s", jitter_s)

    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        if not self.healed:
            pause = self.mean_s + self.rng.uniform(-self.jitter_s, self.jitter_s)
            if pause > 0:
                self.fired += 1
                time.sleep(pause)
        return call(op)


class OutOfOrder(Fault):
    """With probability ``p``, holds an operation back and delivers it ``hold_s`` later
    from a background thread, while the caller gets :class:`Timeout` at once; the
    worker's next operations, and other workers', overtake it. This is a request that
    timed out and whose packet arrived late.

    Every call into ``inner``, reads and resets included, from the worker and from
    deliveries, is serialized by a lock of this wrapper, so the handle is never used by
    two threads at once; it must still accept calls from a thread other than its
    creator's. A delivery's exception is
    swallowed and kept in ``errors``: nobody is waiting for its answer. ``landed``
    counts deliveries that returned an answer.
    """

    fault_name = "out_of_order"
    PARAMS = FAULT_KINDS[fault_name].params

    def __init__(self, inner: MemoryBackend, rng: random.Random, p: float, hold_s: float) -> None:
        super().__init__(inner, rng)
        self.p = _checked(self, "p", p)
        self.hold_s = _checked(self, "hold_s", hold_s)
        self.landed = 0
        self.errors: list[Exception] = []
        self._calls = threading.Lock()
        self._held_lock = threading.Lock()
        self._held: list[threading.Timer] = []

    @property
    def in_flight(self) -> int:
        """Held operations that have not landed yet."""
        with self._held_lock:
            return sum(1 for timer in self._held if timer.is_alive())

    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        if not self._roll(self.p):
            with self._calls:
                return call(op)
        self.fired += 1
        timer = threading.Timer(self.hold_s, self._land, args=(op, call))
        timer.daemon = True
        with self._held_lock:
            self._held = [held for held in self._held if held.is_alive()]
            self._held.append(timer)
        timer.start()
        raise Timeout(self.fault_name, op, f"was held back for {self.hold_s}s and will land late")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        with self._calls:
            return self.inner.read(namespace, entity_id)

    def reset(self) -> None:
        with self._calls:
            self.inner.reset()

    def _land(self, op: _Op, call: Callable[[_Op], Ack]) -> None:
        with self._calls:
            try:
                call(op)
            except Exception as error:
                self.errors.append(error)
            else:
                self.landed += 1

    def heal(self) -> None:
        """Stop holding operations back, then wait until every held one has landed."""
        super().heal()
        with self._held_lock:
            held, self._held = self._held, []
        for timer in held:
            timer.join()


class LostAck(Fault):
    """With probability ``p``, applies the operation, then raises
    :class:`LostAcknowledgement` instead of returning the backend's answer."""

    fault_name = "lost_ack"
    PARAMS = FAULT_KINDS[fault_name].params

    def __init__(self, inner: MemoryBackend, rng: random.Random, p: float) -> None:
        super().__init__(inner, rng)
        self.p = _checked(self, "p", p)

    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        ack = call(op)
        if not self._roll(self.p):
            return ack
        self.fired += 1
        raise LostAcknowledgement(
            self.fault_name, op, f"was answered with {ack!r}, and the answer was lost"
        )


class FailBeforeApply(Fault):
    """With probability ``p``, raises :class:`Unavailable` without reaching the backend."""

    fault_name = "fail_before_apply"
    PARAMS = FAULT_KINDS[fault_name].params

    def __init__(self, inner: MemoryBackend, rng: random.Random, p: float) -> None:
        super().__init__(inner, rng)
        self.p = _checked(self, "p", p)

    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        if not self._roll(self.p):
            return call(op)
        self.fired += 1
        raise Unavailable(self.fault_name, op, "was refused before it reached the backend")


class DuplicateDelivery(Fault):
    """With probability ``p``, delivers the operation twice, same ``op_id`` and
    ``causal_seq`` (a retry), and returns the second answer; a correct backend answers
    the retry with the first outcome.

    If the first copy meets an injected fault below, the second is sent all the same
    (that is what a retry after a timeout is); a real error of the first copy is raised.
    """

    fault_name = "duplicate_delivery"
    PARAMS = FAULT_KINDS[fault_name].params

    def __init__(self, inner: MemoryBackend, rng: random.Random, p: float) -> None:
        super().__init__(inner, rng)
        self.p = _checked(self, "p", p)

    def _deliver(self, op: _Op, call: Callable[[_Op], Ack]) -> Ack:
        if not self._roll(self.p):
            return call(op)
        self.fired += 1
        with contextlib.suppress(InjectedFault):
            call(op)
        return call(op)


# -- building from specs ----------------------------------------------------------------

_KINDS: tuple[type[Fault] | type[SkewedClock], ...] = (
    Delay,
    OutOfOrder,
    LostAck,
    FailBeforeApply,
    DuplicateDelivery,
    SkewedClock,
)

FAULTS: Mapping[str, type[Fault] | type[SkewedClock]] = MappingProxyType(
    {cls.fault_name: cls for cls in _KINDS}
)
"""The injector of every fault a ``FaultSpec`` can name, by name: one for each entry of
:data:`scenarios.fault_kinds.FAULT_KINDS`, whose parameters each class's ``PARAMS`` is."""


def validate_specs(specs: Sequence[FaultSpec]) -> None:
    """Raise :class:`InvalidArgument` for the first unknown fault, unknown or missing
    parameter, or value out of range, so a bad spec fails before the run starts."""
    for spec in specs:
        _check_spec(spec)


def build_faults(
    inner: MemoryBackend, specs: Sequence[FaultSpec], rng: random.Random
) -> MemoryBackend:
    """Wrap ``inner`` in the backend faults of ``specs``; clock faults are left out
    (see :func:`build_clock`).

    The first spec is the outermost layer: an operation meets the faults in spec order
    on its way to the backend. Every layer draws from the same ``rng``.
    """
    validate_specs(specs)
    backend = inner
    for spec in reversed(specs):
        cls = FAULTS[spec.name]
        if issubclass(cls, Fault):
            backend = cls(backend, rng, **spec.params)
    return backend


def build_clock(clock: Clock, specs: Sequence[FaultSpec], rng: random.Random) -> Clock:
    """Wrap ``clock`` in the clock faults of ``specs``, the first spec outermost."""
    validate_specs(specs)
    for spec in reversed(specs):
        cls = FAULTS[spec.name]
        if issubclass(cls, SkewedClock):
            clock = cls(clock, rng, **spec.params)
    return clock


def layers(backend: MemoryBackend) -> tuple[Fault, ...]:
    """The fault layers around a backend, outermost first (for coverage and healing)."""
    found: list[Fault] = []
    while isinstance(backend, Fault):
        found.append(backend)
        backend = backend.inner
    return tuple(found)


def _check_spec(spec: FaultSpec) -> None:
    cls = FAULTS.get(spec.name)
    if cls is None:
        raise InvalidArgument(
            f"unknown fault {spec.name!r}.{_did_you_mean(spec.name, FAULTS)} "
            f"Known faults: {', '.join(sorted(FAULTS))}."
        )
    for param in spec.params:
        if param not in cls.PARAMS:
            raise InvalidArgument(
                f"fault {spec.name!r} has no parameter {param!r}."
                f"{_did_you_mean(param, cls.PARAMS)} Its parameters are "
                f"{', '.join(cls.PARAMS)}."
            )
    missing = [param for param in cls.PARAMS if param not in spec.params]
    if missing:
        raise InvalidArgument(
            f"fault {spec.name!r} needs {', '.join(missing)}; give every one of "
            f"{', '.join(cls.PARAMS)}."
        )
    for param, allowed in cls.PARAMS.items():
        allowed.check(spec.name, param, spec.params[param])


def _checked(fault: Fault | SkewedClock, param: str, value: object) -> float:
    return fault.PARAMS[param].check(fault.fault_name, param, value)


def _did_you_mean(word: str, choices: Sequence[str] | Mapping[str, object]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""

