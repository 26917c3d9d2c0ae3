"""Small step builders the generators share."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from ..plan import Step

__all__ = ["entity_ids", "final_reads", "interleave", "pause", "read"]


def entity_ids(count: int, prefix: str = "user") -> tuple[str, ...]:
    return tuple(f"{prefix}-{n}" for n in range(1, count + 1))


def pause(rng: random.Random, max_s: float) -> float:
    """A think time in [0, max_s], to the microsecond so plans print cleanly."""
    return round(rng.uniform(0.0, max_s), 6) if max_s > 0 else 0.0


def read(namespace: str, entity_id: str, pause_s: float = 0.0) -> Step:
    return Step(kind="read", namespace=namespace, entity_id=entity_id, pause_s=pause_s)


def final_reads(steps: Iterable[Step]) -> list[Step]:
    """One read of every entity the steps touched, in first-touched order."""
    seen = dict.fromkeys((step.namespace, step.entity_id) for step in steps)
    return [read(namespace, entity_id) for namespace, entity_id in seen]


def interleave(rng: random.Random, lists: Sequence[Sequence[Step]]) -> list[Step]:
    """Merge step lists at random, keeping each list's own order."""
    order = [index for index, steps in enumerate(lists) for _ in steps]
    rng.shuffle(order)
    positions = [0] * len(lists)
    merged: list[Step] = []
    for index in order:
        merged.append(lists[index][positions[index]])
        positions[index] += 1
    return merged
