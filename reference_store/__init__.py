"""memcert's reference memory store: the backend every other backend is measured against.

``reference_store:factory`` is a backend factory. With ``MEMCERT_DB_URL`` unset it opens
an embedded SQLite file in a temporary folder, shared by every handle of the process and
of the worker processes it starts; otherwise it opens the database that variable names
(a SQLite path or a PostgreSQL URL).
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
]


def factory() -> ReferenceStore:
    """Open a handle onto the shared reference database."""
    return ReferenceStore(default_db_url())
