"""crewai 1.15 Memory on LanceDB: consolidation replaces a record by deleting it and then
inserting the new one, so a reader in between finds the fact gone.

Run with crewai 1.15.x. Exits 1 while the failure is there.
"""

import json
import os
import sys
import tempfile
import threading
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
memory.remember("alice lives in city 0", scope="/users/alice", categories=["city"],
                importance=0.5)
empty: list[int] = []
done = threading.Event()


def reader() -> None:
    while not done.is_set():
        if not memory.list_records(scope="/users/alice"):
            empty.append(1)


thread = threading.Thread(target=reader)
thread.start()
for n in range(1, 21):  # 20 moves, one after the other
    memory.remember(f"alice lives in city {n}", scope="/users/alice", categories=["city"],
                    importance=0.5)
done.set()
thread.join()
print(f"reads that found alice with no city during 20 updates: {'some' if empty else 'none'}")
sys.exit(0 if not empty else 1)
