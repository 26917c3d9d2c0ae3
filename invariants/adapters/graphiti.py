"""graphiti-core's temporal knowledge graph, on embedded Kuzu, behind the contract in
:mod:`invariants.backend`.

Two profiles, usable as specs::

    memcert certify invariants.adapters.graphiti:factory          # read: list the edges
    memcert certify invariants.adapters.graphiti:search_factory   # read: Graphiti.search()

Both run offline with no API key: an embedded Kuzu database in a temporary folder, and
the three model clients graphiti requires, scripted: :class:`ScriptedLLMClient`,
:class:`HashEmbedder` and :class:`OverlapCrossEncoder`. ``GRAPHITI_TELEMETRY_ENABLED``
is set to ``false`` before graphiti is imported. graphiti imports ``httpx`` without
declaring it (the ``graphiti`` extra does), and its Kuzu driver never creates the
full-text indexes its hybrid search needs: the factory creates them with graphiti's own
index statements.

How the contract maps onto graphiti:

- **Scope.** The namespace is graphiti's ``group_id``. The entity is an ``EntityNode``
  named ``entity_id``, whose uuid is derived from (namespace, entity_id), so every write
  of one entity finds the same node, as an application that keys its users would.
- **write** is one ``Graphiti.add_triplet(entity, edge, value_node)``: the edge's
  ``name`` is the attribute, its ``fact`` is ``"<entity> | <attribute> | <value>"``
  (graphiti's dedup and contradiction prompts see facts only, so the fact names its
  subject and relation, as graphiti's own facts do), its ``valid_at`` is ``causal_seq``
  seconds after the epoch, its uuid derives from ``op_id``, and ``causal_seq``,
  ``op_id`` and ``source`` are edge attributes. The value node is an ``EntityNode``
  named by the value. Everything after that is graphiti's: searching for duplicate and
  contradicted edges, asking the model, and invalidating the edge whose ``valid_at`` is
  older. The write is acknowledged ``applied=True`` when the edge graphiti keeps is the
  write's own and current, ``applied=False, reason="duplicate"`` when graphiti merged it
  into an existing edge, and ``applied=False, reason="invalidated"`` when graphiti
  stored it already invalid (a newer fact held the slot).
- **delete** is ``EntityNode.delete``, graphiti's way to remove an entity: on Kuzu it
  deletes the node and its edges. Nothing is kept, so a later write recreates it.
- **restore** raises ``NotImplementedError``: graphiti keeps no tombstone.
- **read**, by profile: ``EntityEdge.get_by_node_uuid`` serving the entity's edges that
  graphiti holds as current (``invalid_at`` and ``expired_at`` unset), as an agent that
  reads graphiti's own validity does; or ``Graphiti.search(entity_id, group_ids=[ns],
  search_filter=SearchFilters(edge_source_node_uuids=[entity]))``, graphiti's default
  hybrid search, serving what it returns. Records come in the order graphiti returns.
- ``Record.version`` is 0: graphiti's edges carry no version.
- **reset** is graphiti's ``clear_data``.

One ``Graphiti`` serves every handle of a factory, on one event loop in a thread of its
own, as one asynchronous application would run it: memcert's worker threads submit
their calls to that loop, where graphiti's coroutines interleave; nothing here
serializes them. Kuzu allows one ``Database`` per folder and process, so
``shares_across_processes`` is False.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, TypeVar

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

from graphiti_core import Graphiti  # type: ignore[import-not-found]
from graphiti_core.cross_encoder.client import (  # type: ignore[import-not-found]
    CrossEncoderClient,
)
from graphiti_core.driver.driver import GraphProvider  # type: ignore[import-not-found]
from graphiti_core.driver.kuzu_driver import KuzuDriver  # type: ignore[import-not-found]
from graphiti_core.edges import EntityEdge  # type: ignore[import-not-found]
from graphiti_core.embedder.client import EmbedderClient  # type: ignore[import-not-found]
from graphiti_core.graph_queries import get_fulltext_indices  # type: ignore[import-not-found]
from graphiti_core.llm_client.client import LLMClient  # type: ignore[import-not-found]
from graphiti_core.nodes import EntityNode  # type: ignore[import-not-found]
from graphiti_core.prompts.models import Message  # type: ignore[import-not-found]
from graphiti_core.search.search_filters import SearchFilters  # type: ignore[import-not-found]
from graphiti_core.telemetry import telemetry  # type: ignore[import-not-found]
from graphiti_core.utils.maintenance.graph_data_operations import (  # type: ignore[import-not-found]
    clear_data,
)
from pydantic import BaseModel

from invariants.adapters.scripted import embedding, fact, same_name, slot
from invariants.backend import Ack, Delete, Record, Restore, Write

__all__ = [
    "EPOCH",
    "LISTING_LIMIT",
    "GraphitiBackend",
    "GraphitiFactory",
    "HashEmbedder",
    "OverlapCrossEncoder",
    "ScriptedLLMClient",
    "factory",
    "search_factory",
]

if telemetry.is_telemetry_enabled():
    raise ImportError(
        "graphiti was imported with telemetry on before invariants.adapters.graphiti could "
        "turn it off. Set GRAPHITI_TELEMETRY_ENABLED=false in the environment, or import "
        "this adapter before graphiti_core.")

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""``valid_at`` of a write is ``causal_seq`` seconds after this."""
LISTING_LIMIT: Final = 10_000
"""``search`` returns 10 edges unless told otherwise; an entity holds far fewer."""
_KEYS = uuid.UUID("6f0e4c62-5a5b-4c1e-9d7e-3f8f1d2b7a10")
_TAGGED = re.compile(r"<(?P<tag>[A-Z ]+)>\n(?P<body>.*?)\n</(?P=tag)>", re.S)
_T = TypeVar("_T")


