"""Each fault, alone and composed, around the real in-memory backend, with seeded or
scripted randomness so every outcome is fixed."""

from __future__ import annotations

import inspect
import random
import threading
import time

import pytest

from chaos.examples import InMemoryBackend
from chaos.faults import (
    FAULTS,
    Clock,
    Delay,
    DuplicateDelivery,
    FailBeforeApply,
    InjectedFault,
    LamportClock,
    LostAck,
    LostAcknowledgement,
    OutOfOrder,
    SkewedClock,
    Timeout,
    Unavailable,
    build_clock,
    build_faults,
    layers,
    validate_specs,
)
from invariants.backend import Ack, Delete, MemoryBackend, Record, Restore, Write
from invariants.errors import InvalidArgument, InvalidInput
from scenarios.fault_kinds import FAULT_KINDS
from scenarios.plan import FaultSpec
from scenarios.ranges import NumberRange


class Scripted(random.Random):
    """A Random whose ``random()`` replays the given draws, to pick which rolls fire."""

    def __init__(self, *draws: float) -> None:
        super().__init__(0)
        self.draws = list(draws)

    def random(self) -> float:
        return self.draws.pop(0)


def write(value: str, seq: int, op_id: str | None = None, attribute: str = "city") -> Write:
    return Write("t", "ann", attribute, value, seq, op_id or f"{value}@{seq}")


def values(backend: MemoryBackend) -> list[str]:
    return [record.value for record in backend.read("t", "ann")]


@pytest.fixture
def inner() -> InMemoryBackend:
    return InMemoryBackend()


def test_every_fault_is_a_backend_and_the_registry_names_them_all(inner):
    rng = random.Random(1)
    faults = [Delay(inner, rng, 0, 0), OutOfOrder(inner, rng, 0, 0), LostAck(inner, rng, 0),
              FailBeforeApply(inner, rng, 0), DuplicateDelivery(inner, rng, 0)]
    assert all(isinstance(fault, MemoryBackend) for fault in faults)
    assert isinstance(SkewedClock(LamportClock(), rng, 0, 1), Clock)
    assert sorted(FAULTS) == ["delay", "duplicate_delivery", "fail_before_apply", "lost_ack",
                              "out_of_order", "skewed_clock"]
    assert {cls.fault_name: cls for cls in FAULTS.values()} == dict(FAULTS)


def test_every_declared_fault_has_exactly_one_injector_and_every_injector_a_declaration():
    assert list(FAULTS) == list(FAULT_KINDS)
    assert len(set(FAULTS.values())) == len(FAULTS)
    for name, cls in FAULTS.items():
        assert cls.PARAMS is FAULT_KINDS[name].params


def test_injected_faults_are_told_apart_and_fit_builtin_types():
    op = write("x", 1, op_id="op-7")
    for cls, builtin in ((Timeout, TimeoutError), (LostAcknowledgement, ConnectionError),
                         (Unavailable, ConnectionError)):
        error = cls("lost_ack", op, "vanished")
        assert isinstance(error, InjectedFault) and isinstance(error, builtin)
        assert (error.fault, error.op_id) == ("lost_ack", "op-7")
        assert str(error) == "lost_ack: write 'op-7' vanished (injected)"


# -- delay ----------------------------------------------------------------------------


def test_delay_sleeps_before_delivering_writes_deletes_and_restores(inner):
    delay = Delay(inner, random.Random(3), mean_s=0.02, jitter_s=0.0)
    started = time.monotonic()
    assert delay.write(write("Oslo", 1)) == Ack(True, 1)
    delay.delete(Delete("t", "ann", 2, "d"))
    delay.restore(Restore("t", "ann", 3, "r"))
    assert time.monotonic() - started >= 0.06
    assert delay.fired == 3


def test_delay_passes_reads_through_and_stops_once_healed(inner):
    delay = Delay(inner, random.Random(3), mean_s=5.0, jitter_s=0.0)
    delay.heal()
    started = time.monotonic()
    delay.write(write("Oslo", 1))
    assert values(delay) == ["Oslo"]
    assert time.monotonic() - started < 1 and delay.fired == 0


