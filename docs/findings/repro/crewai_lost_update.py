"""crewai 1.15 Memory on LanceDB: consolidation replaces a record by deleting it and then
inserting the new one, so a reader in between finds the fact gone."""
import os, sys, tempfile, threading
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", CREWAI_TRACING_ENABLED="false",
                  CREWAI_TESTING="true")
from crewai.llms.base_llm import BaseLLM
from crewai.memory.unified_memory import Memory

class Model(BaseLLM):  # each new city supersedes the old one: delete it, insert the new
    def call(self, messages, *args, **kwargs):
        old = messages[-1]["content"].split("- id=")[1].split(" ")[0]
        return f'{{"actions": [{{"action": "delete", "record_id": "{old}"}}], "insert_new": true}}'

memory = Memory(llm=Model(model="scripted"), embedder=lambda texts: [[1.0, 0.0] for _ in texts],
                storage=tempfile.mkdtemp() + "/lancedb")
memory.remember("alice lives in city 0", scope="/users/alice", categories=["city"], importance=0.5)
empty, done = [], threading.Event()
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
