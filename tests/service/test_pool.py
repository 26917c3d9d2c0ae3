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


def test_quick_reads_of_an_in_process_database_stay_on_the_event_loop(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = HandlePool(lambda: ReferenceStore(url), size=2, in_process=True)
    pool.warm()
    seen: dict[str, tuple[int, int]] = {}

    async def both() -> None:
        await pool.run(lambda store: seen.setdefault("quick", (threading.get_ident(),
                                                                id(store))), quick=True)
        await pool.run(lambda store: seen.setdefault("slow", (threading.get_ident(),
                                                               id(store))))

    try:
        anyio.run(both)
    finally:
        pool.close()
    loop_thread = threading.get_ident()
    assert seen["quick"][0] == loop_thread, "a quick read is not worth a thread hop"
    assert seen["slow"][0] != loop_thread
    assert seen["quick"][1] != seen["slow"][1], "the loop's handle is never lent to a thread"
    assert pool.opened == 2


def test_quick_work_still_hops_when_the_database_is_elsewhere(tmp_path: Path):
    url = str(tmp_path / "store.sqlite3")
    pool = HandlePool(lambda: ReferenceStore(url), size=1)
    threads: list[int] = []

    async def quick() -> None:
        await pool.run(lambda store: threads.append(threading.get_ident()), quick=True)

    try:
        anyio.run(quick)
    finally:
        pool.close()
    assert threads != [threading.get_ident()]
