"""memcert's bottom layer: the backend contract, errors, histories and the checkers.

Importing this package starts no database, no metrics and no load generator.
"""

from __future__ import annotations

from .backend import Ack, BackendFactory, Delete, MemoryBackend, Record, Restore, Write
from .certification import certify
from .errors import FactoryError, InvalidArgument, InvalidInput, MemcertError, ValueTooLarge

__all__ = [
    "Ack",
    "BackendFactory",
    "Delete",
    "FactoryError",
    "InvalidArgument",
    "InvalidInput",
    "MemcertError",
    "MemoryBackend",
    "Record",
    "Restore",
    "ValueTooLarge",
    "Write",
    "certify",
]
