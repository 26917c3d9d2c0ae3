"""crewai 1.15 Memory on LanceDB: consolidation replaces a fact with whichever write
arrives last, since nothing in remember() says when a fact became true."""
import os, sys, tempfile
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", CREWAI_TRACING_ENABLED="false",
                  CREWAI_TESTING="true")
from crewai.llms.base_llm import BaseLLM
from crewai.memory.unified_memory import Memory

class Model(BaseLLM):  # the new city supersedes the old one: delete it, insert the new
    def call(self, messages, *args, **kwargs):
        old = messages[-1]["content"].split("- id=")[1].split(" ")[0]
        return f'{{"actions": [{{"action": "delete", "record_id": "{old}"}}], "insert_new": true}}'

memory = Memory(llm=Model(model="scripted"), embedder=lambda texts: [[1.0, 0.0] for _ in texts],
                storage=tempfile.mkdtemp() + "/lancedb")
# Alice moved to Paris on 2 Jan. The news that she lived in Rome (1 Jan) arrives late.
memory.remember("alice lives in Paris", scope="/users/alice", categories=["city"],
                importance=0.5, metadata={"valid_from": "2026-01-02"})
memory.remember("alice lives in Rome", scope="/users/alice", categories=["city"],
                importance=0.5, metadata={"valid_from": "2026-01-01"})
left = [(r.content, r.metadata["valid_from"]) for r in memory.list_records(scope="/users/alice")]
print(f"memories of alice: {left}")
sys.exit(0 if left == [("alice lives in Paris", "2026-01-02")] else 1)
