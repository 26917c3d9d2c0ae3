"""graphiti-core 0.31 on Kuzu: two concurrent add_triplet calls for one slot keep both."""
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

class Model(LLMClient):  # any edge a new one is compared with is the same slot: an update
    async def _generate_response(self, messages, response_model=None, *args, **kwargs):
        n = messages[-1].content.count("'idx'")
        return {"duplicate_facts": [], "contradicted_facts": list(range(n)), "entity_resolutions": []}
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
    def city(name: str, day: int):
        when = datetime(2026, 1, day, tzinfo=timezone.utc)
        return (alice.model_copy(), EntityEdge(group_id="g", source_node_uuid="alice", target_node_uuid=name,
                name="LIVES_IN", fact=f"alice lives in {name}", valid_at=when, created_at=when),
                EntityNode(uuid=name, name=name, group_id="g"))
    await asyncio.gather(g.add_triplet(*city("Paris", 1)), g.add_triplet(*city("Rome", 2)))
    current = sorted(e.fact for e in await EntityEdge.get_by_node_uuid(g.driver, "alice") if e.invalid_at is None)
    print(f"current edges of alice after two concurrent writes: {current}")
    return 0 if len(current) == 1 else 1

sys.exit(asyncio.run(main()))
