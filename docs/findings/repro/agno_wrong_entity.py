"""agno MemoryManager: replace_user_memory(alice's memory id, user_id="bob") overwrites alice's
memory with bob's text and leaves bob with nothing: the upsert is keyed on memory_id alone
and keeps the row's user_id.

Run with agno 3.1.x (pip install agno greenlet). Exits 1 while alice's memory is lost.
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
alices = manager.add_user_memory(UserMemory(memory="alice lives in Paris"), user_id="alice")
manager.replace_user_memory(alices, UserMemory(memory="bob lives in Rome"), user_id="bob")

alice = [m.memory for m in manager.get_user_memories(user_id="alice")]
bob = [m.memory for m in manager.get_user_memories(user_id="bob")]
print(f"after bob's replace: alice has {alice}, bob has {bob}")
if alice != ["alice lives in Paris"]:
    print("expected alice's memory untouched (and bob's replace refused, or stored as bob's)")
    sys.exit(1)
