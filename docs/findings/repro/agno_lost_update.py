"""agno EntityMemoryStore: concurrent remember_about calls all answer "Recorded", yet lose facts.

The synchronous path reads the entity's row, merges, and writes the whole row back with no
lock, so concurrent writers overwrite each other. Run with agno 3.1.x (pip install agno
greenlet). Exits 1 while facts are lost.
"""

import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

os.environ["AGNO_TELEMETRY"] = "false"

from agno.db.sqlite import SqliteDb
from agno.learn.config import EntityMemoryConfig
from agno.learn.stores.entity_memory import EntityMemoryStore

folder = tempfile.mkdtemp()
store = EntityMemoryStore(config=EntityMemoryConfig(db=SqliteDb(db_file=f"{folder}/agno.db")))
store.remember_about(entity="alice", entity_type="person", facts=["fact 0"])


def remember(n: int) -> str:
    return store.remember_about(entity="alice", entity_type="person", facts=[f"fact {n}"])


with ThreadPoolExecutor(4) as pool:
    answers = list(pool.map(remember, range(1, 41)))
recorded = sum("Recorded 1 fact(s)" in a for a in answers)
kept = len(store.get(entity_id="alice", entity_type="person").live_facts())
print(f"{recorded} of 40 calls answered 'Recorded 1 fact(s)'; {kept} of 41 facts kept")
if kept != 41:
    print("expected all 41 facts kept")
    sys.exit(1)
