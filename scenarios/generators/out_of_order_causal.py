"""``out_of_order_causal``: causal seqs that arrive out of order and cross digit
boundaries.

Each worker first makes ``boundary_writes`` writes to one hot key. The runner's clock
starts at 0 for each plan and ticks once per step, so by the time any worker leaves
that phase the clock has passed ``boundary_writes``: with the default 101, every seq
from 1 to 101 was drawn by a step on the hot key, and the key has seen 9 → 10 and
99 → 100. A backend that compares seqs as text ("10" < "9") cannot hide.

Then the workers write and read a few keys, and a share of the writes carry a negative
``seq_offset``: they claim a seq a little older than the clock's, as a write would
that was issued earlier and delivered late. The scenario's ``out_of_order`` and
``skewed_clock`` faults reorder delivery and seqs further.
"""

from __future__ import annotations

from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._facts import PLAIN
from ._steps import entity_ids, final_reads, read
from .concurrent_writes import contention

__all__ = ["out_of_order_causal"]

HOT_ENTITY = "hot-1"
HOT_SLOT = "city"


@generator(
    boundary_writes=GeneratorParam(
        int, 101, "writes of each worker to the hot key before anything else (not scaled)",
        minimum=0, maximum=10**5,
    ),
    entities=GeneratorParam(
        int, 2, "how many entities the later writes share", minimum=1, maximum=1000
    ),
    slots=GeneratorParam(
        tuple, ("city", "coffee_preference"), "the slots written", minimum=1,
        choices=tuple(PLAIN),
    ),
    steps_per_worker=GeneratorParam(
        int, 200, "steps of each worker after the hot phase, at scale 1",
        minimum=1, maximum=10**6,
    ),
    write_ratio=GeneratorParam(
        float, 0.7, "the share of steps that write", minimum=0.0, maximum=1.0
    ),
    lag_ratio=GeneratorParam(
        float, 0.35, "the share of writes that claim an older seq", minimum=0.0, maximum=1.0
    ),
    max_lag=GeneratorParam(int, 12, "the most ticks a lagging write claims to be behind",
                  minimum=1, maximum=10**6),
    max_pause_s=GeneratorParam(
        float, 0.001, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def out_of_order_causal(ctx: Context) -> list[list[Step]]:
    namespace = ctx.scenario
    boundary = ctx.params["boundary_writes"]
    hot = contention(
        ctx,
        stream="hot",
        namespace=namespace,
        entities=(HOT_ENTITY,),
        slots=(HOT_SLOT,),
        steps=boundary,
        write_ratio=1.0,
        lag_ratio=ctx.params["lag_ratio"] / 4,
        max_lag=3,
        max_pause_s=0.0,
    ) if boundary else [[] for _ in range(ctx.workers)]
    later = contention(
        ctx,
        stream="lagged",
        namespace=namespace,
        entities=entity_ids(ctx.params["entities"]),
        slots=ctx.params["slots"],
        steps=ctx.scaled("steps_per_worker"),
        write_ratio=ctx.params["write_ratio"],
        lag_ratio=ctx.params["lag_ratio"],
        max_lag=ctx.params["max_lag"],
        max_pause_s=ctx.params["max_pause_s"],
    )
    plans: list[list[Step]] = []
    for first, then in zip(hot, later, strict=True):
        # The hot key is read once per ten writes, so every seq near a boundary still
        # goes to a write.
        phase = [step for n, write in enumerate(first, 1)
                 for step in ((write, read(namespace, HOT_ENTITY)) if n % 10 == 0 else (write,))]
        steps = phase + then
        plans.append(steps + final_reads(steps))
    return plans
