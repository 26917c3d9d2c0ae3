"""agno MemoryManager keeps two memories under one topic: the older fact is never replaced.

Run with agno 3.1.x (pip install agno greenlet). Exits 1 while both memories are kept.
"""

import os
import sys
import tempfile

os.environ["AGNO_TELEMETRY"] = "false"

from agno.db.schemas.memory import UserMemory
from agno.db.sqlite import SqliteDb
from agno.memory import MemoryManager

folder = tempfile.mkdtemp()
manager = MemoryManager(db=SqliteDb(db_file=os.path.join(folder, "agno.db")))
manager.add_user_memory(UserMemory(memory="lives in Paris", topics=["city"]), user_id="alice")
manager.add_user_memory(UserMemory(memory="lives in Rome", topics=["city"]), user_id="alice")

kept = [m.memory for m in manager.get_user_memories(user_id="alice") if m.topics == ["city"]]
print(f"memories under topic 'city': {kept}")
if len(kept) != 1:
    print("expected one memory for the topic, the newer one: 'lives in Rome'")
    sys.exit(1)
