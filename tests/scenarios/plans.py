"""Plans shared by the scenario tests, generated once per process."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterator

from scenarios import load_scenario
from scenarios.plan import Plan, Step

NAMES = ("concurrent_writes", "delete_then_write", "mixed", "out_of_order_causal",
         "paraphrase_flood", "network_faults", "partition", "crash_restart")
LEVELS = ("surface", "lexical", "semantic")
CJK = re.compile("[\u4e00-\u9fff]")


@functools.cache
def plan(name: str, level: str = "semantic", workers: int = 3, seed: int = 7,
         scale: float = 1.0) -> Plan:
    return load_scenario(name).plan(seed=seed, workers=workers, level=level, scale=scale)


def writes(p: Plan) -> Iterator[Step]:
    return (step for steps in p.workers for step in steps if step.kind == "write")


def facts_by_key(p: Plan) -> dict[tuple[str, str, str], dict[str, list[Step]]]:
    """(namespace, entity, slot) -> fact -> its writes."""
    table: dict[tuple[str, str, str], dict[str, list[Step]]] = defaultdict(
        lambda: defaultdict(list))
    for step in writes(p):
        table[step.namespace, step.entity_id, step.meta["slot"]][step.meta["fact"]].append(step)
    return table
