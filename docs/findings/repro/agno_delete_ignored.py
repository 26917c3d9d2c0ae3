"""agno EntityMemoryStore: after forget(entity), the next write brings its old facts back.

Run with agno 3.1.x (pip install agno greenlet). Exits 1 while the forgotten fact returns.
"""

import os
import sys
import tempfile

os.environ["AGNO_TELEMETRY"] = "false"

from agno.db.sqlite import SqliteDb
from agno.learn.config import EntityMemoryConfig
from agno.learn.stores.entity_memory import EntityMemoryStore

folder = tempfile.mkdtemp()
db = SqliteDb(db_file=os.path.join(folder, "agno.db"))
store = EntityMemoryStore(config=EntityMemoryConfig(db=db))
store.remember_about(entity="alice", entity_type="person", facts=["lives in Paris"])
print(store.forget(entity="alice"))
print(store.remember_about(entity="alice", entity_type="person", facts=["works as a nurse"]))

recalled = store.recall(entity_id="alice", entity_type="person")
facts = [f["content"] for e in recalled["entities"] for f in e.live_facts()]
print(f"recalled facts: {facts}")
if "lives in Paris" in facts:
    print("expected only ['works as a nurse']: 'lives in Paris' was forgotten")
    sys.exit(1)
