"""AutoGen's ``ChromaDBVectorMemory``, and Chroma used directly, behind the contract in
:mod:`invariants.backend`, on a Chroma ``PersistentClient`` folder.

Two profiles, the two ways an agent keeps facts in Chroma, usable as specs::

    memcert certify invariants.adapters.autogen:factory          # autogen-ext's memory
    memcert certify invariants.adapters.autogen:chroma_factory   # chromadb, keyed upserts

Both run offline with no API key: embeddings come from :class:`HashEmbedding`, a
deterministic embedding of each text's words by their hashes, in place of Chroma's
default ONNX model, which would be downloaded on first use. Nothing here depends on how
well texts are embedded: every read lists its whole scope. ``ANONYMIZED_TELEMETRY`` is
set to ``False`` before chromadb is imported.

**autogen-ext** (:class:`AutoGenChromaBackend`), ``ChromaDBVectorMemory``'s own API:

- **write** is ``add(MemoryContent(value, mime_type=TEXT, metadata={namespace, entity,
  attribute, causal_seq, op_id}))``. autogen-ext stores each content under a fresh
  UUID, so every write is a new memory.
- **read** is ``query(entity, where=<namespace and entity>)`` with ``k`` of
  :data:`LISTING_LIMIT` (autogen-ext's default is 3), so the whole scope is served, in
  the nearest-first order of ``query``.
- **delete** raises ``NotImplementedError``: ``ChromaDBVectorMemory`` has ``clear``
  (every memory of the collection) and no delete of one scope; only the underlying
  collection, which it does not expose, could. **restore** raises too.

**chromadb** (:class:`ChromaBackend`), a collection used as a keyed store:

- **write** is ``collection.upsert(ids=[<namespace, entity, attribute>], documents=
  [value], metadatas=[...])``: one id per slot, as an application keeping one record per
  fact would choose, so a later write replaces the slot's record, whatever its
  ``causal_seq``.
- **read** is ``collection.get(where=<namespace and entity>)``, in Chroma's order.
- **delete** is ``collection.delete(where=<namespace and entity>)``: nothing is kept.
  **restore** raises ``NotImplementedError``.

``Record.version`` is 0: Chroma numbers no versions. One client serves every handle of
a factory, called from memcert's worker threads at once; nothing here serializes them.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ["ANONYMIZED_TELEMETRY"] = "False"

import chromadb
import numpy as np
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.memory.chromadb import (
    ChromaDBVectorMemory,
    CustomEmbeddingFunctionConfig,
    PersistentChromaDBVectorMemoryConfig,
)
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from invariants.backend import Ack, Delete, Record, Restore, Write

__all__ = [
    "COLLECTION",
    "LISTING_LIMIT",
    "AutoGenChromaBackend",
    "AutoGenFactory",
    "ChromaBackend",
    "HashEmbedding",
    "chroma_factory",
    "factory",
]

COLLECTION = "memcert"
LISTING_LIMIT = 10_000
"""``ChromaDBVectorMemory`` answers a query with its 3 nearest memories unless told
otherwise; a scope holds far fewer than this."""

DIMENSIONS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
NO_RESTORE = "Chroma deletes outright and keeps no tombstone, so there is nothing to restore"


class HashEmbedding(EmbeddingFunction[Documents]):
    """Each text as the normalized sum of its words' hash vectors: deterministic, offline,
    and close for texts sharing words, which is all a vector index needs here."""

    def __init__(self) -> None:
        """No model and no settings."""

    @staticmethod
    def name() -> str:
        return "memcert-hash"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashEmbedding:
        return HashEmbedding()

    def __call__(self, input: Documents) -> Embeddings:
        return [_embed(text) for text in input]


def _embed(text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
    vector = np.zeros(DIMENSIONS, dtype=np.float32)
    for word in _WORD.findall(text.casefold()) or [text]:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=DIMENSIONS).digest()
        vector += np.frombuffer(digest, dtype=np.uint8).astype(np.float32) - 127.5
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector + 1.0


def _scope(namespace: str, entity_id: str) -> dict[str, Any]:
    return {"$and": [{"namespace": namespace}, {"entity": entity_id}]}


def _metadata(op: Write) -> dict[str, Any]:
    return {"namespace": op.namespace, "entity": op.entity_id, "attribute": op.attribute,
            "causal_seq": op.causal_seq, "op_id": op.op_id}


def _record(entity_id: str, value: str, metadata: Mapping[str, Any]) -> Record:
    return Record(entity_id, str(metadata["attribute"]), value, int(metadata["causal_seq"]), 0)


class AutoGenChromaBackend:
    """A handle onto one ``ChromaDBVectorMemory``; see the module docstring."""

    def __init__(self, memory: ChromaDBVectorMemory) -> None:
        self.memory = memory

    def __repr__(self) -> str:
        return "AutoGenChromaBackend()"

    def write(self, op: Write) -> Ack:
        content = MemoryContent(content=op.value, mime_type=MemoryMimeType.TEXT,
                                metadata=_metadata(op))
        asyncio.run(self.memory.add(content))
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        raise NotImplementedError(
            "ChromaDBVectorMemory has no delete of one entity: only clear(), which empties "
            "the whole collection")

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(NO_RESTORE)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        found = asyncio.run(self.memory.query(entity_id, where=_scope(namespace, entity_id)))
        return [_record(entity_id, str(item.content), item.metadata or {})
                for item in found.results]

    def reset(self) -> None:
        asyncio.run(self.memory.clear())

    def close(self) -> None:
        """Nothing to release per handle: the memory belongs to the factory."""


class ChromaBackend:
    """A handle onto one Chroma collection used as a keyed store; see the module
    docstring."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection

    def __repr__(self) -> str:
        return "ChromaBackend()"

    def write(self, op: Write) -> Ack:
        key = "\x1f".join((op.namespace, op.entity_id, op.attribute))
        self.collection.upsert(ids=[key], documents=[op.value], metadatas=[_metadata(op)])
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        self.collection.delete(where=_scope(op.namespace, op.entity_id))
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(NO_RESTORE)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        got = self.collection.get(where=_scope(namespace, entity_id),
                                  include=["documents", "metadatas"])
        return [_record(entity_id, document, metadata)
                for document, metadata in zip(got["documents"], got["metadatas"], strict=True)]

    def reset(self) -> None:
        ids = self.collection.get(include=[])["ids"]
        if ids:
            self.collection.delete(ids=ids)

    def close(self) -> None:
        """Nothing to release per handle: the client belongs to the factory."""