class ScriptedLLMClient(LLMClient):  # type: ignore[misc]
    """An LLM client that answers graphiti's prompts as a perfect model would.

    ``add_triplet`` asks two things. Which existing entities a new node duplicates
    (``NodeResolutions``): the one whose name states the same thing, if any (a value
    node named by a paraphrase of another's value is that node). Which existing facts the
    new fact duplicates or contradicts (``EdgeDuplicate``): a fact of the same subject
    and relation is a duplicate when its value states the same fact, and contradicted
    when it states another (an update of the slot). "Same relation" and "same fact" are
    decided by :mod:`invariants.adapters.scripted`, so aliases and paraphrases are
    recognised as a perfect model would; a negation is a different fact. Everything
    else (which candidates to show the model, what to do with its answer, which edge to
    invalidate) is graphiti's. Any other prompt raises, so an unscripted question is never guessed.
    """

    def __init__(self) -> None:
        super().__init__(None)

    async def _generate_response(self, messages: list[Message],
                                 response_model: type[BaseModel] | None = None,
                                 max_tokens: int = 0, model_size: Any = None,
                                 **kwargs: Any) -> dict[str, Any]:
        name = response_model.__name__ if response_model is not None else ""
        sections = {m["tag"]: m["body"] for m in _TAGGED.finditer(messages[-1].content)}
        if name == "EdgeDuplicate":
            return self._edges(sections)
        if name == "NodeResolutions":
            return self._nodes(sections)
        raise RuntimeError(f"ScriptedLLMClient has no answer for a {name or 'free'} prompt")

    def _edges(self, sections: dict[str, str]) -> dict[str, Any]:
        new = slot(sections["NEW FACT"])
        existing = ast.literal_eval(sections["EXISTING FACTS"])
        candidates = ast.literal_eval(sections["FACT INVALIDATION CANDIDATES"])
        duplicates, contradicted = [], []
        for item in [*existing, *candidates]:
            old = slot(item["fact"])
            if new is None or old is None or old[:2] != new[:2]:
                continue
            if old[2] == new[2]:
                if item in existing:
                    duplicates.append(item["idx"])
            else:
                contradicted.append(item["idx"])
        return {"duplicate_facts": duplicates, "contradicted_facts": contradicted}

    def _nodes(self, sections: dict[str, str]) -> dict[str, Any]:
        existing = json.loads(sections["EXISTING ENTITIES"])
        return {"entity_resolutions": [
            {"id": node["id"], "name": node["name"], "duplicate_candidate_id": next(
                (old["candidate_id"] for old in existing if same_name(old["name"], node["name"])),
                -1)}
            for node in json.loads(sections["ENTITIES"])]}


class HashEmbedder(EmbedderClient):  # type: ignore[misc]
    """:func:`invariants.adapters.scripted.embedding`: deterministic and offline, and as
    good as a perfect model at what graphiti's candidate search asks of it, putting one
    slot's facts together and paraphrases on one point."""

    async def create(self, input_data: Any) -> list[float]:
        text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
        return embedding(text)

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [embedding(text) for text in input_data_list]


class OverlapCrossEncoder(CrossEncoderClient):  # type: ignore[misc]
    """A reranker scoring each passage by its hashed-word cosine with the query."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        q = embedding(query)
        scored = [(p, sum(a * b for a, b in zip(q, embedding(p), strict=True)))
                  for p in passages]
        return sorted(scored, key=lambda pair: pair[1], reverse=True)


def entity_uuid(namespace: str, entity_id: str) -> str:
    """The entity node's uuid: one node per (namespace, entity_id)."""
    return str(uuid.uuid5(_KEYS, f"entity\x00{namespace}\x00{entity_id}"))


