"""memcert: certify an agent-memory backend against its write-time invariants.

``import memcert`` is the front door; the names below are the public API::

    import memcert

    report = memcert.certify("mystore:factory", budget_s=120, seed=7, out="memcert-out")
    again = memcert.replay("memcert-out")

- :func:`certify` and :func:`replay`: certify a backend, re-check a saved run;
- :class:`MemoryBackend` and the operation types (:class:`Write`, :class:`Delete`,
  :class:`Restore`, :class:`Ack`, :class:`Record`, :data:`BackendFactory`): the
  contract a backend implements;
- :func:`check_history`: the checkers over a history;
- :func:`machine_for`: the Hypothesis state machine over a backend, as the programs
  memcert prints use it;
- the errors, all of them :class:`MemcertError`::

      MemcertError
      ├── InvalidInput (ValueError): a value the contract refuses
      │   └── ValueTooLarge
      ├── InvalidArgument (TypeError): an argument of memcert's API, named, with the fix
      ├── FactoryError: a backend spec or factory that does not give a working backend
      └── HistoryError (ValueError): a history that cannot be trusted

The packages below hold the machinery: ``invariants`` (the contract, checkers, stateful
machine, adapters), ``reference_store``, ``scenarios`` and ``chaos`` (the runner and
the CLI). Importing memcert starts no database, no metrics, no load generator and no
Hypothesis: :func:`machine_for` is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invariants.backend import Ack, BackendFactory, Delete, MemoryBackend, Record, Restore, Write
from invariants.checkers import check_history
from invariants.errors import (
    FactoryError,
    InvalidArgument,
    InvalidInput,
    MemcertError,
    ValueTooLarge,
)
from invariants.history import HistoryError

from .certification import certify, replay

if TYPE_CHECKING:
    from invariants.stateful import machine_for

__all__ = [
    "Ack",
    "BackendFactory",
    "Delete",
    "FactoryError",
    "HistoryError",
    "InvalidArgument",
    "InvalidInput",
    "MemcertError",
    "MemoryBackend",
    "Record",
    "Restore",
    "ValueTooLarge",
    "Write",
    "certify",
    "check_history",
    "machine_for",
    "replay",
]


def __getattr__(name: str) -> Any:
    """``machine_for`` on first use: the stateful machine imports Hypothesis."""
    if name == "machine_for":
        from invariants.stateful import machine_for

        return machine_for
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
