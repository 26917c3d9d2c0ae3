"""LangMem's memory tools, over a LangGraph store, behind the contract in :mod:`invariants.backend`.

::

    memcert certify invariants.adapters.langmem:factory

LangMem gives an agent two tools over a LangGraph ``BaseStore``: ``manage_memory``
(create, update or delete one memory by its id) and ``search_memory`` (list or search
the memories of a namespace). An agent's model decides which to call; here the adapter
makes those calls, with the tools' own code doing the work, so no chat model and no
network are needed. (LangMem's memory *managers*, ``create_memory_manager`` and
``create_memory_store_manager``, do need a chat model: they are not what this adapter
certifies.)

How the contract maps onto the tools:

- **Keys.** An entity is the tools' namespace template ``("memcert", "{namespace}",
  "{entity}")``, filled from the run's ``configurable`` values, with labels encoded as in
  :func:`invariants.adapters.langgraph.entity_namespace`. A memory's content is a
  structured schema (:class:`Memory`), as LangMem allows: the contract's attribute,
  value, ``causal_seq`` and ``op_id`` stored as data. The memory id is LangMem's own
  (a random UUID made on create).
- **write** does what an agent with perfect recall does: it lists the entity's memories
  with ``search_memory``, and if one has exactly the write's attribute (compared
  verbatim, the first one listed if several), calls ``manage_memory`` with
  ``action="update"`` and that id; otherwise ``action="create"``. The tools have no
  conditional update, so the list and the update are two calls, and two agents writing
  at once can both create. Every call that returns is acknowledged ``applied=True``:
  the tools refuse nothing, whatever the ``causal_seq``.
- **delete** lists the entity's memories and calls ``manage_memory`` with
  ``action="delete"`` on each. Nothing remembers the delete.
- **restore** raises ``NotImplementedError``: the tools have no restore.
- **read** is one ``search_memory`` call with an empty query and a limit of
  :data:`~invariants.adapters.langgraph.LISTING_LIMIT` (the tool's default is 10), and the
  records are parsed from the JSON text the tool returns: what the agent is served, in
  the order it is served. ``Record.version`` is 0: memories carry no version.
- **read, with search** (:func:`search`): the store has a vector index, embedded by the
  embedder :func:`search` is given, with LangGraph's default fields (the whole memory),
  as LangMem's own examples set one up, and a read is that listing and then a second
  ``search_memory`` call whose query is
  :func:`~invariants.adapters.langgraph.search_query`, with the same limit, so every
  memory the index reaches is served whatever the wording. The records are the
  listing's, then each memory only the search returned; one both return with the same
  content is one record. Two tool calls, as an agent makes them: nothing holds the
  store still between them.
- **reset** empties the store through the LangGraph adapter.

The store is an ``InMemoryStore`` shared by every handle of the process, as in
LangMem's own examples; :func:`over` builds a factory over any LangGraph store factory.
With the ``semantic`` extra, :mod:`memcert.adapters` has the search profile over
all-MiniLM-L6-v2 as a spec::

    memcert certify memcert.adapters:langmem_search   # with the index
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.store.memory import InMemoryStore
from langmem import (  # type: ignore[import-untyped]
    create_manage_memory_tool,
    create_search_memory_tool,
)
from pydantic import BaseModel

from invariants.backend import Ack, Delete, Record, Restore, Write

from .langgraph import (
    EMBEDDING_DIMS,
    LISTING_LIMIT,
    ROOT,
    Embed,
    LangGraphBackend,
    StoreFactory,
    entity_namespace,
    search_query,
    vector_index,
)
from .langgraph import inmemory as _inmemory

__all__ = ["LangMemBackend", "LangMemFactory", "Memory", "factory", "over", "search"]

NAMESPACE_TEMPLATE = (ROOT, "{memcert_namespace}", "{memcert_entity}")


class Memory(BaseModel):
    """The content of one memory: the ``schema`` the manage-memory tool is made with."""

    attribute: str
    value: str
    causal_seq: int
    op_id: str


class LangMemBackend:
    """A handle that drives LangMem's two tools (``manage_tool``, ``search_tool``) over
    the LangGraph ``store`` of one handle from :mod:`.langgraph`; with ``search``, reads
    also query the store's index through the search tool."""

    def __init__(self, handle: LangGraphBackend, *, search: bool = False) -> None:
        self._handle = handle
        self.search = search
        self.store = handle.store
        self.manage_tool: BaseTool = create_manage_memory_tool(
            NAMESPACE_TEMPLATE, schema=Memory, store=self.store)
        self.search_tool: BaseTool = create_search_memory_tool(NAMESPACE_TEMPLATE,
                                                               store=self.store)

    def __repr__(self) -> str:
        return f"LangMemBackend({type(self.store).__name__})"

    def write(self, op: Write) -> Ack:
        config = _config(op.namespace, op.entity_id)
        content = Memory(attribute=op.attribute, value=op.value, causal_seq=op.causal_seq,
                         op_id=op.op_id).model_dump()
        same = next((m for m in self._memories(config)
                     if m["value"]["content"]["attribute"] == op.attribute), None)
        if same is None:
            self.manage_tool.invoke({"action": "create", "content": content}, config=config)
        else:
            self.manage_tool.invoke({"action": "update", "id": same["key"], "content": content},
                                config=config)
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        config = _config(op.namespace, op.entity_id)
        for memory in self._memories(config):
            self.manage_tool.invoke({"action": "delete", "id": memory["key"]}, config=config)
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError("LangMem's manage_memory tool deletes memories outright "
                                  "and has no restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        config = _config(namespace, entity_id)
        served = self._memories(config)
        if self.search:
            seen = [(m["key"], m["value"]) for m in served]
            served += [m for m in self._memories(config, search_query(entity_id))
                       if (m["key"], m["value"]) not in seen]
        records = []
        for memory in served:
            content = memory["value"]["content"]
            records.append(Record(entity_id, content["attribute"], content["value"],
                                  content["causal_seq"], 0))
        return records

    def reset(self) -> None:
        self._handle.reset()

    def close(self) -> None:
        self._handle.close()

    def _memories(self, config: RunnableConfig, query: str = "") -> list[dict[str, Any]]:
        text = self.search_tool.invoke({"query": query, "limit": LISTING_LIMIT}, config=config)
        memories: list[dict[str, Any]] = json.loads(text)
        return memories


class LangMemFactory:
    """A backend factory: each call returns LangMem's tools over a new store handle."""

    def __init__(self, stores: StoreFactory, *, search: bool = False) -> None:
        self.stores = stores
        self.search = search

    def __repr__(self) -> str:
        return f"LangMemFactory({self.stores!r})"

    @property
    def shares_across_processes(self) -> bool:
        return self.stores.shares_across_processes

    def __call__(self) -> LangMemBackend:
        return LangMemBackend(self.stores(), search=self.search)


def over(stores: StoreFactory, *, search: bool = False) -> LangMemFactory:
    """LangMem's tools over the stores of any factory from :mod:`.langgraph`; ``search``
    reads through the store's index too, which the store must have."""
    return LangMemFactory(stores, search=search)


def _config(namespace: str, entity_id: str) -> RunnableConfig:
    _, ns_label, entity_label = entity_namespace(namespace, entity_id)
    return {"configurable": {"memcert_namespace": ns_label, "memcert_entity": entity_label}}


factory = over(_inmemory())
"""LangMem's tools over one ``InMemoryStore`` of this process."""

def search(embed: Embed, *, dims: int = EMBEDDING_DIMS) -> LangMemFactory:
    """The same tools over one ``InMemoryStore`` with a vector index over whole memories,
    embedded by ``embed``, read through it too."""
    return over(
        StoreFactory("InMemoryStore with a vector index over whole memories",
                     lambda: nullcontext(InMemoryStore(index=vector_index(embed, [], dims=dims))),
                     shared=True, shares_across_processes=False),
        search=True)
