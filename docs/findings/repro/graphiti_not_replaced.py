"""graphiti-core 0.31 on Kuzu: a contradicting fact with the same valid_at invalidates nothing.

Run with graphiti-core 0.31.x, kuzu 0.11.x and httpx. Exits 1 while the failure is there.
"""

import asyncio
import logging
import os
import sys
import tempfile
import warnings
from datetime import UTC, datetime
from typing import Any

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphProvider
from graphiti_core.driver.kuzu_driver import KuzuDriver
from graphiti_core.edges import EntityEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.graph_queries import get_fulltext_indices
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.nodes import EntityNode


class Model(LLMClient):  # every fact it is shown is the same slot: contradicted
    async def _generate_response(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        shown = list(range(messages[-1].content.count("'idx'")))
        return {"duplicate_facts": [], "contradicted_facts": shown, "entity_resolutions": []}


class Embedder(EmbedderClient):
    async def create(self, input_data: Any) -> list[float]:
        return [1.0, 0.0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in input_data_list]


class Ranker(CrossEncoderClient):
    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        return [(p, 1.0) for p in passages]


def triplet(relation: str, target: str, day: int) -> tuple[Any, Any, Any]:
    when = datetime(2026, 1, day, tzinfo=UTC)
    edge = EntityEdge(group_id="g", source_node_uuid="alice", target_node_uuid=target,
                      name=relation, fact=f"alice {relation} {target}", valid_at=when,
                      created_at=when)
    return (EntityNode(uuid="alice", name="alice", group_id="g"), edge,
            EntityNode(uuid=target, name=target, group_id="g"))


async def main() -> int:
    graphiti = Graphiti(graph_driver=KuzuDriver(tempfile.mkdtemp() + "/g"),
                        llm_client=Model(None), embedder=Embedder(), cross_encoder=Ranker())
    for index in get_fulltext_indices(GraphProvider.KUZU):  # graphiti never creates them
        await graphiti.driver.execute_query(index)
    await graphiti.add_triplet(*triplet("lives in", "Paris", 1))
    await graphiti.add_triplet(*triplet("lives in", "Rome", 1))  # contradicts Paris
    edges = await EntityEdge.get_by_node_uuid(graphiti.driver, "alice")
    current = sorted(e.fact for e in edges if e.invalid_at is None)
    print(f"current edges of alice after one write, then the other: {current}")
    return 0 if len(current) == 1 else 1

warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
sys.exit(asyncio.run(main()))
