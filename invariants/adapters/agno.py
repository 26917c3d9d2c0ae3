"""agno's memory behind the contract in :mod:`invariants.backend`, on a ``SqliteDb`` file.

Two profiles, the two ways agno keeps facts about someone, usable as specs::

    memcert certify invariants.adapters.agno:factory          # user memories, MemoryManager
    memcert certify invariants.adapters.agno:entity_factory   # EntityMemoryStore

Both run offline with no API key. ``MemoryManager``'s direct methods call no model.
``EntityMemoryStore`` calls one for its fact-supersession judge, which decides which
live facts a new fact retires; :class:`ScriptedJudge` stands in for it, deciding as a
perfect model would. ``AGNO_TELEMETRY=false`` is set before agno is imported.

**User memories** (:class:`AgnoMemoryBackend`), through ``MemoryManager``:

- **Scope.** The manager scopes memories by ``user_id`` alone: it records an
  ``agent_id`` but neither reads nor clears by it. So the user id is
  ``namespace/entity``, as an application serving several tenants from one database
  would name its users.
- **write** is ``add_user_memory(UserMemory(memory=value, topics=[attribute],
  input=...), user_id=...)``: the value is the memory's text, the attribute its one
  topic, and ``input`` (the text a memory came from) carries the write's
  ``causal_seq`` and ``op_id`` as JSON. agno looks at none of them: every call is a new
  memory. Acknowledged ``applied=True`` when agno returns the new memory's id.
- **delete** is ``clear_user_memories(user_id=...)``: agno lists the user's memories and
  deletes them by id in one statement. Nothing is kept.
- **read** is ``get_user_memories(user_id=...)``, in agno's order.

**Entity memory** (:class:`AgnoEntityBackend`), through ``EntityMemoryStore``:

- **Scope.** The namespace is agno's ``namespace`` (the sharing boundary of the store)
  and the entity is an entity of type :data:`ENTITY_TYPE` named by its id.
- **write** is ``remember_about(entity, ENTITY_TYPE, facts=[fact], namespace=...)``, with
  one fact per write. A fact is a sentence, with no fields, so the fact's text is the
  write's attribute, value and ``causal_seq`` as JSON; agno compares facts by their text
  folded for case and whitespace, so a repeated write (one ``op_id``, one
  ``causal_seq``) is a repeated fact. agno answers in prose: "Recorded 1 fact(s)" and
  "Skipped 1 already-recorded fact(s)" both say the fact is stored, so both are
  ``applied=True`` (a retry gets its first outcome); anything else raises, so the
  outcome counts as unknown.
- **delete** is ``forget(entity, namespace=...)``, which archives the entity: agno's
  only way to forget one.
- **the judge** is :class:`ScriptedJudge`, given as ``EntityMemoryConfig.model``: agno
  calls it inside ``remember_about``, between reading the entity's row and writing it
  back, and retires the facts it names.
- **read** is agno's ``recall``, what agno puts in an agent's context, which leaves
  archived entities out: ``recall(namespace=...)`` lists the namespace's entities (up to
  :data:`LISTING_LIMIT`, set as ``max_entities_in_directory``), and each one listed under
  the entity's name is recalled by its key, ``recall(entity_id, entity_type,
  namespace=...)``. agno keys an entity by a slug of the first name it was given
  (``user-1`` is ``user_1``, and so is ``user 1``), so the listing's name is how the
  entity is found again. Each live fact is a record.

Neither has a restore (``NotImplementedError``); agno keeps no tombstone that refuses a
write. ``Record.version`` is 0: neither numbers versions. One ``SqliteDb`` serves every
handle of a factory, called from memcert's worker threads at once; nothing here
serializes them.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ["AGNO_TELEMETRY"] = "false"

from agno.db.schemas.memory import UserMemory
from agno.db.sqlite import SqliteDb
from agno.learn.config import EntityMemoryConfig
from agno.learn.stores.entity_memory import EntityMemoryStore
from agno.memory import MemoryManager
from agno.models.base import Model
from agno.models.response import ModelResponse

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.normalize import Normalizer

__all__ = [
    "ENTITY_TYPE",
    "LISTING_LIMIT",
    "AgnoEntityBackend",
    "AgnoFactory",
    "AgnoMemoryBackend",
    "ScriptedJudge",
    "entity_factory",
    "factory",
    "superseded",
]

ENTITY_TYPE = "person"
"""The type every certified entity is recorded under; agno keys entities by id and type."""

LISTING_LIMIT = 10_000
"""agno lists 50 entities of a namespace unless told otherwise; a namespace holds fewer
than this."""

NO_RESTORE = ("agno forgets by deleting (user memories) or archiving (entities) and keeps "
              "no tombstone, so there is nothing to restore")


_LIVE_FACT = re.compile(r"^- \[(?P<id>[^\]]+)\] (?P<fact>\{.*\})(?: \(as of [^)]*\))?$")
_NEW_FACT = re.compile(r"^- (?P<fact>\{.*\})$")
_NEW_FACTS = "\n\nNewly stated facts:\n"


@dataclass
class ScriptedJudge(Model):
    """The model of ``EntityMemoryStore``'s fact-supersession judge, answering from a
    fixed script, as a perfect model would.

    agno (3.1) asks the judge one thing when a write brings facts to an entity that
    has live ones: the entity's live facts, each with its id, and the new facts; it
    offers one tool, ``mark_superseded(fact_ids, confidences)``. The script calls it
    with every live fact about the same attribute as a new fact and older than it
    (lower ``causal_seq``), with confidence 1: an update retires what it updates,
    whatever the wording, and never a newer fact. Attributes are the same when
    memcert's lexical normalizer gives them one slot (``city`` / ``City`` / 常住城市),
    as a model that reads them would judge. Everything else is agno's: when it asks,
    what it does with the answer, and what happens to the row around the call.
    """

    id: str = "memcert-scripted-judge"
    provider: str | None = "memcert"

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        messages = kwargs.get("messages", args[0] if args else [])
        if not messages or messages[-1].role == "tool":
            return ModelResponse(role="assistant", content="Done.")
        ids = superseded(str(messages[-1].content))
        call = {"id": "memcert-judgement", "type": "function", "function": {
            "name": "mark_superseded",
            "arguments": json.dumps({"fact_ids": ids, "confidences": [1.0] * len(ids)})}}
        return ModelResponse(role="assistant", tool_calls=[call])

    async def ainvoke(self, *args: Any, **kwargs: Any) -> Any:
        return self.invoke(*args, **kwargs)

    def invoke_stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        yield self.invoke(*args, **kwargs)

    async def ainvoke_stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        yield self.invoke(*args, **kwargs)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> Any:
        return response

    def _parse_provider_response_delta(self, response: Any) -> Any:
        return response


_SLOTS = Normalizer("lexical")


def superseded(prompt: str) -> list[str]:
    """The ids of the live facts that the judge's prompt's new facts supersede."""
    live, _, new = prompt.partition(_NEW_FACTS)
    olds = [(m["id"], json.loads(m["fact"])) for line in live.splitlines()
            if (m := _LIVE_FACT.match(line))]
    news = [json.loads(m["fact"]) for line in new.splitlines() if (m := _NEW_FACT.match(line))]
    return [fact_id for fact_id, old in olds
            if any(_SLOTS.attribute_key(old["attribute"]) == _SLOTS.attribute_key(n["attribute"])
                   and old["causal_seq"] < n["causal_seq"] for n in news)]


def _user_id(namespace: str, entity_id: str) -> str:
    return f"{namespace}/{entity_id}"


class AgnoMemoryBackend:
    """A handle onto one ``MemoryManager``; see the module docstring for the mapping."""

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    def __repr__(self) -> str:
        return "AgnoMemoryBackend()"

    def write(self, op: Write) -> Ack:
        memory = UserMemory(memory=op.value, topics=[op.attribute], input=json.dumps(
            {"causal_seq": op.causal_seq, "op_id": op.op_id, "source": op.source}))
        if self.manager.add_user_memory(memory, user_id=_user_id(op.namespace, op.entity_id)):
            return Ack(True)
        raise RuntimeError("agno's add_user_memory returned no memory id")

    def delete(self, op: Delete) -> Ack:
        self.manager.clear_user_memories(user_id=_user_id(op.namespace, op.entity_id))
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(NO_RESTORE)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        memories = self.manager.get_user_memories(user_id=_user_id(namespace, entity_id)) or []
        return [_memory_record(entity_id, m) for m in memories]

    def reset(self) -> None:
        self.manager.clear()

    def close(self) -> None:
        """Nothing to release per handle: the database belongs to the factory."""


def _memory_record(entity_id: str, memory: UserMemory) -> Record:
    written = json.loads(memory.input or "{}")
    attribute = memory.topics[0] if memory.topics else ""
    return Record(entity_id, attribute, memory.memory, written["causal_seq"], 0)


class AgnoEntityBackend:
    """A handle onto one ``EntityMemoryStore``; see the module docstring for the mapping."""

    def __init__(self, store: EntityMemoryStore) -> None:
        self.store = store

    def __repr__(self) -> str:
        return "AgnoEntityBackend()"

    def write(self, op: Write) -> Ack:
        fact = json.dumps({"attribute": op.attribute, "value": op.value,
                           "causal_seq": op.causal_seq}, ensure_ascii=False)
        answer = self.store.remember_about(entity=op.entity_id, entity_type=ENTITY_TYPE,
                                           facts=[fact], namespace=op.namespace)
        if "Recorded 1 fact(s)" in answer or "Skipped 1 already-recorded fact(s)" in answer:
            return Ack(True)
        raise RuntimeError(f"agno answered remember_about with {answer!r}")

    def delete(self, op: Delete) -> Ack:
        answer = self.store.forget(entity=op.entity_id, namespace=op.namespace)
        if answer.startswith("Archived ") or answer.endswith(" is already archived."):
            return Ack(True)
        if answer.startswith("No entity"):
            return Ack(False, reason="not_found")
        raise RuntimeError(f"agno answered forget with {answer!r}")

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(NO_RESTORE)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        records: list[Record] = []
        for listed in self._recall(namespace)["directory"]:
            if (listed.name, listed.entity_type) != (entity_id, ENTITY_TYPE):
                continue
            recalled = self._recall(namespace, entity_id=listed.entity_id)
            records += [_fact_record(entity_id, fact) for entity in recalled["entities"]
                        for fact in entity.live_facts()]
        return records

    def _recall(self, namespace: str, **keyed: str) -> dict[str, Any]:
        recalled: dict[str, Any] | None = self.store.recall(
            namespace=namespace, **({"entity_type": ENTITY_TYPE} | keyed if keyed else {}))
        if recalled is None:
            raise RuntimeError(f"agno could not read namespace {namespace!r}")
        return recalled

    def reset(self) -> None:
        db = self.store.db
        for row in db.get_learnings(learning_type=self.store.learning_type):
            db.delete_learning(id=row["learning_id"])

    def close(self) -> None:
        """Nothing to release per handle: the database belongs to the factory."""


def _fact_record(entity_id: str, fact: dict[str, Any]) -> Record:
    written = json.loads(fact["content"])
    return Record(entity_id, written["attribute"], written["value"], written["causal_seq"], 0)


class AgnoFactory:
    """A backend factory: every call returns a handle onto one ``SqliteDb``, made on the
    first call, in a temporary folder of its own."""

    shares_across_processes = False

    def __init__(self, *, entities: bool, folder: str | os.PathLike[str] | None = None) -> None:
        self.entities = entities
        self._folder = None if folder is None else Path(folder)
        self._lock = threading.Lock()
        self._db: SqliteDb | None = None

    def __repr__(self) -> str:
        return f"AgnoFactory(entities={self.entities})"

    def __call__(self) -> AgnoMemoryBackend | AgnoEntityBackend:
        with self._lock:
            if self._db is None:
                if self._folder is None:
                    self._folder = Path(tempfile.mkdtemp(prefix="memcert-agno-"))
                self._db = SqliteDb(db_file=str(self._folder / "agno.db"))
            if self.entities:
                return AgnoEntityBackend(EntityMemoryStore(config=EntityMemoryConfig(
                    db=self._db, model=ScriptedJudge(),
                    max_entities_in_directory=LISTING_LIMIT)))
            return AgnoMemoryBackend(MemoryManager(db=self._db))


factory = AgnoFactory(entities=False)
entity_factory = AgnoFactory(entities=True)
