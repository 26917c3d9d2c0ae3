"""crewai's unified ``Memory``, on embedded LanceDB, behind the contract in
:mod:`invariants.backend`.

Two profiles, usable as specs::

    memcert certify invariants.adapters.crewai:factory          # a record per attribute
    memcert certify invariants.adapters.crewai:scoped_factory   # the entity's scoped memory

Both run offline with no API key: LanceDB in a temporary folder, an embedder callable
(:func:`invariants.adapters.scripted.embedding`) and a consolidation model,
:class:`ScriptedConsolidationLLM`, a ``BaseLLM`` subclass. Before crewai is imported,
its telemetry and tracing are turned off (``CREWAI_DISABLE_TELEMETRY``,
``CREWAI_DISABLE_TRACKING``, ``OTEL_SDK_DISABLED``, ``CREWAI_TRACING_ENABLED=false``)
and ``CREWAI_TESTING=true`` is set: without it every standalone ``remember()`` waits
out the tracing handler's 5 s parent-span timeout. crewai reads all of them when it
acts, not when it is imported.

How the contract maps onto ``Memory``:

- **Scope.** crewai's memories live in a tree of scopes; an entity's is
  ``/<namespace>/<entity_id>``, as an application keeping one branch per user would.
- **write** is one ``remember(content, scope=..., categories=[attribute],
  importance=0.5, metadata={"attribute", "causal_seq", "op_id", "source"})``. The
  content is ``"<entity> | <attribute> | <value>"``, since the consolidation prompt
  shows the model contents and scopes only. The profiles differ in the scope:
  ``factory`` keeps a record per attribute, in ``/<namespace>/<entity_id>/<attribute>``
  (``Memory.remember``); ``scoped_factory`` writes through
  ``Memory.scope("/<namespace>/<entity_id>")``, so every attribute of the entity shares
  one scope. Giving scope, categories and importance spares crewai's field-inference
  call; what remains is crewai's: searching the scope for similar records, asking the
  consolidation model when one is above ``consolidation_threshold``, and applying its
  plan. The write is acknowledged ``applied=True`` when crewai inserted it, and
  ``applied=False, reason="duplicate"`` when consolidation kept an existing record
  instead.
- **delete** is ``Memory.forget(scope="/<namespace>/<entity_id>")``. Nothing is kept,
  so a later write to the entity is stored like any other.
- **restore** raises ``NotImplementedError``: crewai keeps no tombstone.
- **read** is ``Memory.list_records(scope="/<namespace>/<entity_id>")``, in crewai's
  order (newest first), up to :data:`LISTING_LIMIT` records.
- ``Record.version`` is 0: crewai's records carry no version.
- **reset** is ``Memory.reset_all()``.

One ``Memory`` serves every handle of a factory, as one application process would
share it; its saves go through crewai's own one-thread save pool. LanceDB's folder is
this process's, so ``shares_across_processes`` is False.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Final

os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
os.environ["CREWAI_DISABLE_TRACKING"] = "true"
os.environ["OTEL_SDK_DISABLED"] = "true"
os.environ["CREWAI_TRACING_ENABLED"] = "false"
os.environ["CREWAI_TESTING"] = "true"

from crewai.llms.base_llm import BaseLLM  # type: ignore[import-not-found]
from crewai.memory.analyze import ConsolidationPlan  # type: ignore[import-not-found]
from crewai.memory.types import MemoryRecord  # type: ignore[import-not-found]
from crewai.memory.unified_memory import Memory  # type: ignore[import-not-found]

from invariants.adapters.scripted import SEPARATOR, embedding, fact, slot
from invariants.backend import Ack, Delete, Record, Restore, Write

__all__ = [
    "IMPORTANCE",
    "LISTING_LIMIT",
    "CrewaiBackend",
    "CrewaiFactory",
    "ScriptedConsolidationLLM",
    "embed",
    "factory",
    "scoped_factory",
]

IMPORTANCE: Final = 0.5
"""crewai's default importance, given so that no inference call is needed."""
LISTING_LIMIT: Final = 10_000
"""``list_records`` returns 200 records unless told otherwise; an entity holds far
fewer than this."""

_NEW = re.compile(r"New content to consider storing:\n(?P<new>.*?)\n\nExisting similar", re.S)
_RECORD = re.compile(r"^- id=(?P<id>\S+) \| scope=.*?\n  content: (?P<content>.*)$", re.M)


def embed(texts: list[str]) -> list[list[float]]:
    """The embedder callable crewai is given: one slot's facts close together."""
    return [embedding(text) for text in texts]


