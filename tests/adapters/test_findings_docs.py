"""docs/findings tells what its saved runs say: every verdict table and every cell of the
comparison table carries the figures of the run's `results.json`, kept in
docs/findings/data/ (its `invariants` part, without the examples)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from invariants.causes import CAUSES

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = ROOT / "docs" / "findings"
DATA = FINDINGS / "data"

PAGES = {
    "langgraph-inmemory.md": ("langgraph-inmemory",),
    "langgraph-sqlite.md": ("langgraph-sqlite",),
    "langgraph-postgres.md": ("langgraph-postgres",),
    "langgraph-inmemory-search.md": ("langgraph-inmemory-search",),
    "langgraph-sqlite-search.md": ("langgraph-sqlite-search",),
    "langmem.md": ("langmem", "langmem-search"),
    "mem0.md": ("mem0", "mem0-infer"),
    "agno.md": ("agno-memory", "agno-entity"),
    "autogen-chromadb.md": ("autogen-chromadb-memory", "chromadb-upsert"),
    "graphiti.md": ("graphiti", "graphiti-search"),
    "crewai.md": ("crewai", "crewai-scoped"),
}
"""Each page's verdict tables, in the order they appear, and the saved run of each."""

README_ROWS = {
    "LangGraph `InMemoryStore` |": "langgraph-inmemory",
    "LangGraph `SqliteStore` |": "langgraph-sqlite",
    "LangGraph `PostgresStore` |": "langgraph-postgres",
    "LangGraph `InMemoryStore`, read through semantic search": "langgraph-inmemory-search",
    "LangGraph `SqliteStore`, read through semantic search": "langgraph-sqlite-search",
    "LangMem `manage_memory` tool over `InMemoryStore` |": "langmem",
    "LangMem `manage_memory` tool over `InMemoryStore` with a MiniLM": "langmem-search",
    "mem0 `Memory`, `infer=False`": "mem0",
    "mem0 `Memory`, `infer=True`": "mem0-infer",
    "agno user memories, `MemoryManager`": "agno-memory",
    "agno `EntityMemoryStore`": "agno-entity",
    "AutoGen `ChromaDBVectorMemory`": "autogen-chromadb-memory",
    "Chroma collection, one id per slot": "chromadb-upsert",
    "graphiti-core on Kuzu, listing current edges": "graphiti",
    "graphiti-core on Kuzu, `search()`": "graphiti-search",
    "crewai `Memory`, a record per attribute": "crewai",
    "crewai `Memory`, the entity's scoped memory": "crewai-scoped",
}
"""The comparison table's rows, by how each begins, and the saved run of each."""

PROPERTIES = {
    "uniqueness": "uniqueness",
    "causal monotonicity": "causal_monotonicity",
    "deletion monotonicity": "deletion_monotonicity",
    "semantic normalization": "semantic_normalization",
    "durability (with phantoms)": "durability",
    "isolation": "isolation",
}

CAUSE_COUNT = re.compile(r"`(\w+)` ([\d,]+)")


def saved(name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text("utf-8"))
    return result


def number(text: str) -> int:
    return int(text.replace(",", ""))


def verdict_tables(page: str) -> list[dict[str, list[str]]]:
    """Every verdict table of a page: its rows' cells, by invariant."""
    tables: list[dict[str, list[str]]] = []
    for block in re.split(r"\n\n", (FINDINGS / page).read_text("utf-8")):
        if not block.startswith("| property | verdict |"):
            continue
        rows = [[cell.strip() for cell in line.strip("|").split("|")]
                for line in block.splitlines()[2:]]
        tables.append({PROPERTIES[row[0]]: row[1:] for row in rows})
    return tables


def test_every_saved_run_is_consistent_and_every_one_is_on_a_page() -> None:
    names = {path.stem for path in DATA.glob("*.json")}
    assert names == {name for runs in PAGES.values() for name in runs}
    for name in names:
        run = saved(name)
        assert run["seed"] == 1 and run["level"] == "lexical", name
        for invariant, figures in run["invariants"].items():
            assert figures["rate_denominator"] == figures["checked"], (name, invariant)
            assert figures["rate_numerator"] <= figures["rate_denominator"], (name, invariant)
            if figures["rate_denominator"]:
                assert figures["rate"] == pytest.approx(
                    figures["rate_numerator"] / figures["rate_denominator"]), (name, invariant)
            assert sum(figures["causes"].values()) == figures["violations"], (name, invariant)
            checkers = ("durability", "phantom") if invariant == "durability" else (invariant,)
            assert list(figures["causes"]) == [c for k in checkers for c in CAUSES[k]], name


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_pages_verdict_tables_carry_the_saved_figures(page: str) -> None:
    tables = verdict_tables(page)
    assert len(tables) == len(PAGES[page])
    for name, table in zip(PAGES[page], tables, strict=True):
        run = saved(name)
        assert list(table) == list(run["invariants"]), name
        for invariant, cells in table.items():
            figures = run["invariants"][invariant]
            verdict, violations, causes, failed, checked, rate, definition = cells
            assert verdict.strip("*").split()[0].strip("*") == figures["verdict"], (name, invariant)
            assert number(violations) == figures["violations"], (name, invariant)
            shown = {cause: number(n) for cause, n in CAUSE_COUNT.findall(causes)}
            assert shown == {c: figures["causes"][c] for c in shown}, (name, invariant)
            assert {c for c, n in figures["causes"].items() if n} <= set(shown), (name, invariant)
            assert number(failed) == figures["rate_numerator"], (name, invariant)
            assert number(checked) == figures["rate_denominator"], (name, invariant)
            assert rate == ("0" if not figures["rate"] else f"{figures['rate']:.4f}"), name
            assert definition == figures["rate_definition"], (name, invariant)


def test_the_comparison_table_carries_the_saved_verdicts_rates_and_causes() -> None:
    lines = (FINDINGS / "README.md").read_text("utf-8").splitlines()
    for start, name in README_ROWS.items():
        row = next(line for line in lines if line.startswith(f"| {start}"))
        cells = [cell.strip() for cell in row.strip("|").split("|")][1:7]
        run = saved(name)
        for cell, (invariant, figures) in zip(cells, run["invariants"].items(), strict=True):
            assert cell.startswith(figures["verdict"]) or cell.startswith(
                f"**{figures['verdict']}**"), (name, invariant, cell)
            rate = re.match(r"\*\*fail\*\* (\d\.\d{3})", cell)
            if rate:
                assert rate.group(1) == f"{figures['rate']:.3f}", (name, invariant)
            for cause, count in CAUSE_COUNT.findall(cell):
                assert figures["causes"][cause] == number(count), (name, invariant, cause)
