"""``value_diversity``: every value class and every non-ASCII attribute name, written and
read straight back.

Each worker keeps entities of its own, so no other worker's write can replace a record
before the worker reads it back: what a read serves is exactly what the store kept of
the worker's own writes. Each round, a worker writes one new fact to every slot of its
entity, the slots named in Chinese, in mixed script and at 256 characters among them
(:data:`~scenarios.generators._facts.NON_ASCII_SLOTS`), and then reads the entity. The
value classes of :mod:`invariants.wording.values` come round in turn, so every class
is written in the first round of a plan with as many slots, and one write per round is
long (over :data:`~invariants.wording.values.LONG_VALUE_CHARS` characters, within the
plan's ``max_value_bytes``).

A store that cuts, re-encodes, strips or normalizes values serves a value no write
produced (a *phantom*, under durability); one whose attribute key keeps only ASCII
letters and digits files two of these slots under one key, and a write to one
replaces the other's record (a *lost* write).
"""

from __future__ import annotations

from invariants.wording.values import LONG_VALUE_CHARS, TEXT_CLASSES

from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._facts import NON_ASCII_SLOTS, PLAIN
from ._steps import final_reads, pause, read

__all__ = ["value_diversity"]


@generator(
    entities=GeneratorParam(int, 1, "entities of each worker's own", minimum=1, maximum=100),
    slots=GeneratorParam(
        tuple, (*NON_ASCII_SLOTS, "city"), "the slots written, each round, to each entity",
        minimum=1, choices=tuple(PLAIN),
    ),
    rounds=GeneratorParam(int, 4, "rounds at scale 1", minimum=1, maximum=10**5),
    max_pause_s=GeneratorParam(
        float, 0.001, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def value_diversity(ctx: Context) -> list[list[Step]]:
    slots: tuple[str, ...] = ctx.params["slots"]
    longest = ctx.max_value_bytes // 4
    plans: list[list[Step]] = []
    for worker in range(ctx.workers):
        rng = ctx.rng(f"values/{worker}")
        namespace = ctx.scenario
        entities = [f"w{worker}-{n}" for n in range(1, ctx.params["entities"] + 1)]
        mine: list[Step] = []
        turn = worker
        for _ in range(ctx.scaled("rounds")):
            for entity in entities:
                order = list(slots)
                rng.shuffle(order)
                stretched = rng.randrange(len(order))
                for position, slot in enumerate(order):
                    text_class = TEXT_CLASSES[turn % len(TEXT_CLASSES)]
                    turn += 1
                    length = (rng.randint(min(LONG_VALUE_CHARS + 1, longest), longest)
                              if position == stretched else None)
                    fact = ctx.facts.plain(namespace, entity, slot, text_class=text_class,
                                           length=length)
                    mine.append(fact.write(pause_s=pause(rng, ctx.params["max_pause_s"])))
                mine.append(read(namespace, entity))
        plans.append(mine + final_reads(mine))
    return plans
