"""all-MiniLM-L6-v2 as the semantic level's embedder: what it merges at the default
threshold, what the negation guard keeps apart, and whether the reference store still
certifies with it.

These tests need the ``semantic`` extra (CPU torch, sentence-transformers and the
model package). Without it they skip locally and fail in CI or under
MEMCERT_REQUIRE_PG=1, as the PostgreSQL tests do: a skip there would hide that the
model was never loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import invariants
from invariants.backend import Ack, Record, Write
from invariants.normalize.semantic import similarity
from reference_store import DB_URL_ENV, semantic_factory
from reference_store.normalize import Normalizer


def test_importing_the_store_and_the_embedder_module_does_not_import_torch() -> None:
    code = ("import sys, reference_store, reference_store.normalize.minilm; "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_one_unit_vector_of_384_floats_per_text(minilm: ModuleType) -> None:
    vectors = minilm.load()(["is afraid of flying", "害怕坐飞机", "x"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(abs(sum(x * x for x in v) - 1.0) < 1e-5 for v in vectors)


def test_a_paraphrase_merges_and_a_negation_does_not_at_the_default(minilm: ModuleType) -> None:
    model = minilm.load()
    normalizer = Normalizer("semantic", embedder=model, threshold=minilm.DEFAULT_THRESHOLD)
    assert normalizer.value_key("is afraid of flying") != normalizer.value_key(
        "is scared of flying")
    assert normalizer.same_fact("is afraid of flying", "is scared of flying")
    # The model alone would merge the negation; the guard is what keeps it apart.
    negation = ("is allergic to peanuts", "is not allergic to peanuts")
    assert similarity(model, *negation) >= minilm.DEFAULT_THRESHOLD
    assert not normalizer.same_fact(*negation)


def test_semantic_factory_handles_share_one_database_and_merge_paraphrases(
    minilm: ModuleType, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_URL_ENV, sqlite_url)
    first, second = semantic_factory(), semantic_factory()
    try:
        assert first.normalizer.threshold == minilm.DEFAULT_THRESHOLD
        assert first.normalizer.embedder is second.normalizer.embedder
        assert first.write(Write("ns", "ann", "fear", "is afraid of flying", 1, "w1")) == Ack(
            True, version=1)
        assert second.write(Write("ns", "ann", "fear", "is scared of flying", 2, "w2")) == Ack(
            True, version=1, reason="merged")
        assert first.read("ns", "ann") == [Record("ann", "fear", "is afraid of flying", 2, 1)]
    finally:
        first.close()
        second.close()


@pytest.mark.slow
def test_the_reference_store_certifies_at_the_semantic_level_with_minilm(
    minilm: ModuleType, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DB_URL_ENV, sqlite_url)
    out = tmp_path / "out"
    # processes=0: each worker process would load the model; tests/chaos/test_process_phase.py
    # certifies the processes. The quick suite's plans run whole within the budget, so
    # every coverage condition occurs however loaded the machine.
    invariants.certify("reference_store:semantic_factory", budget_s=60.0, seed=20261130,
                       level="semantic", out=out, stateful_share=0.0, processes=0,
                       suite="quick")
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["level"] == "semantic"
    assert {name: v["verdict"] for name, v in saved["invariants"].items()} == {
        "uniqueness": "pass", "causal_monotonicity": "pass", "deletion_monotonicity": "pass",
        "semantic_normalization": "pass", "durability": "pass", "isolation": "pass"}
    assert saved["verdict"] == "certified"