class AutoGenFactory:
    """A backend factory: every call returns a handle onto one Chroma folder, opened on
    the first call, in a temporary folder of its own."""

    shares_across_processes = False

    def __init__(self, *, autogen: bool, folder: str | os.PathLike[str] | None = None) -> None:
        self.autogen = autogen
        self._folder = None if folder is None else Path(folder)
        self._lock = threading.Lock()
        self._store: ChromaDBVectorMemory | Any = None

    def __repr__(self) -> str:
        return f"AutoGenFactory(autogen={self.autogen})"

    def __call__(self) -> AutoGenChromaBackend | ChromaBackend:
        with self._lock:
            if self._store is None:
                if self._folder is None:
                    self._folder = Path(tempfile.mkdtemp(prefix="memcert-chroma-"))
                self._store = self._open(str(self._folder / "chroma"))
            if self.autogen:
                return AutoGenChromaBackend(self._store)
            return ChromaBackend(self._store)

    def _open(self, path: str) -> ChromaDBVectorMemory | Any:
        if self.autogen:
            return ChromaDBVectorMemory(config=PersistentChromaDBVectorMemoryConfig(
                collection_name=COLLECTION, persistence_path=path, k=LISTING_LIMIT,
                embedding_function_config=CustomEmbeddingFunctionConfig(
                    function=HashEmbedding)))
        client = chromadb.PersistentClient(path=path)
        return client.get_or_create_collection(COLLECTION, embedding_function=HashEmbedding())


factory = AutoGenFactory(autogen=True)
chroma_factory = AutoGenFactory(autogen=False)