def test_delay_jitter_is_drawn_from_the_seeded_rng(inner):
    def pauses(seed: int) -> list[float]:
        rng = random.Random(seed)
        return [0.001 + rng.uniform(-0.001, 0.001) for _ in range(5)]

    delay = Delay(inner, random.Random(9), mean_s=0.001, jitter_s=0.001)
    for i in range(5):
        delay.write(write(f"v{i}", i))
    assert delay.fired == sum(1 for pause in pauses(9) if pause > 0)


# -- out of order -----------------------------------------------------------------------


def test_out_of_order_times_out_at_once_and_delivers_after_later_operations(inner):
    fault = OutOfOrder(inner, Scripted(0.0, 0.99), p=0.5, hold_s=0.1)
    started = time.monotonic()
    with pytest.raises(Timeout) as caught:
        fault.write(write("Oslo", 1, op_id="held"))
    assert time.monotonic() - started < 0.05
    assert str(caught.value) == (
        "out_of_order: write 'held' was held back for 0.1s and will land late (injected)"
    )
    assert fault.write(write("Rome", 2, op_id="later")) == Ack(True, 1)
    assert (fault.fired, fault.in_flight, fault.landed) == (1, 1, 0)
    fault.heal()
    assert (fault.in_flight, fault.landed, fault.errors) == (0, 1, [])
    # The held write reached the backend after the later one: it was refused as stale.
    assert inner.store.outcomes[("t", "held")] == Ack(False, 1, "stale")
    assert values(inner) == ["Rome"]


def test_out_of_order_keeps_the_errors_of_late_deliveries(inner):
    fault = OutOfOrder(inner, random.Random(0), p=1.0, hold_s=0.0)
    with pytest.raises(Timeout):
        fault.write(Write("not a namespace!", "ann", "city", "Oslo", 1, "bad"))
    fault.heal()
    assert fault.landed == 0
    assert [type(error) for error in fault.errors] == [InvalidInput]


def test_out_of_order_never_holds_at_p_zero_nor_after_healing(inner):
    never = OutOfOrder(inner, random.Random(0), p=0.0, hold_s=10)
    assert never.write(write("Oslo", 1)).applied
    healed = OutOfOrder(inner, random.Random(0), p=1.0, hold_s=10)
    healed.heal()
    assert healed.write(write("Rome", 2)).applied
    assert (never.fired, healed.fired) == (0, 0)
    assert values(inner) == ["Rome"]


def test_close_lands_held_operations_before_closing(inner):
    fault = OutOfOrder(inner, random.Random(0), p=1.0, hold_s=0.05)
    for seq in (1, 2, 3):
        with pytest.raises(Timeout):
            fault.write(write(f"v{seq}", seq, attribute=f"a{seq}"))
    fault.close()
    assert fault.healed and fault.landed == 3
    assert sorted(values(inner)) == ["v1", "v2", "v3"]


