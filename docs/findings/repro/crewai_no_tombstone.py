"""crewai 1.15 Memory on LanceDB: after forget(scope), a late write recreates the scope.

Run with crewai 1.15.x. Exits 1 while the failure is there.
"""

import os
import sys
import tempfile

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_TESTING"] = "true"  # else each remember() waits 5 s for a trace span

from crewai.memory.unified_memory import Memory


def embed(texts: list[str]) -> list[list[float]]:  # nothing is left to consolidate with
    return [[1.0, 0.0] for _ in texts]


memory = Memory(llm="unused", embedder=embed, storage=tempfile.mkdtemp() + "/lancedb")
memory.remember("alice lives in Paris", scope="/users/alice", categories=["city"],
                importance=0.5)
memory.forget(scope="/users/alice")  # alice asked to be forgotten
# A write sent before the forget, delivered after it (a retry, a queue, a slow worker):
memory.remember("alice lives in Rome", scope="/users/alice", categories=["city"],
                importance=0.5)
left = [r.content for r in memory.list_records(scope="/users/alice")]
print(f"memories of alice after she was forgotten: {left}")
sys.exit(0 if not left else 1)
