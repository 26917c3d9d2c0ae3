"""LangGraph's long-term memory stores behind the contract in :mod:`invariants.backend`.

Three stores, one adapter, three factories usable as specs::

    memcert certify invariants.adapters.langgraph:inmemory_factory
    memcert certify invariants.adapters.langgraph:sqlite_factory
    MEMCERT_LANGGRAPH_PG_URL=postgresql://... \\
        memcert certify invariants.adapters.langgraph:postgres_factory

:func:`inmemory_search` and :func:`sqlite_search` are the same stores with a vector
index, read through their semantic search as well as their listing (see **read, with
search** below). They take the embedder as an argument: ``invariants`` sits below the
model memcert ships, so whoever builds them passes it in. With the ``semantic`` extra,
:mod:`memcert.adapters` has them over all-MiniLM-L6-v2 as specs::

    memcert certify memcert.adapters:langgraph_inmemory_search
    memcert certify memcert.adapters:langgraph_sqlite_search

``PostgresStore`` has no search profile: its index needs the server's ``pgvector``
extension.

How the contract maps onto ``BaseStore`` (``put``, ``search``, ``delete``):

- **Keys.** An entity is the namespace ``("memcert", namespace, entity_id)``, and an
  attribute is the item's key, verbatim: no case folding, no normalization. A ``.``
  (which LangGraph forbids in a namespace label), a ``%`` and a NUL are percent-encoded
  in the two labels, so the mapping stays one-to-one.
- **write** is one ``store.put(namespace, attribute, value)``. The item's value carries
  the contract's fields as data: ``{"value", "causal_seq", "op_id", "source"}``.
  LangGraph never refuses a put, so every write is acknowledged ``applied=True``: a put
  with a lower ``causal_seq`` overwrites a newer item (last write wins), a put to a
  deleted entity recreates it, and a retried ``op_id`` is applied again. The adapter
  passes all of that through; refusing would certify the adapter instead of LangGraph.
- **delete** lists the entity's items with ``store.search`` and calls
  ``store.delete(namespace, key)`` on each. LangGraph deletes items, not entities, and
  keeps no tombstone; the list and the deletes are separate calls, as they would be in
  an application.
- **restore** raises ``NotImplementedError``: LangGraph has nothing to restore from.
- **read** is one ``store.search(namespace, limit=LISTING_LIMIT)`` with no query, the
  store's own way to list a namespace, in the order the store serves it (insertion
  order of the keys in memory, most recently updated first in SQLite and PostgreSQL).
  It is not a ``get`` per key: the read does not know the keys, and splicing a listing
  with later gets would show two states of the store as one.
- **read, with search** (``inmemory_search``, ``sqlite_search``). The store has a vector
  index configured as LangGraph documents it, over the item's ``"value"`` field
  (``SqliteStore`` 3.1 reads that setting under another name and embeds the whole item;
  the adapter leaves that to the store), embedded by the embedder the factory was given
  (all-MiniLM-L6-v2's :data:`EMBEDDING_DIMS` dimensions unless told otherwise); every
  put is indexed, the store's default.
  A read is one ``store.batch`` of two searches of the entity's namespace: the listing
  above, and a semantic search whose query is :func:`search_query`, the question an
  agent asks about the entity, with the same limit. The records are the listing's, in
  its order, then each item only the semantic search returned, in its ranking. An item
  both return with the same stored value is one record, or every read would show the
  adapter's two paths as the store's duplicates; one the search returns with another
  value is served again, since the store served both.
  One batch, not two calls, so that a read does not splice two states of the store as
  one: ``SqliteStore`` runs a batch in one transaction, and ``InMemoryStore`` collects
  the candidates of both searches before it embeds the query (it takes no lock, so a
  put from another thread can still land between the two passes).
  The limit, not the query, decides what comes back: every item the index can reach is
  ranked and served, so a deleted or replaced value that the index still held would be
  served whatever the agent asked, and the checkers judge it like any other record (a
  resurrection, a stale fact, a conflict). A small limit would measure the query's
  wording instead of the store. Writes are not batched: each put is embedded in its own
  call, which is what one write is.
- ``Record.version`` is 0: LangGraph items carry no version.
- **reset** deletes every item under the ``"memcert"`` root, through the same API.

A handle is not bound to its thread: the SQLite connection is opened with
``check_same_thread=False`` (by LangGraph itself, or for ``sqlite_search`` with the
options LangGraph uses), and both SQL stores guard their one connection with their own
lock. An embedder may take one call at a time (MiniLM's tokenizer cannot be shared
between threads); that orders calls to the model, not the store's operations.
Nothing else here locks, orders or deduplicates.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TypeAlias, cast

from langgraph.store.base import BaseStore, IndexConfig, Item, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import FactoryError

__all__ = [
    "EMBEDDING_DIMS",
    "LISTING_LIMIT",
    "PG_URL_ENV",
    "ROOT",
    "SQLITE_PATH_ENV",
    "Embed",
    "LangGraphBackend",
    "StoreFactory",
    "entity_namespace",
    "inmemory",
    "inmemory_factory",
    "inmemory_search",
    "postgres",
    "postgres_factory",
    "search_query",
    "sqlite",
    "sqlite_factory",
    "sqlite_search",
    "vector_index",
]

ROOT = "memcert"
"""The first label of every namespace memcert writes; ``reset`` empties only this."""

LISTING_LIMIT = 10_000
"""``search`` returns 10 items unless told otherwise; an entity holds far fewer than this."""

EMBEDDING_DIMS = 384
"""The length of all-MiniLM-L6-v2's vectors, which LangGraph's index must be told."""

Embed: TypeAlias = Callable[[Sequence[str]], list[list[float]]]
"""An embedder as LangGraph's index takes one (its ``EmbeddingsFunc``): texts in, one
vector each out; ``reference_store.normalize.minilm.load()`` is one."""

SQLITE_PATH_ENV = "MEMCERT_LANGGRAPH_SQLITE"
PG_URL_ENV = "MEMCERT_LANGGRAPH_PG_URL"

_ESCAPED = re.compile(r"[%.\x00]")
_UNESCAPED = re.compile(r"%([0-9A-F]{2})")


def entity_namespace(namespace: str, entity_id: str) -> tuple[str, str, str]:
    """The LangGraph namespace that holds one entity's items."""
    return (ROOT, _label(namespace), _label(entity_id))