class OneThreadAtATime(InMemoryBackend):
    """Counts the calls that found another call of this handle still inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = threading.Lock()
        self.overlaps = 0

    def _enter(self) -> None:
        if not self.inside.acquire(blocking=False):
            self.overlaps += 1
            self.inside.acquire()
        time.sleep(0.002)

    def write(self, op: Write) -> Ack:
        self._enter()
        try:
            return super().write(op)
        finally:
            self.inside.release()

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        self._enter()
        try:
            return super().read(namespace, entity_id)
        finally:
            self.inside.release()


def test_a_late_delivery_never_runs_beside_a_read_of_the_same_handle():
    guarded = OneThreadAtATime()
    fault = OutOfOrder(guarded, random.Random(0), p=1.0, hold_s=0.0)
    for seq in range(1, 21):
        with pytest.raises(Timeout):
            fault.write(write(f"v{seq}", seq, attribute=f"a{seq}"))
        fault.read("t", "ann")
    fault.close()
    assert fault.landed == 20
    assert guarded.overlaps == 0


# -- lost ack, fail before apply, duplicate delivery -------------------------------------------


def test_lost_ack_applies_then_raises(inner):
    fault = LostAck(inner, random.Random(0), p=1.0)
    with pytest.raises(LostAcknowledgement) as caught:
        fault.write(write("Oslo", 1, op_id="w1"))
    assert str(caught.value) == (
        "lost_ack: write 'w1' was answered with Ack(applied=True, version=1, reason=None), "
        "and the answer was lost (injected)"
    )
    assert values(inner) == ["Oslo"] and fault.fired == 1
    with pytest.raises(LostAcknowledgement):
        fault.delete(Delete("t", "ann", 2, "d1"))
    assert inner.read("t", "ann") == []


def test_lost_ack_at_p_zero_returns_the_answer(inner):
    fault = LostAck(inner, random.Random(0), p=0.0)
    assert fault.write(write("Oslo", 1)) == Ack(True, 1)
    assert fault.fired == 0


def test_fail_before_apply_never_reaches_the_backend(inner):
    fault = FailBeforeApply(inner, Scripted(0.0, 0.5), p=0.5)
    with pytest.raises(Unavailable) as caught:
        fault.write(write("Oslo", 1, op_id="w1"))
    assert str(caught.value) == (
        "fail_before_apply: write 'w1' was refused before it reached the backend (injected)"
    )
    assert inner.store.ticks == 0
    # The retry is the first copy the backend ever sees, so it is applied afresh.
    assert fault.write(write("Oslo", 1, op_id="w1")) == Ack(True, 1)
    assert fault.fired == 1


def test_duplicate_delivery_sends_a_retry_that_gets_the_first_outcome(inner):
    fault = DuplicateDelivery(inner, random.Random(0), p=1.0)
    assert fault.write(write("Oslo", 1)) == Ack(True, 1)
    assert fault.write(write("Rome", 2)) == Ack(True, 2)
    assert inner.store.ticks == 4 and fault.fired == 2
    assert inner.read("t", "ann") == [Record("ann", "city", "Rome", 2, 2)]


def test_duplicate_delivery_retries_after_an_injected_fault_below(inner):
    below = FailBeforeApply(inner, Scripted(0.0, 0.9), p=0.5)
    fault = DuplicateDelivery(below, Scripted(0.0), p=1.0)
    assert fault.write(write("Oslo", 1)) == Ack(True, 1)
    assert (fault.fired, below.fired) == (1, 1)


def test_duplicate_delivery_raises_a_real_error_of_the_first_copy(inner):
    fault = DuplicateDelivery(inner, random.Random(0), p=1.0)
    with pytest.raises(InvalidInput, match=r"^namespace="):
        fault.write(Write("no spaces allowed", "ann", "city", "Oslo", 1, "w"))
    assert inner.store.ticks == 0


# -- clocks -----------------------------------------------------------------------------


def test_lamport_clock_counts_up_and_merges_observed_seqs():
    clock = LamportClock()
    assert [clock.next(), clock.next()] == [1, 2]
    clock.observe(99)
    clock.observe(5)
    assert clock.next() == 100 and clock.value == 100


def test_lamport_clock_hands_out_unique_values_across_threads():
    clock = LamportClock(start=10)
    seen: list[list[int]] = [[] for _ in range(8)]

    def draw(k: int) -> None:
        seen[k].extend(clock.next() for _ in range(500))

    threads = [threading.Thread(target=draw, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    drawn = sorted(v for values in seen for v in values)
    assert drawn == list(range(11, 4011))


def test_skewed_clock_lags_by_at_most_max_skew_and_never_below_zero():
    true, skewed = LamportClock(), SkewedClock(LamportClock(), random.Random(5), 1.0, 3)
    pairs = [(true.next(), skewed.next()) for _ in range(200)]
    assert all(value - 3 <= lagged < value or lagged == 0 for value, lagged in pairs)
    assert all(lagged >= 0 for _, lagged in pairs)
    assert skewed.fired == sum(1 for value, lagged in pairs if lagged < value)
    assert skewed.fired >= 190
    assert skewed.inner.next() == 201  # type: ignore[attr-defined]


def test_skewed_clock_is_exact_at_p_zero_and_once_healed():
    clock = SkewedClock(LamportClock(), random.Random(5), 0.0, 3)
    assert [clock.next() for _ in range(3)] == [1, 2, 3]
    skewed = SkewedClock(LamportClock(), random.Random(5), 1.0, 3)
    skewed.heal()
    skewed.observe(41)
    assert skewed.next() == 42 and skewed.fired == 0 and clock.fired == 0


# -- building from specs ----------------------------------------------------------------


def test_specs_compose_with_the_first_spec_outermost(inner):
    specs = [FaultSpec("fail_before_apply", {"p": 1.0}), FaultSpec("delay", {"mean_s": 0.001,
                                                                            "jitter_s": 0.0})]
    backend = build_faults(inner, specs, random.Random(0))
    outer, below = layers(backend)
    assert (type(outer), type(below), below.inner) == (FailBeforeApply, Delay, inner)
    with pytest.raises(Unavailable):
        backend.write(write("Oslo", 1))
    assert (outer.fired, below.fired) == (1, 0)

    swapped = build_faults(inner, specs[::-1], random.Random(0))
    with pytest.raises(Unavailable):
        swapped.write(write("Oslo", 1))
    assert [layer.fired for layer in layers(swapped)] == [1, 1]


def test_no_specs_leave_the_backend_unwrapped(inner):
    assert build_faults(inner, [], random.Random(0)) is inner
    assert layers(inner) == ()


def test_clock_faults_wrap_the_clock_and_backend_faults_the_backend(inner):
    specs = [FaultSpec("skewed_clock", {"p": 1.0, "max_skew": 2}), FaultSpec("lost_ack",
                                                                             {"p": 0.5})]
    clock = LamportClock()
    backend = build_faults(inner, specs, random.Random(0))
    skewed = build_clock(clock, specs, random.Random(0))
    assert [type(layer) for layer in layers(backend)] == [LostAck]
    assert isinstance(skewed, SkewedClock) and skewed.inner is clock
    assert (skewed.p, skewed.max_skew) == (1.0, 2)


def test_heal_heals_every_layer_and_lands_what_they_hold(inner):
    specs = [FaultSpec("lost_ack", {"p": 1.0}), FaultSpec("out_of_order", {"p": 1.0,
                                                                           "hold_s": 0.05})]
    backend = build_faults(inner, specs, random.Random(0))
    with pytest.raises(Timeout):
        backend.write(write("Oslo", 1))
    outer = layers(backend)[0]
    outer.heal()
    assert all(layer.healed for layer in layers(backend))
    assert values(inner) == ["Oslo"]
    assert backend.write(write("Rome", 2)) == Ack(True, 2)


def test_an_unknown_fault_is_named_with_a_suggestion():
    with pytest.raises(InvalidArgument) as caught:
        validate_specs([FaultSpec("lost_ak", {"p": 0.1})])
    assert str(caught.value) == (
        "unknown fault 'lost_ak'. Did you mean 'lost_ack'? Known faults: delay, "
        "duplicate_delivery, fail_before_apply, lost_ack, out_of_order, skewed_clock."
    )


def test_an_unknown_parameter_is_named_with_a_suggestion(inner):
    with pytest.raises(InvalidArgument) as caught:
        build_faults(inner, [FaultSpec("delay", {"mean": 0.1, "jitter_s": 0})],
                     random.Random(0))
    assert str(caught.value) == (
        "fault 'delay' has no parameter 'mean'. Did you mean 'mean_s'? Its parameters are "
        "mean_s, jitter_s."
    )


def test_a_missing_parameter_is_named():
    with pytest.raises(InvalidArgument) as caught:
        validate_specs([FaultSpec("out_of_order", {"p": 0.1})])
    assert str(caught.value) == "fault 'out_of_order' needs hold_s; give every one of p, hold_s."


BAD_VALUES = [
    (FaultSpec("lost_ack", {"p": 1.5}),
     "lost_ack: p=1.5 (type float) is out of range. Give a probability in [0, 1]."),
    (FaultSpec("lost_ack", {"p": True}),
     "lost_ack: p=True (type bool) is not a number. Give a probability in [0, 1]."),
    (FaultSpec("delay", {"mean_s": -1, "jitter_s": 0}),
     "delay: mean_s=-1 (type int) is out of range. Give seconds in [0, 60]."),
    (FaultSpec("delay", {"mean_s": 0, "jitter_s": 60.5}),
     "delay: jitter_s=60.5 (type float) is out of range. Give seconds in [0, 60]."),
    (FaultSpec("out_of_order", {"p": 0.1, "hold_s": float("nan")}),
     "out_of_order: hold_s=nan (type float) is out of range. Give seconds in [0, 60]."),
    (FaultSpec("skewed_clock", {"p": 0.1, "max_skew": 0.5}),
     "skewed_clock: max_skew=0.5 (type float) is out of range. Give a whole number of "
     "clock ticks in [1, 1e9]."),
    (FaultSpec("skewed_clock", {"p": 0.1, "max_skew": 10**9 + 1}),
     "skewed_clock: max_skew=1000000001 (type int) is out of range. Give a whole number "
     "of clock ticks in [1, 1e9]."),
]


@pytest.mark.parametrize(("spec", "message"), BAD_VALUES)
def test_bad_parameter_values_are_refused_before_anything_is_built(spec, message):
    with pytest.raises(InvalidArgument) as caught:
        validate_specs([FaultSpec("lost_ack", {"p": 0.1}), spec])
    assert str(caught.value) == message
    assert isinstance(caught.value, TypeError)


@pytest.mark.parametrize(("spec", "message"), BAD_VALUES)
def test_bad_parameter_values_are_refused_by_the_constructors_too(inner, spec, message):
    cls = FAULTS[spec.name]
    wrapped = LamportClock() if cls is SkewedClock else inner
    with pytest.raises(InvalidArgument) as caught:
        cls(wrapped, random.Random(0), **spec.params)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_a_lamport_clock_must_start_at_a_whole_number():
    with pytest.raises(InvalidArgument) as caught:
        LamportClock(start=-1)
    assert str(caught.value) == (
        "LamportClock: start=-1 (type int) is out of range. Give a whole number >= 0."
    )
    assert LamportClock(start=10**30).next() == 10**30 + 1


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_takes_exactly_its_declared_parameters_at_both_ends_of_their_range(
    inner, name
):
    cls = FAULTS[name]
    keywords = list(inspect.signature(cls).parameters)
    assert keywords[:2] == ["inner", "rng"] and keywords[2:] == list(cls.PARAMS)
    wrapped = LamportClock() if cls is SkewedClock else inner
    for end in ("low", "high"):
        params = {param: getattr(allowed, end) for param, allowed in cls.PARAMS.items()}
        fault = cls(wrapped, random.Random(0), **params)  # type: ignore[arg-type]
        fault.heal()
        assert {param: getattr(fault, param) for param in params} == params


def test_a_number_range_refuses_with_a_reason_and_a_fix_and_checks_to_the_type_it_declares():
    ticks = NumberRange(1, 10, "a whole number in [1, 10]", integer=True)
    assert ticks.refusal(3) is None and ticks.refusal(3.0) is None
    assert ticks.refusal("3") == ("is not a number", "Give a whole number in [1, 10].")
    for bad in (0, 11, 2.5, float("inf")):
        assert ticks.refusal(bad) == ("is out of range", "Give a whole number in [1, 10].")
    assert (ticks.check("f", "n", 3.0), type(ticks.check("f", "n", 3.0))) == (3, int)
    share = NumberRange(0, 1, "a share in [0, 1]")
    assert (share.check("f", "s", 1), type(share.check("f", "s", 1))) == (1.0, float)
