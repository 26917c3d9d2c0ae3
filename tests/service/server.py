"""Start ``memcert serve`` as a real subprocess on a free port: :mod:`chaos.service`,
under the names the service tests use.

    with Served.start(db_url) as served:
        ...  # served.url, served.process
    # stopped with SIGTERM, or call served.kill() / served.restart()
"""

from __future__ import annotations

from pathlib import Path

from chaos.service import ManagedService as Served
from chaos.service import ServeFailed, serve_command

__all__ = ["ROOT", "ServeFailed", "Served", "serve_command"]

ROOT = Path(__file__).resolve().parents[2]