def _label(text: str) -> str:
    return _ESCAPED.sub(lambda m: f"%{ord(m.group()):02X}", text)


def _unlabel(label: str) -> str:
    return _UNESCAPED.sub(lambda m: chr(int(m.group(1), 16)), label)


def search_query(entity_id: str) -> str:
    """What an agent asks its memory about one entity before it answers.

    It decides the ranking only: the search's limit lets every item the index holds
    for the entity come back, whatever the wording.
    """
    return f"What do I know about {entity_id}?"


class LangGraphBackend:
    """A handle onto one LangGraph ``BaseStore``; see the module docstring for the mapping.

    ``closing`` releases what this handle opened (a connection); the store object
    itself may be shared with other handles. With ``search``, reads also go through the
    store's semantic search, which needs a store with a vector index.
    """

    def __init__(self, store: BaseStore, *, closing: Callable[[], None] | None = None,
                 search: bool = False) -> None:
        self.store = store
        self.search = search
        self._closing = closing

    def __repr__(self) -> str:
        return f"LangGraphBackend({type(self.store).__name__})"

    def write(self, op: Write) -> Ack:
        self.store.put(entity_namespace(op.namespace, op.entity_id), op.attribute, {
            "value": op.value, "causal_seq": op.causal_seq, "op_id": op.op_id,
            "source": op.source,
        })
        return Ack(True)

    def delete(self, op: Delete) -> Ack:
        namespace = entity_namespace(op.namespace, op.entity_id)
        for item in self._listing(namespace):
            self.store.delete(namespace, item.key)
        return Ack(True)

    def restore(self, op: Restore) -> Ack:
        raise NotImplementedError(
            f"{type(self.store).__name__} deletes items outright and keeps no tombstone, "
            "so there is nothing to restore")

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        where = entity_namespace(namespace, entity_id)
        items = self._served(where, entity_id) if self.search else self._listing(where)
        return [Record(entity_id, item.key, item.value["value"], item.value["causal_seq"], 0)
                for item in items]

    def entities(self, namespace: str) -> Iterator[str]:
        """Every entity of ``namespace`` that holds an item, each once: one
        ``store.search`` over the namespace prefix ``("memcert", namespace)`` a page of
        :data:`LISTING_LIMIT` items at a time, the store's own listing across the
        entities' namespaces (``memcert audit``'s optional capability)."""
        prefix = (ROOT, _label(namespace))
        seen: set[str] = set()
        offset = 0
        while True:
            page = self.store.search(prefix, limit=LISTING_LIMIT, offset=offset)
            for item in page:
                if len(item.namespace) == 3 and item.namespace[2] not in seen:
                    seen.add(item.namespace[2])
                    yield _unlabel(item.namespace[2])
            if len(page) < LISTING_LIMIT:
                return
            offset += len(page)

    def reset(self) -> None:
        while True:
            items = [item for namespace in self.store.list_namespaces(prefix=(ROOT,),
                                                                     limit=LISTING_LIMIT)
                     for item in self._listing(namespace)]
            if not items:
                return
            for item in items:
                self.store.delete(item.namespace, item.key)

    def close(self) -> None:
        if self._closing is not None:
            self._closing()
            self._closing = None

    def _listing(self, namespace: tuple[str, ...]) -> list[Item]:
        return list(self.store.search(namespace, limit=LISTING_LIMIT))

    def _served(self, namespace: tuple[str, ...], entity_id: str) -> list[Item]:
        listing, ranked = self.store.batch([
            SearchOp(namespace, limit=LISTING_LIMIT),
            SearchOp(namespace, limit=LISTING_LIMIT, query=search_query(entity_id)),
        ])
        listed = cast(list[SearchItem], listing)
        seen = [(item.key, item.value) for item in listed]
        return [*listed, *(item for item in cast(list[SearchItem], ranked)
                           if (item.key, item.value) not in seen)]


