"""The handle pool never lends one store handle to two requests at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import anyio

from reference_store import ReferenceStore
from reference_store.service.pool import HandlePool


def test_concurrent_requests_each_get_a_handle_of_their_own(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = HandlePool(lambda: ReferenceStore(url), size=3)
    lock = threading.Lock()
    busy: set[int] = set()
    shared: list[int] = []
    most = 0

    def work(store: ReferenceStore) -> int:
        nonlocal most
        with lock:
            if id(store) in busy:
                shared.append(id(store))
            busy.add(id(store))
            most = max(most, len(busy))
        time.sleep(0.02)
        records = store.read("pool", "u1")
        with lock:
            busy.discard(id(store))
        return len(records)

    async def many() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(24):
                group.start_soon(pool.run, work)

    try:
        anyio.run(many)
    finally:
        pool.close()
    assert shared == []
    assert most == 3
    assert pool.opened == 3
