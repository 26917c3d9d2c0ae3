"""What a ``[service]`` table declares: how memcert starts a user's HTTP service.

A store that acknowledges a write before its data reaches disk passes every run without
a crash. To crash a user's service (``crash_restart``) or stall it (``pause``), memcert
must own its process: it starts ``command`` itself, with ``{port}`` replaced by the
port of the URL being certified, waits until the service answers, and can then freeze,
kill and restart it on the same data. The same settings come from
``memcert certify URL --service-cmd CMD`` and its companion flags, which win over a
table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_START_TIMEOUT_S", "Service"]

DEFAULT_START_TIMEOUT_S = 30.0
"""How long a start (or a restart) may take before the service counts as failed."""


@dataclass(frozen=True, slots=True)
class Service:
    """The command that starts the service (``{port}`` is replaced), the URL whose 2xx
    answer says it is ready ("" for a read of the contract, which any server of the
    protocol answers), how long a start may take, and the folder it runs in."""

    command: str
    health_url: str = ""
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    cwd: str = ""