class StoreFactory:
    """A backend factory: each call returns a new handle onto one LangGraph store.

    ``open_store`` enters a context that yields a store object; it is called once if
    ``shared`` (every handle gets that one object, as threads of an application share an
    ``InMemoryStore``), otherwise once per handle (each handle its own connection onto
    one database, as worker processes of an application would have). Each new store is
    set up (``setup()``: tables and migrations) under a lock before its handle is
    returned, because LangGraph's migrations are not meant to race and setup is not what
    memcert certifies. Nothing is opened until the first call. ``search`` is passed on to
    every handle.
    """

    def __init__(self, name: str, open_store: Callable[[], AbstractContextManager[BaseStore]],
                 *, shared: bool, shares_across_processes: bool, search: bool = False) -> None:
        self.name = name
        self._open_store = open_store
        self._shared = shared
        self._search = search
        self.shares_across_processes = shares_across_processes
        self._lock = threading.Lock()
        self._store: BaseStore | None = None

    def __repr__(self) -> str:
        return f"StoreFactory({self.name})"

    def __call__(self) -> LangGraphBackend:
        with self._lock:
            if self._store is not None:
                return LangGraphBackend(self._store, search=self._search)
            handle = ExitStack()
            store = handle.enter_context(self._open_store())
            _setup(store)
            if self._shared:
                self._store = store
                return LangGraphBackend(store, search=self._search)
            return LangGraphBackend(store, closing=handle.close, search=self._search)


def _setup(store: BaseStore) -> None:
    setup: Callable[[], None] | None = getattr(store, "setup", None)
    if setup is not None:
        setup()


def inmemory() -> StoreFactory:
    """Handles onto one ``InMemoryStore``, made on the first call, for threads of this process."""
    return StoreFactory("InMemoryStore", lambda: nullcontext(InMemoryStore()), shared=True,
                        shares_across_processes=False)


def inmemory_search(embed: Embed, *, dims: int = EMBEDDING_DIMS) -> StoreFactory:
    """Handles onto one ``InMemoryStore`` with a vector index embedded by ``embed``,
    read through its semantic search too."""
    return StoreFactory("InMemoryStore with a vector index",
                        lambda: nullcontext(InMemoryStore(index=vector_index(embed, dims=dims))),
                        shared=True, shares_across_processes=False, search=True)


