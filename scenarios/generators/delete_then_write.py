"""``delete_then_write``: deletes that race writes, writes long after a delete, and
restores followed by late writes whose causal_seq predates the delete.

Rounds rotate over the entities. In each round every worker writes to the round's
entity while one of them (the *deleter*) deletes it halfway through its own writes,
reads it, writes to it again after a long pause, and then restores it, reads, and sends
two stale writes: one from far in the past (its ``seq_offset`` is ``-stale_lag``, which
the runner's clamp at 0 makes the oldest possible), and one that claims a seq only a
little before the delete's. Every ``keep_deleted_every``-th round the entity stays
deleted until it comes round again, so writes reach it long after the delete, in time
and in operations; the other workers also revisit the previous round's entity.
"""

from __future__ import annotations

from ..plan import Step
from ._base import Context, GeneratorParam, generator
from ._facts import PLAIN
from ._steps import entity_ids, final_reads, pause, read

__all__ = ["delete_rounds", "delete_then_write"]


def delete_rounds(
    ctx: Context,
    *,
    stream: str,
    namespace: str,
    entities: tuple[str, ...],
    slots: tuple[str, ...],
    rounds: int,
    writes_per_round: int,
    late_pause_s: float,
    stale_lag: int,
    keep_deleted_every: int,
    max_pause_s: float,
) -> list[list[Step]]:
    """Per worker, ``rounds`` rounds of racing writes, deletes and restores."""
    rngs = [ctx.rng(f"{stream}/{worker}") for worker in range(ctx.workers)]
    plans: list[list[Step]] = [[] for _ in range(ctx.workers)]
    deleted_at: dict[str, tuple[int, int]] = {}

    def write(worker: int, entity: str, *, wait: float | None = None, offset: int = 0) -> Step:
        rng = rngs[worker]
        fact = ctx.facts.plain(namespace, entity, rng.choice(slots))
        pause_s = pause(rng, max_pause_s) if wait is None else wait
        return fact.write(pause_s=pause_s, seq_offset=offset)

    def restore(worker: int, entity: str) -> None:
        steps = plans[worker]
        by, index = deleted_at.pop(entity)
        steps += [
            Step(kind="restore", namespace=namespace, entity_id=entity),
            read(namespace, entity),
            write(worker, entity, offset=-stale_lag),
            read(namespace, entity),
        ]
        # Claims a seq a little before the delete's, if the other workers have not
        # run far ahead of this one since; the history tells whether it did.
        since = len(steps) - index if by == worker else len(steps) // 4
        steps += [write(worker, entity, offset=-(2 * ctx.workers * since + 1)),
                  read(namespace, entity)]

    for number in range(rounds):
        entity = entities[number % len(entities)]
        previous = entities[(number - 1) % len(entities)] if number else entity
        deleter = number % ctx.workers
        for worker in range(ctx.workers):
            rng = rngs[worker]
            steps = plans[worker]
            if worker != deleter:
                for _ in range(writes_per_round):
                    steps.append(write(worker, entity))
                    if rng.random() < 0.5:
                        steps.append(read(namespace, entity))
                steps += [write(worker, entity, wait=late_pause_s / 2), read(namespace, entity)]
                if previous != entity:
                    steps += [write(worker, previous), read(namespace, previous)]
                continue
            if entity in deleted_at:
                restore(worker, entity)
            steps += [write(worker, entity) for _ in range(writes_per_round // 2)]
            deleted_at[entity] = (worker, len(steps))
            steps += [
                Step(kind="delete", namespace=namespace, entity_id=entity,
                     pause_s=pause(rng, max_pause_s)),
                read(namespace, entity),
                write(worker, entity, wait=late_pause_s),
                read(namespace, entity),
            ]
            if not (keep_deleted_every and number % keep_deleted_every == keep_deleted_every - 1):
                restore(worker, entity)
                steps += [write(worker, entity), read(namespace, entity)]
    for entity in sorted(deleted_at):
        restore(deleted_at[entity][0], entity)
    return plans


@generator(
    entities=GeneratorParam(int, 4, "how many entities take turns", minimum=1, maximum=1000),
    slots=GeneratorParam(
        tuple, ("city", "job"), "the slots written", minimum=1, choices=tuple(PLAIN)
    ),
    rounds=GeneratorParam(int, 12, "delete rounds at scale 1", minimum=1, maximum=10**5),
    writes_per_round=GeneratorParam(
        int, 6, "writes of each worker per round", minimum=2, maximum=1000
    ),
    late_pause_s=GeneratorParam(
        float, 0.15, "how long after a delete its late write comes, in seconds",
        minimum=0.0, maximum=60.0,
    ),
    stale_lag=GeneratorParam(
        int, 10**9, "how far before the clock a stale write after a restore claims to be",
        minimum=1, maximum=2**62,
    ),
    keep_deleted_every=GeneratorParam(
        int, 3, "every n-th round leaves its entity deleted until its next turn (0: never)",
        minimum=0, maximum=1000,
    ),
    max_pause_s=GeneratorParam(
        float, 0.002, "the longest pause before a step, in seconds", minimum=0.0, maximum=10.0
    ),
)
def delete_then_write(ctx: Context) -> list[list[Step]]:
    plans = delete_rounds(
        ctx,
        stream="deletes",
        namespace=ctx.scenario,
        entities=entity_ids(ctx.params["entities"]),
        slots=ctx.params["slots"],
        rounds=ctx.scaled("rounds"),
        writes_per_round=ctx.params["writes_per_round"],
        late_pause_s=ctx.params["late_pause_s"],
        stale_lag=ctx.params["stale_lag"],
        keep_deleted_every=ctx.params["keep_deleted_every"],
        max_pause_s=ctx.params["max_pause_s"],
    )
    return [steps + final_reads(steps) for steps in plans]
