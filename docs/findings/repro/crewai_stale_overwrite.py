"""crewai 1.15 Memory on LanceDB: consolidation replaces a fact with whichever write
arrives last, since nothing in remember() says when a fact became true.

Run with crewai 1.15.x. Exits 1 while the failure is there.
"""

import json
import os
import sys
import tempfile
from typing import Any

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_TESTING"] = "true"  # else each remember() waits 5 s for a trace span

from crewai.llms.base_llm import BaseLLM
from crewai.memory.unified_memory import Memory


class Model(BaseLLM):  # the new city supersedes the old one: delete it, insert the new
    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        old = messages[-1]["content"].split("- id=")[1].split(" ")[0]
        return json.dumps({"actions": [{"action": "delete", "record_id": old}],
                           "insert_new": True})

def embed(texts: list[str]) -> list[list[float]]:  # every text alike: always consolidate
    return [[1.0, 0.0] for _ in texts]


memory = Memory(llm=Model(model="scripted"), embedder=embed,
                storage=tempfile.mkdtemp() + "/lancedb")
# Alice moved to Paris on 2 Jan. The news that she lived in Rome (1 Jan) arrives late.
for city, day in [("Paris", "2026-01-02"), ("Rome", "2026-01-01")]:
    memory.remember(f"alice lives in {city}", scope="/users/alice", categories=["city"],
                    importance=0.5, metadata={"valid_from": day})
left = [(r.content, r.metadata["valid_from"]) for r in memory.list_records(scope="/users/alice")]
print(f"memories of alice: {left}")
sys.exit(0 if left == [("alice lives in Paris", "2026-01-02")] else 1)
