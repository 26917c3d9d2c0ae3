"""The adapters' search profiles over all-MiniLM-L6-v2, as specs for ``memcert certify``::

    memcert certify memcert.adapters:langgraph_inmemory_search
    memcert certify memcert.adapters:langgraph_sqlite_search
    memcert certify memcert.adapters:langmem_search

The adapters in :mod:`invariants.adapters` take their embedder as an argument, since
``invariants`` sits below the model memcert ships (``reference_store.normalize.minilm``);
these are the same stores given that model, the one the reference store's semantic
level uses, so one copy of the weights serves both. They need the ``semantic`` extra
(and the ``langgraph`` or ``langmem`` one). Importing this module loads neither the
adapters' libraries nor the model: each profile builds its factory on its first call,
and the model loads on the first text it embeds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from invariants.backend import BackendFactory, MemoryBackend

__all__ = ["langgraph_inmemory_search", "langgraph_sqlite_search", "langmem_search"]


def minilm(texts: Sequence[str]) -> list[list[float]]:
    """all-MiniLM-L6-v2's vectors of ``texts``; the model is loaded once per process."""
    from reference_store.normalize import minilm as model

    return model.load()(texts)


class SearchProfile:
    """A zero-argument backend factory whose store factory ``build`` makes on first use.

    Building imports the adapter's library (not the model), so a profile named by a
    spec costs nothing until the harness asks it something.
    """

    def __init__(self, name: str, build: Callable[[], BackendFactory]) -> None:
        self.name = name
        self._build = build
        self._factory: BackendFactory | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SearchProfile({self.name})"

    @property
    def shares_across_processes(self) -> bool:
        """Whether handles made in other processes reach the same store: the store's
        factory says."""
        return bool(getattr(self._built(), "shares_across_processes", True))

    def __call__(self) -> MemoryBackend:
        return self._built()()

    def _built(self) -> BackendFactory:
        with self._lock:
            if self._factory is None:
                self._factory = self._build()
            return self._factory


def _langgraph_inmemory() -> BackendFactory:
    from invariants.adapters import langgraph

    return langgraph.inmemory_search(minilm)


def _langgraph_sqlite() -> BackendFactory:
    from invariants.adapters import langgraph

    return langgraph.sqlite_search(minilm)


def _langmem() -> BackendFactory:
    from invariants.adapters import langmem

    return langmem.search(minilm)


langgraph_inmemory_search = SearchProfile(
    "LangGraph InMemoryStore with a MiniLM index", _langgraph_inmemory)
"""LangGraph's ``InMemoryStore`` with a MiniLM index, read through its search too."""

langgraph_sqlite_search = SearchProfile(
    "LangGraph SqliteStore with a MiniLM index", _langgraph_sqlite)
"""LangGraph's ``SqliteStore`` with a MiniLM index, read through its search too; the
file is found as :func:`invariants.adapters.langgraph.sqlite` finds it."""

langmem_search = SearchProfile(
    "LangMem's tools over an InMemoryStore with a MiniLM index over whole memories", _langmem)
"""LangMem's tools over one ``InMemoryStore`` with a MiniLM index, read through it too."""
