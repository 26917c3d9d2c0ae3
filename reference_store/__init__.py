"""memcert's reference memory store: the backend every other backend is measured against.

``reference_store:factory`` is a backend factory. With ``MEMCERT_DB_URL`` unset it opens
an embedded SQLite file in a temporary folder, shared by every handle of the process and
of the worker processes it starts; otherwise it opens the database that variable names
(a SQLite path or a PostgreSQL URL).

``reference_store:semantic_factory`` opens the same database at the semantic level, with
all-MiniLM-L6-v2 (the ``semantic`` extra) as the embedder at its measured threshold:
``memcert certify reference_store:semantic_factory --level semantic``.
"""

from __future__ import annotations

from .config import DB_URL_ENV, StoreConfig
from .engine import default_db_url
from .retrieval import Hit
from .store import ReferenceStore, WriteOptions
from .transfer import ImportReport, Rejection

__all__ = [
    "DB_URL_ENV",
    "Hit",
    "ImportReport",
    "ReferenceStore",
    "Rejection",
    "StoreConfig",
    "WriteOptions",
    "factory",
    "semantic_factory",
]


def factory() -> ReferenceStore:
    """Open a handle onto the shared reference database."""
    return ReferenceStore(default_db_url())


def semantic_factory() -> ReferenceStore:
    """Open a handle onto the shared reference database, judging paraphrase by MiniLM.

    The model is loaded on the first call and shared by every later handle of the
    process; importing this package never imports torch.
    """
    from .normalize import minilm

    config = StoreConfig(level="semantic", semantic_threshold=minilm.DEFAULT_THRESHOLD)
    return ReferenceStore(default_db_url(), config, embedder=minilm.load())
