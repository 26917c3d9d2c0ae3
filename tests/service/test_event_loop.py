"""``memcert serve`` answers on uvloop (the suite runs on Linux, where it installs).

Every request is parsed, handed to a worker thread and answered on the event loop, so
which loop it is decides part of what a request costs (docs/performance.md, "HTTP
service"). Dropping the dependency, or the setting, would leave the service correct and
slower; this notices.
"""

from __future__ import annotations

from pathlib import Path

from reference_store.service.server import EVENT_LOOP

from .calls import call
from .server import Served


def test_uvloop_is_what_the_service_is_configured_with():
    assert EVENT_LOOP == "uvloop"


def test_a_served_process_runs_uvloop(served: Served):
    # Answered, so the loop runs (the announcement comes just before it starts). A
    # process on asyncio's own loop never loads uvloop's extension.
    assert call(served.url, "GET", "/healthz").status == 200
    maps = Path(f"/proc/{served.process.pid}/maps").read_text()
    assert "uvloop/loop." in maps
