"""The guard reports nothing on correct backends, under 32 threads, while checking.

The correct examples (``chaos.examples.passing_dict`` and the in-memory store) and the
reference store on SQLite and on PostgreSQL run the mixed workload from 32 threads, one
handle each, behind one guard in assertion mode: a single violation would raise. The
guard's own counters must show that it checked every invariant it runs, so a quiet
guard is a checked one, not an idle one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from chaos.examples import SharedFactory
from chaos.examples.memory import InMemoryBackend
from chaos.examples.passing_dict import OneStore
from invariants.backend import MemoryBackend
from invariants.guarding import GUARD_CHECKERS, Guard
from invariants.normalize import Level
from reference_store import ReferenceStore
from tests.invariants.guard_workload import run_threads

THREADS = 32
ENTITIES = [f"u{i}" for i in range(8)]


def guarded_run(factory: Callable[[], MemoryBackend], ops: int, level: Level = "lexical"
                ) -> CollectorRegistry:
    registry = CollectorRegistry()
    reader = factory()
    handles = [factory() for _ in range(THREADS)]
    with Guard(reader, sample=1.0, level=level, registry=registry, backend_name="clean",
               recheck_s=0.05) as guard:
        errors = run_threads([guard.wrap(h) for h in handles], ops, 11, ENTITIES)
        assert guard.flush()
        assert errors == []
        assert guard.counts() == dict.fromkeys(GUARD_CHECKERS, 0)
        assert guard.dropped() == {}
        checks = {name: registry.get_sample_value("memcert_checks_total", {
            "backend": "clean", "scenario": "production", "invariant": name,
            "source": "guard"}) for name in GUARD_CHECKERS}
        assert all(n and n > 0 for n in checks.values()), checks
    for handle in (reader, *handles):
        handle.close()
    return registry


@pytest.mark.parametrize(("factory", "level"), [
    (OneStore(), "surface"),  # the level it is certified at
    (SharedFactory(InMemoryBackend), "lexical"),
], ids=["passing_dict", "memory"])
def test_the_correct_examples_show_nothing_under_32_threads(
        factory: Callable[[], MemoryBackend], level: Level) -> None:
    guarded_run(factory, ops=60, level=level)


def test_the_reference_store_on_sqlite_shows_nothing_under_32_threads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    guarded_run(lambda: ReferenceStore(url), ops=15)


def test_the_reference_store_on_postgresql_shows_nothing_under_32_threads(
        fresh_pg_url: str) -> None:
    guarded_run(lambda: ReferenceStore(fresh_pg_url), ops=15)
