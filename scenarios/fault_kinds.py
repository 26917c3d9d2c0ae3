"""The faults a scenario can name, declared as data: each one's parameters and meaning.

This is the only declaration of what a fault takes: :mod:`chaos.faults` builds one
injector per entry (and checks at import that it has one for each, and no other), and
a scenario file's ``[[faults]]`` tables are checked against it when they are loaded,
before any backend is touched. It lives below :mod:`chaos` so that loading a scenario
needs none of the injectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .ranges import NumberRange

__all__ = ["FAULT_KINDS", "FaultKind"]

_PROBABILITY = NumberRange(0.0, 1.0, "a probability in [0, 1]")
_SECONDS = NumberRange(0.0, 60.0, "seconds in [0, 60]")
_TICKS = NumberRange(1, 10**9, "a whole number of clock ticks in [1, 1e9]", integer=True)


@dataclass(frozen=True, slots=True)
class FaultKind:
    """One fault: the parameters it takes, all required, in the order its injector's
    constructor takes them, and what it does, in a sentence for docs and listings."""

    params: Mapping[str, NumberRange]
    summary: str


FAULT_KINDS: Mapping[str, FaultKind] = MappingProxyType(
    {
        "delay": FaultKind(
            MappingProxyType({"mean_s": _SECONDS, "jitter_s": _SECONDS}),
            "sleeps mean_s ± jitter_s before delivering, so workers' operations overlap",
        ),
        "out_of_order": FaultKind(
            MappingProxyType({"p": _PROBABILITY, "hold_s": _SECONDS}),
            "with probability p, holds an operation back for hold_s and answers with a "
            "timeout at once; it lands after later ones",
        ),
        "lost_ack": FaultKind(
            MappingProxyType({"p": _PROBABILITY}),
            "with probability p, applies the operation and loses its answer",
        ),
        "fail_before_apply": FaultKind(
            MappingProxyType({"p": _PROBABILITY}),
            "with probability p, refuses the operation before it reaches the backend",
        ),
        "duplicate_delivery": FaultKind(
            MappingProxyType({"p": _PROBABILITY}),
            "with probability p, delivers the operation twice (a retry)",
        ),
        "skewed_clock": FaultKind(
            MappingProxyType({"p": _PROBABILITY, "max_skew": _TICKS}),
            "with probability p, hands out a causal seq up to max_skew ticks below the "
            "true one",
        ),
    }
)
"""Every fault a :class:`~scenarios.plan.FaultSpec` can name, by name."""
