"""``concurrent_writes``: many workers write new facts to a few keys at once.

Every write is a new fact with a text of its own, so a read that serves two records of
one slot shows two facts (a *conflict*), and a read that serves an older fact after a
newer one was acknowledged shows a lost or reordered write.
"""

from __future__ import annotations

from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._facts import PLAIN
from ._steps import entity_ids, final_reads, pause, read

__all__ = ["concurrent_writes", "contention"]


def contention(
    ctx: Context,
    *,
    stream: str,
    namespace: str,
    entities: tuple[str, ...],
    slots: tuple[str, ...],
    steps: int,
    write_ratio: float,
    max_pause_s: float,
    lag_ratio: float = 0.0,
    max_lag: int = 1,
) -> list[list[Step]]:
    """Per worker, ``steps`` random writes of new facts and reads over shared keys;
    ``lag_ratio`` of the writes claim a seq up to ``max_lag`` ticks behind the clock.

    No lag is drawn when ``lag_ratio`` is 0, so plans without lag keep their seeds."""
    plans: list[list[Step]] = []
    for worker in range(ctx.workers):
        rng = ctx.rng(f"{stream}/{worker}")
        mine: list[Step] = []
        for _ in range(steps):
            entity = rng.choice(entities)
            wait = pause(rng, max_pause_s)
            if rng.random() < write_ratio:
                lag = (rng.randint(1, max_lag)
                       if lag_ratio > 0 and rng.random() < lag_ratio else 0)
                fact = ctx.facts.plain(namespace, entity, rng.choice(slots))
                mine.append(fact.write(pause_s=wait, seq_offset=-lag))
            else:
                mine.append(read(namespace, entity, wait))
        plans.append(mine)
    return plans


@generator(
    entities=GeneratorParam(
        int, 3, "how many entities every worker writes", minimum=1, maximum=1000
    ),
    slots=GeneratorParam(
        tuple, ("city", "job"), "the slots written", minimum=1, choices=tuple(PLAIN)
    ),
    steps_per_worker=GeneratorParam(
        int, 200, "steps of each worker at scale 1", minimum=1, maximum=10**6
    ),
    write_ratio=GeneratorParam(
        float, 0.6, "the share of steps that write", minimum=0.0, maximum=1.0
    ),
    max_pause_s=GeneratorParam(
        float, 0.002, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def concurrent_writes(ctx: Context) -> list[list[Step]]:
    plans = contention(
        ctx,
        stream="contention",
        namespace=ctx.scenario,
        entities=entity_ids(ctx.params["entities"]),
        slots=ctx.params["slots"],
        steps=ctx.scaled("steps_per_worker"),
        write_ratio=ctx.params["write_ratio"],
        max_pause_s=ctx.params["max_pause_s"],
    )
    return [steps + final_reads(steps) for steps in plans]
