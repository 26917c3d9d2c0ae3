"""SQLite reads the store's lookups of active rows through the partial index of them,
whatever order the schema created its indexes in."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from invariants.backend import Write
from reference_store import ReferenceStore


def _plan_of(sqlite_url: str, wanted: str, call: Callable[[ReferenceStore], object]) -> str:
    """The query plan of the first statement ``call`` runs that contains ``wanted``: how
    it reads each table, one line each."""
    sent: list[tuple[str, Any]] = []
    with ReferenceStore(sqlite_url) as store:
        store.write(Write("ns", "e", "city", "Paris", 1, "w1"))

        def seen(_conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
            sent.append((statement, params))

        event.listen(store.engine, "before_cursor_execute", seen)
        call(store)
    statement, params = next(item for item in sent if wanted in item[0])
    with sqlite3.connect(make_url(sqlite_url).database or "") as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {statement}", params).fetchall()
    return "\n".join(str(step[3]) for step in plan)


def test_the_current_record_lookup_uses_the_partial_index(sqlite_url: str) -> None:
    plan = _plan_of(sqlite_url, "attr_key = ?",
                    lambda store: store.write(Write("ns", "e", "city", "Oslo", 2, "w2")))
    assert "SEARCH memories USING INDEX memories_one_active" in plan


@pytest.mark.parametrize("entity", [None, "e"])
def test_the_candidates_of_search_and_recall_use_the_partial_index(
        sqlite_url: str, entity: str | None) -> None:
    plan = _plan_of(sqlite_url, "memories.tags",
                    lambda store: store.recall("ns", entity_id=entity))
    assert "memories_one_active" in plan
    plan = _plan_of(sqlite_url, "memories.tags", lambda store: store.search("ns", "Paris"))
    assert "memories_one_active" in plan