class ScriptedConsolidationLLM(BaseLLM):  # type: ignore[misc]
    """A consolidation model that answers crewai's prompt as a perfect model would.

    crewai shows it the new content and the similar existing records, and asks for a
    plan: per record keep, update or delete, and whether to insert the new content. A
    record of the same entity and attribute that states the same fact makes the new
    content redundant (keep it, insert nothing); one that states another fact is
    superseded (delete it, insert the new one); records of other slots are kept.
    "Same attribute" and "same fact" are memcert's lexical canonical forms
    (:mod:`invariants.adapters.scripted`). Which records it is shown, and what is done
    with its plan, is crewai's. Any other prompt raises, so nothing is guessed.
    """

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None,
             available_functions: Any = None, from_task: Any = None, from_agent: Any = None,
             response_model: Any = None) -> str:
        prompt = messages if isinstance(messages, str) else str(messages[-1]["content"])
        found = _NEW.search(prompt)
        if found is None:
            raise RuntimeError("ScriptedConsolidationLLM answers crewai's consolidation "
                               "prompt only")
        new = slot(found.group("new"))
        actions, insert = [], True
        for record in _RECORD.finditer(prompt):
            old = slot(record.group("content"))
            if new is None or old is None or old[:2] != new[:2]:
                actions.append({"action": "keep", "record_id": record.group("id")})
            elif old.value == new.value:
                actions.append({"action": "keep", "record_id": record.group("id")})
                insert = False
            else:
                actions.append({"action": "delete", "record_id": record.group("id")})
        plan: str = ConsolidationPlan.model_validate(
            {"actions": actions, "insert_new": insert}).model_dump_json()
        return plan

    def supports_function_calling(self) -> bool:
        return False


def entity_scope(namespace: str, entity_id: str) -> str:
    return f"/{namespace}/{entity_id}"


class CrewaiBackend:
    """A handle onto one crewai ``Memory``; see the module docstring for the mapping."""

    def __init__(self, memory: Memory, *, scoped: bool) -> None:
        self.memory = memory
        self.scoped = scoped

    def __repr__(self) -> str:
        return f"CrewaiBackend(scoped={self.scoped})"

    def write(self, op: Write) -> Ack:
        content = fact(op.entity_id, op.attribute, op.value)
        metadata = {"attribute": op.attribute, "causal_seq": op.causal_seq,
                    "op_id": op.op_id, "source": op.source or ""}
        where = entity_scope(op.namespace, op.entity_id)
        if self.scoped:
            record = self.memory.scope(where).remember(
                content, categories=[op.attribute], importance=IMPORTANCE, metadata=metadata)
        else:
            record = self.memory.remember(
                content, scope=f"{where}/{op.attribute}", categories=[op.attribute],
                importance=IMPORTANCE, metadata=metadata)
        if record is None:
            raise RuntimeError("crewai's Memory is read-only and stored nothing")
        if record.metadata.get("op_id") != op.op_id:
            return Ack(False, reason="duplicate")
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        self.memory.forget(scope=entity_scope(op.namespace, op.entity_id))
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(
            "crewai forgets memories outright and keeps no tombstone, so there is nothing "
            "to restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        listed = self.memory.list_records(scope=entity_scope(namespace, entity_id),
                                          limit=LISTING_LIMIT)
        return [_record(item) for item in listed]

    def reset(self) -> None:
        self.memory.reset_all()

    def close(self) -> None:
        """Nothing to release per handle: the ``Memory`` belongs to the factory."""


def _record(item: MemoryRecord) -> Record:
    """A record as crewai serves it: its content is the fact, whose entity and
    attribute prefix come off to give the value."""
    entity, _attribute, value = item.content.split(SEPARATOR, 2)
    return Record(entity, item.metadata["attribute"], value,
                  int(item.metadata["causal_seq"]), 0)


class CrewaiFactory:
    """A backend factory: every call returns a handle onto one ``Memory`` over one
    LanceDB folder, made on the first call in a temporary folder of its own."""

    shares_across_processes = False

    def __init__(self, *, scoped: bool, folder: str | os.PathLike[str] | None = None) -> None:
        self.scoped = scoped
        self._folder = None if folder is None else Path(folder)
        self._lock = threading.Lock()
        self._memory: Memory | None = None

    def __repr__(self) -> str:
        return f"CrewaiFactory(scoped={self.scoped})"

    def __call__(self) -> CrewaiBackend:
        with self._lock:
            if self._memory is None:
                if self._folder is None:
                    self._folder = Path(tempfile.mkdtemp(prefix="memcert-crewai-"))
                self._memory = Memory(llm=ScriptedConsolidationLLM(model="memcert-scripted"),
                                      embedder=embed,
                                      storage=str(self._folder / "lancedb"))
            return CrewaiBackend(self._memory, scoped=self.scoped)


factory = CrewaiFactory(scoped=False)
scoped_factory = CrewaiFactory(scoped=True)
