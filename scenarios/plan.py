"""An operation plan: what each worker will do, fixed by the scenario and the seed.

A plan is data, so the same ``--seed`` reproduces it exactly and a report can print the
steps that led to a violation. What the plan does *not* fix is timing: causal seqs are
drawn from the Lamport clock when a step starts, and faults decide delivery.

The plan types live here, below :mod:`chaos`, because the generators build plans and
the chaos runner executes them: both import this module, neither imports the other
for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .network_plan import Network
from .process_plan import Processes

__all__ = ["FaultSpec", "Plan", "Step", "StepKind"]

StepKind = Literal["write", "delete", "restore", "read"]


@dataclass(frozen=True, slots=True)
class Step:
    """One operation of one worker.

    ``seq_offset`` is added to the clock value the step draws, so a scenario can issue a
    deliberately stale write (negative) the way a client with a lagging clock would.
    ``meta`` is the generator's ground truth for writes: ``fact`` (fact id), ``slot``
    (canonical attribute) and ``paraphrase`` (``none``, ``surface``, ``lexical`` or
    ``semantic``). The checkers trust it, never the backend's normalizer.
    """

    kind: StepKind
    namespace: str
    entity_id: str
    attribute: str | None = None
    value: str | None = None
    meta: Mapping[str, str] = field(default_factory=dict)
    seq_offset: int = 0
    pause_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """A fault to wrap around each worker's backend handle, with its parameters.

    ``name`` is one of :data:`scenarios.fault_kinds.FAULT_KINDS`.
    """

    name: str
    params: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a run will attempt, per worker, plus the conditions it must produce.

    ``network``, when set, puts the workers in client groups behind fault proxies and
    runs a nemesis timeline alongside them (:mod:`scenarios.network_plan`); such a plan
    needs a backend reached over HTTP. ``processes``, when set, runs the workers in worker
    processes sharing the store, and may kill them (:mod:`scenarios.process_plan`).
    """

    scenario: str
    seed: int
    workers: tuple[tuple[Step, ...], ...]
    faults: tuple[FaultSpec, ...] = ()
    requires: tuple[str, ...] = ()
    network: Network | None = None
    processes: Processes | None = None

    @property
    def size(self) -> int:
        return sum(len(steps) for steps in self.workers)
