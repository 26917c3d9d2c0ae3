"""The plan types, where a custom generator written against earlier releases imports them.

Their home is :mod:`scenarios.plan`, below :mod:`chaos`, since the generators build
plans and the runner executes them; this module only keeps ``from chaos.plan import
Step`` working for code outside memcert.
"""

from __future__ import annotations

from scenarios.plan import FaultSpec, Plan, Step, StepKind

__all__ = ["FaultSpec", "Plan", "Step", "StepKind"]