def vector_index(
    embed: Embed, fields: list[str] | None = None, *, dims: int = EMBEDDING_DIMS
) -> IndexConfig:
    """LangGraph's index over ``fields`` of each item (the fact's text unless told
    otherwise; ``[]`` for LangGraph's default, the whole item), embedded by ``embed``
    into vectors of ``dims`` floats."""
    config: IndexConfig = {"dims": dims, "embed": embed}
    wanted = ["value"] if fields is None else fields
    if wanted:
        config["fields"] = wanted
    return config


def sqlite(path: str | os.PathLike[str] | None = None) -> StoreFactory:
    """Handles onto one ``SqliteStore`` file, each with its own connection.

    Without ``path``, the file named by ``MEMCERT_LANGGRAPH_SQLITE`` is used; without
    that, one is made in a fresh temporary folder on the first call and its path is
    published in that variable, so worker processes started afterwards open the same file.
    """

    def open_store() -> AbstractContextManager[BaseStore]:
        from langgraph.store.sqlite import SqliteStore

        return SqliteStore.from_conn_string(str(_sqlite_path(path)))

    return StoreFactory("SqliteStore", open_store, shared=False, shares_across_processes=True)


def sqlite_search(
    embed: Embed, path: str | os.PathLike[str] | None = None, *, dims: int = EMBEDDING_DIMS
) -> StoreFactory:
    """Handles onto one ``SqliteStore`` file with a vector index embedded by ``embed``,
    each with its own connection, read through its semantic search too.

    The file is found as :func:`sqlite` finds it. The index needs the sqlite-vec
    extension, so the connection comes from a ``sqlite3`` module that can load
    extensions: Python's own where it was built with that, else ``pysqlite3`` (the
    ``pysqlite3-binary`` wheel, with its own SQLite). It is opened with the options
    ``SqliteStore.from_conn_string`` uses.
    """

    @contextmanager
    def open_store() -> Iterator[BaseStore]:
        from langgraph.store.sqlite import SqliteStore

        conn = _extension_capable_sqlite().connect(
            str(_sqlite_path(path)), check_same_thread=False, isolation_level=None)
        try:
            yield SqliteStore(conn, index=vector_index(embed, dims=dims))
        finally:
            conn.close()

    return StoreFactory("SqliteStore with a vector index", open_store, shared=False,
                        shares_across_processes=True, search=True)


def _extension_capable_sqlite() -> ModuleType:
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        return import_module("pysqlite3.dbapi2")
    except ImportError as error:
        raise FactoryError(
            "SqliteStore's vector index needs the sqlite-vec extension, and this Python's "
            "sqlite3 module cannot load extensions: pip install pysqlite3-binary, whose "
            "sqlite3 can") from error


def postgres(url: str | None = None) -> StoreFactory:
    """Handles onto one ``PostgresStore`` database, each with its own connection.

    Without ``url``, ``MEMCERT_LANGGRAPH_PG_URL`` names the database. A SQLAlchemy-style
    ``postgresql+psycopg://`` URL is accepted too.
    """

    def open_store() -> AbstractContextManager[BaseStore]:
        from langgraph.store.postgres import PostgresStore

        return PostgresStore.from_conn_string(_pg_conninfo(url))

    return StoreFactory("PostgresStore", open_store, shared=False, shares_across_processes=True)


def _sqlite_path(path: str | os.PathLike[str] | None) -> Path:
    if path is not None:
        return Path(path)
    named = os.environ.get(SQLITE_PATH_ENV)
    if named:
        return Path(named)
    made = Path(tempfile.mkdtemp(prefix="memcert-langgraph-")) / "store.sqlite3"
    os.environ[SQLITE_PATH_ENV] = str(made)
    return made


def _pg_conninfo(url: str | None) -> str:
    url = url or os.environ.get(PG_URL_ENV)
    if not url:
        raise FactoryError(
            f"PostgresStore needs a database: set {PG_URL_ENV} to a URL such as "
            "postgresql://user:password@localhost:5432/memcert, or build a factory with "
            "invariants.adapters.langgraph.postgres(url)")
    return re.sub(r"^postgresql\+\w+://", "postgresql://", url)


inmemory_factory = inmemory()
sqlite_factory = sqlite()
postgres_factory = postgres()
