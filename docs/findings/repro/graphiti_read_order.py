"""graphiti-core 0.31 on Kuzu: an entity's edges are listed in no order of their valid_at."""
import asyncio, logging, os, sys, tempfile, warnings
os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"; warnings.simplefilter("ignore"); logging.disable(logging.WARNING)
from datetime import datetime, timezone
from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphProvider
from graphiti_core.driver.kuzu_driver import KuzuDriver
from graphiti_core.graph_queries import get_fulltext_indices
from graphiti_core.edges import EntityEdge
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.nodes import EntityNode

class Model(LLMClient):  # three different relations: no duplicate, nothing contradicted
    async def _generate_response(self, messages, response_model=None, *args, **kwargs):
        return {"duplicate_facts": [], "contradicted_facts": [], "entity_resolutions": []}
class Embedder(EmbedderClient):
    async def create(self, input_data): return [1.0, 0.0]
    async def create_batch(self, input_data_list): return [[1.0, 0.0] for _ in input_data_list]
class Ranker(CrossEncoderClient):
    async def rank(self, query, passages): return [(p, 1.0) for p in passages]

async def main() -> int:
    g = Graphiti(graph_driver=KuzuDriver(tempfile.mkdtemp() + "/g"), llm_client=Model(None),
                 embedder=Embedder(), cross_encoder=Ranker())
    for index in get_fulltext_indices(GraphProvider.KUZU):  # graphiti never creates them
        await g.driver.execute_query(index)
    alice = EntityNode(uuid="alice", name="alice", group_id="g")
    for day, relation, target in [(2, "LIVES_IN", "Paris"), (1, "WORKS_AS", "baker"), (3, "LIKES", "tea")]:
        when = datetime(2026, 1, day, tzinfo=timezone.utc)
        await g.add_triplet(alice.model_copy(), EntityEdge(
            group_id="g", source_node_uuid="alice", target_node_uuid=target, name=relation,
            fact=f"alice {relation} {target}", valid_at=when, created_at=when),
            EntityNode(uuid=target, name=target, group_id="g"))
    days = [e.valid_at.day for e in await EntityEdge.get_by_node_uuid(g.driver, "alice")]
    print(f"valid_at days of alice's edges, as listed: {days}")
    return 0 if days == sorted(days) else 1

sys.exit(asyncio.run(main()))
