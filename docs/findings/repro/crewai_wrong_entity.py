"""crewai 1.15 Memory on LanceDB: a scope is a bare string prefix, so user-1's scope
also holds user-10's memories, and forgetting user-1 forgets user-10.

Run with crewai 1.15.x. Exits 1 while the failure is there.
"""

import os
import sys
import tempfile

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_TESTING"] = "true"  # else each remember() waits 5 s for a trace span

from crewai.memory.unified_memory import Memory


def embed(texts: list[str]) -> list[list[float]]:  # no two texts here share a scope
    return [[1.0, 0.0] for _ in texts]


memory = Memory(llm="unused", embedder=embed, storage=tempfile.mkdtemp() + "/lancedb")
for user, city in [("user-1", "Paris"), ("user-10", "Rome")]:
    memory.remember(f"lives in {city}", scope=f"/users/{user}", categories=["city"],
                    importance=0.5)
listed = sorted(r.scope for r in memory.list_records(scope="/users/user-1"))
memory.forget(scope="/users/user-1")
left = [r.scope for r in memory.list_records(scope="/users/user-10")]
print(f"scopes listed for user-1: {listed}; left for user-10 after forgetting "
      f"user-1: {left}")
sys.exit(0 if listed == ["/users/user-1"] and left == ["/users/user-10"] else 1)
