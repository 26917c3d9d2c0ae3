"""``mixed``: every other scenario at lower intensity, in two namespaces at once.

Both namespaces use the same entity ids, so a record that crosses from one to the
other is a *leak* the isolation checker can see. Each cycle runs the four kinds of
block (contention, delete rounds, lagging seqs, a paraphrase flood) in an order drawn
from the seed; within a block, each worker's steps in the two namespaces are shuffled
together, each namespace's own order kept.
"""

from __future__ import annotations

from collections.abc import Callable

from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._steps import entity_ids, final_reads, interleave
from .concurrent_writes import contention
from .delete_then_write import delete_rounds
from .paraphrase_flood import flood

__all__ = ["mixed"]

Block = Callable[[str, str], list[list[Step]]]


@generator(
    entities=GeneratorParam(int, 3, "how many entities, the same ids in both namespaces",
                   minimum=1, maximum=1000),
    cycles=GeneratorParam(int, 3, "cycles of the four blocks at scale 1", minimum=1, maximum=10**5),
    block_steps=GeneratorParam(int, 16, "steps of each worker in a contention or lagging block",
                      minimum=1, maximum=10**5),
    max_pause_s=GeneratorParam(
        float, 0.001, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def mixed(ctx: Context) -> list[list[Step]]:
    namespaces = (ctx.scenario, f"{ctx.scenario}-twin")
    entities = entity_ids(ctx.params["entities"])
    steps = ctx.params["block_steps"]
    max_pause_s = ctx.params["max_pause_s"]
    plain = ("city", "job")
    paraphrased = ("coffee_preference", "language")

    def contend(stream: str, namespace: str) -> list[list[Step]]:
        return contention(ctx, stream=stream, namespace=namespace, entities=entities,
                          slots=plain, steps=steps, write_ratio=0.6, max_pause_s=max_pause_s)

    def deletes(stream: str, namespace: str) -> list[list[Step]]:
        return delete_rounds(ctx, stream=stream, namespace=namespace, entities=entities,
                             slots=plain, rounds=len(entities), writes_per_round=4,
                             late_pause_s=0.05, stale_lag=10**9, keep_deleted_every=0,
                             max_pause_s=max_pause_s)

    def lags(stream: str, namespace: str) -> list[list[Step]]:
        return contention(ctx, stream=stream, namespace=namespace, entities=entities,
                          slots=plain, steps=steps, write_ratio=0.7, lag_ratio=0.3,
                          max_lag=8, max_pause_s=max_pause_s)

    def paraphrases(stream: str, namespace: str) -> list[list[Step]]:
        return flood(ctx, stream=stream, namespace=namespace, entities=entities,
                     slots=paraphrased, rounds=1, burst=len(ctx.levels) + 1,
                     max_pause_s=max_pause_s)

    blocks: dict[str, Block] = {
        "contend": contend, "deletes": deletes, "lags": lags, "paraphrases": paraphrases,
    }
    shared = ctx.rng("order")
    plans: list[list[Step]] = [[] for _ in range(ctx.workers)]
    for cycle in range(ctx.scaled("cycles")):
        names = list(blocks)
        shared.shuffle(names)
        for name in names:
            per_namespace = [blocks[name](f"{name}/{cycle}/{ns}", ns) for ns in namespaces]
            for worker, mine in enumerate(plans):
                mixer = ctx.rng(f"mix/{name}/{cycle}/{worker}")
                mine += interleave(mixer, [lists[worker] for lists in per_namespace])
    return [steps + final_reads(steps) for steps in plans]
