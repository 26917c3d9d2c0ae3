"""``paraphrase_flood``: bursts of paraphrases of the same facts, from every worker.

Each round, every key (an entity's slot) has one fact, the same for all workers, and
every worker writes a burst of its variants: the plain form and paraphrases at each
level the plan allows, in Chinese and English, under attribute-name variants too, then
reads the entity. Across rounds a key's facts are must-not-merge pairs: "likes X",
then "does not like X", then "likes Y". A backend must keep one record per fact, and
must let each round's fact replace the last.

Rounds run as a wavefront over the keys: the first key's second round comes right after
its first, while the second key has its first, and so on, each worker taking the keys of
one wave in its own order. A key then holds two facts, and its attribute variants two
spellings of them, within the first waves of the plan, not only once every key has had
a round: a run cut short by its budget still decides uniqueness.
"""

from __future__ import annotations

from invariants.history import Paraphrase

from ..paraphrases import SLOTS
from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._steps import entity_ids, final_reads, pause, read

__all__ = ["flood", "paraphrase_flood"]


def flood(
    ctx: Context,
    *,
    stream: str,
    namespace: str,
    entities: tuple[str, ...],
    slots: tuple[str, ...],
    rounds: int,
    burst: int,
    max_pause_s: float,
) -> list[list[Step]]:
    """Per worker, ``rounds`` rounds of a ``burst`` of variants of each key's fact, in
    waves: wave ``w`` holds round ``w - k`` of key ``k``."""
    shared = ctx.rng(f"{stream}/facts")
    topics = [ctx.facts.topic(namespace, entity, slot) for entity in entities for slot in slots]
    facts = [[topic.next(shared) for topic in topics] for _ in range(rounds)]
    rngs = [ctx.rng(f"{stream}/{worker}") for worker in range(ctx.workers)]
    plans: list[list[Step]] = [[] for _ in range(ctx.workers)]
    # Every level, the plain form included, comes round in each fact's bursts once the
    # workers' bursts together are long enough.
    cycle: tuple[Paraphrase, ...] = ("none", *ctx.levels)
    for wave in range(rounds + len(topics) - 1):
        keys = [k for k in range(len(topics)) if 0 <= wave - k < rounds]
        for worker, rng in enumerate(rngs):
            order = list(keys)
            rng.shuffle(order)
            for key in order:
                number = wave - key
                fact = facts[number][key]
                for shot in range(burst):
                    level = cycle[(worker * burst + shot + number) % len(cycle)]
                    plans[worker].append(fact.variant(rng, level, pause_s=pause(rng, max_pause_s)))
                plans[worker].append(read(namespace, fact.entity_id))
    return plans


@generator(
    entities=GeneratorParam(int, 2, "how many entities", minimum=1, maximum=1000),
    slots=GeneratorParam(
        tuple, tuple(SLOTS), "the slots paraphrased", minimum=1, choices=tuple(SLOTS)
    ),
    rounds=GeneratorParam(int, 6, "rounds at scale 1", minimum=1, maximum=10**5),
    burst=GeneratorParam(int, 4, "variants each worker writes per fact per round", minimum=1,
                maximum=1000),
    max_pause_s=GeneratorParam(
        float, 0.001, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def paraphrase_flood(ctx: Context) -> list[list[Step]]:
    plans = flood(
        ctx,
        stream="flood",
        namespace=ctx.scenario,
        entities=entity_ids(ctx.params["entities"]),
        slots=ctx.params["slots"],
        rounds=ctx.scaled("rounds"),
        burst=ctx.params["burst"],
        max_pause_s=ctx.params["max_pause_s"],
    )
    return [steps + final_reads(steps) for steps in plans]
