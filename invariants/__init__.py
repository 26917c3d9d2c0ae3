"""memcert's bottom layer: the backend contract, errors, histories and the checkers.

Importing this package starts no database, no metrics and no load generator. The public
API's front door is ``import memcert``, which re-exports these names.
"""

from __future__ import annotations

import importlib
from typing import Any

from .backend import Ack, BackendFactory, Delete, MemoryBackend, Record, Restore, Write
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
    "guard",
]


def __getattr__(name: str) -> Any:
    """``invariants.certify`` is :func:`memcert.certify`, looked up on first use, and
    ``invariants.guard`` is :func:`invariants.guarding.guard`, imported on first use so
    that importing the package loads no checker, normalizer or thread machinery.

    The certify facade has one home, in the top layer (``memcert``), and ``invariants``
    is the bottom one, which imports nothing above it. This alias is kept so that code
    written against ``invariants.certify`` keeps working; it is the package's one upward
    name, and the layer test (``tests/test_layers.py``) lists it as its only exception.
    New code imports ``memcert``.
    """
    if name == "certify":
        return importlib.import_module("memcert").certify
    if name == "guard":
        return importlib.import_module("invariants.guarding").guard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