class GraphitiBackend:
    """A handle onto one ``Graphiti``; see the module docstring for the mapping."""

    def __init__(self, owner: GraphitiFactory) -> None:
        self.owner = owner
        self.graphiti = owner.graphiti
        self.search = owner.search

    def __repr__(self) -> str:
        return f"GraphitiBackend(search={self.search})"

    def write(self, op: Write) -> Ack:
        source = EntityNode(uuid=entity_uuid(op.namespace, op.entity_id), name=op.entity_id,
                            group_id=op.namespace, labels=["Entity"])
        target = EntityNode(
            uuid=str(uuid.uuid5(_KEYS, f"value\x00{op.namespace}\x00{op.value}")),
            name=op.value, group_id=op.namespace, labels=["Entity"])
        mine = str(uuid.uuid5(_KEYS, f"edge\x00{op.op_id}"))
        edge = EntityEdge(
            uuid=mine, group_id=op.namespace, source_node_uuid=source.uuid,
            target_node_uuid=target.uuid, name=op.attribute,
            fact=fact(op.entity_id, op.attribute, op.value),
            valid_at=EPOCH + timedelta(seconds=op.causal_seq), created_at=datetime.now(UTC),
            attributes={"causal_seq": op.causal_seq, "op_id": op.op_id,
                        "source": op.source or ""})
        kept = self.owner.run(self.graphiti.add_triplet(source, edge, target)).edges[0]
        # add_triplet gives the edge a fresh uuid when the op_id's is another pair's.
        if kept.uuid != edge.uuid:
            return Ack(False, reason="duplicate")
        if kept.invalid_at is not None or kept.expired_at is not None:
            return Ack(False, reason="invalidated")
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        node = EntityNode(uuid=entity_uuid(op.namespace, op.entity_id), name=op.entity_id,
                          group_id=op.namespace, labels=["Entity"])
        self.owner.run(node.delete(self.graphiti.driver))
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(
            "graphiti deletes an entity's node and edges outright and keeps no tombstone, "
            "so there is nothing to restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        node = entity_uuid(namespace, entity_id)
        if self.search:
            edges = self.owner.run(self.graphiti.search(
                entity_id, group_ids=[namespace], num_results=LISTING_LIMIT,
                search_filter=SearchFilters(edge_source_node_uuids=[node])))
        else:
            listed = self.owner.run(EntityEdge.get_by_node_uuid(self.graphiti.driver, node))
            edges = [e for e in listed if e.source_node_uuid == node
                     and e.invalid_at is None and e.expired_at is None]
        return [_record(entity_id, edge) for edge in edges]

    def reset(self) -> None:
        self.owner.run(clear_data(self.graphiti.driver))

    def close(self) -> None:
        """Nothing to release per handle: the ``Graphiti`` belongs to the factory."""


def _record(entity_id: str, edge: EntityEdge) -> Record:
    prefix = fact(entity_id, edge.name, "")
    value = edge.fact.removeprefix(prefix)
    return Record(entity_id, edge.name, value, int(edge.attributes["causal_seq"]), 0)


class GraphitiFactory:
    """A backend factory: every call returns a handle onto one ``Graphiti`` over one
    Kuzu database, made on the first call in a temporary folder of its own."""

    shares_across_processes = False

    def __init__(self, *, search: bool, folder: str | os.PathLike[str] | None = None) -> None:
        self.search = search
        self._folder = None if folder is None else Path(folder)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._graphiti: Graphiti | None = None

    def __repr__(self) -> str:
        return f"GraphitiFactory(search={self.search})"

    @property
    def graphiti(self) -> Graphiti:
        if self._graphiti is None:
            raise RuntimeError("the factory has not been called yet")
        return self._graphiti

    def __call__(self) -> GraphitiBackend:
        with self._lock:
            if self._graphiti is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="graphiti-loop",
                                 daemon=True).start()
                self._graphiti = self.run(self._open())
            return GraphitiBackend(self)

    def run(self, call: Coroutine[Any, Any, _T]) -> _T:
        """Run one of graphiti's coroutines on the factory's loop and wait for it."""
        if self._loop is None:
            raise RuntimeError("the factory has not been called yet")
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    async def _open(self) -> Graphiti:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="memcert-graphiti-"))
        driver = KuzuDriver(db=str(self._folder / "graph.kuzu"))
        for statement in get_fulltext_indices(GraphProvider.KUZU):
            await driver.execute_query(statement)
        return Graphiti(graph_driver=driver, llm_client=ScriptedLLMClient(),
                        embedder=HashEmbedder(), cross_encoder=OverlapCrossEncoder())


factory = GraphitiFactory(search=False)
search_factory = GraphitiFactory(search=True)
