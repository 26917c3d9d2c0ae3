"""The generators behind the named scenarios, and what a generator is.

A scenario file names its generator as ``module:attribute`` (``scenarios.generators:
concurrent_writes``), or as a module that defines ``generator``. Either resolves to a
:class:`Generator`; write your own with the :func:`generator` decorator::

    @generator(keys=GeneratorParam(int, 3, "how many keys", minimum=1))
    def mine(ctx: Context) -> list[list[Step]]:
        return [[...] for worker in range(ctx.workers)]
"""

from __future__ import annotations

from ._base import Context, Generator, GeneratorParam, generator
from ._facts import (
    LONG_ATTRIBUTES,
    NON_ASCII_SLOTS,
    PLAIN,
    Facts,
    ParaphraseFact,
    PlanFact,
    Topic,
    scenario_code,
)
from .concurrent_writes import concurrent_writes
from .delete_then_write import delete_then_write
from .mixed import mixed
from .out_of_order_causal import out_of_order_causal
from .paraphrase_flood import paraphrase_flood
from .value_diversity import value_diversity

__all__ = [
    "LONG_ATTRIBUTES",
    "NON_ASCII_SLOTS",
    "PLAIN",
    "Context",
    "Facts",
    "Generator",
    "GeneratorParam",
    "ParaphraseFact",
    "PlanFact",
    "Topic",
    "concurrent_writes",
    "delete_then_write",
    "generator",
    "mixed",
    "out_of_order_causal",
    "paraphrase_flood",
    "scenario_code",
    "value_diversity",
]

Param = GeneratorParam
"""The earlier name of :class:`GeneratorParam`, kept so that generators written against
earlier releases (``from scenarios.generators import Param``) still load."""
