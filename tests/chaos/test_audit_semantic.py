"""``memcert audit --level semantic``: values the model reads as one fact are one fact,
so two active records of them are a duplicate, not a conflict; a negation never merges.

These need the ``semantic`` extra; they skip without it locally and fail in CI, as the
other MiniLM tests do.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chaos.audit import AuditOptions, AuditResult, audit_items
from chaos.audit_facts import BatchedEmbedder, fact_keys
from chaos.audit_input import read_file
from invariants.errors import InvalidArgument
from invariants.normalize import Normalizer

SAME = ("likes americano coffee", "likes americano coffee a lot")
"""One fact to the model (cosine above the threshold), two to the lexicon."""
NEGATED = "does not like americano coffee"


def _record(rid: str, entity: str, value: str, seq: int, status: str = "active") -> str:
    return json.dumps({"id": rid, "namespace": "ns", "entity_id": entity,
                       "attribute": "coffee_preference", "value": value, "causal_seq": seq,
                       "status": status})


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    lines = [
        _record("paraphrase-1", "two-wordings", SAME[0], 1),
        _record("paraphrase-2", "two-wordings", SAME[1], 2),
        _record("fact-1", "fact-and-negation", SAME[0], 1),
        _record("negation-1", "fact-and-negation", NEGATED, 2),
        _record("old", "clean", SAME[0], 1, "superseded"),
        _record("new", "clean", NEGATED, 2),
    ]
    path = tmp_path / "dump.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _findings(result: AuditResult) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for line in (result.out / "findings.jsonl").read_text(encoding="utf-8").splitlines():
        finding = json.loads(line)
        found.setdefault(finding["finding"], set()).update(finding["ids"])
    return found


def test_the_pair_is_one_fact_to_the_normalizer_and_two_to_the_lexicon(minilm):
    semantic = Normalizer("semantic", embedder=minilm.load(), threshold=minilm.DEFAULT_THRESHOLD)
    assert semantic.same_fact(*SAME)
    assert not semantic.same_fact(SAME[0], NEGATED)
    assert Normalizer("lexical").value_key(SAME[0]) != Normalizer("lexical").value_key(SAME[1])


def test_at_the_semantic_level_two_wordings_are_a_duplicate_and_a_negation_a_conflict(
        minilm, dump, tmp_path):
    lexical = audit_items(read_file(dump), str(dump), AuditOptions(out=tmp_path / "lexical"))
    semantic = audit_items(read_file(dump), str(dump), AuditOptions(
        out=tmp_path / "semantic", level="semantic", embedder=minilm.load(),
        threshold=minilm.DEFAULT_THRESHOLD))

    assert _findings(lexical) == {
        "uniqueness": {"paraphrase-1", "paraphrase-2", "fact-1", "negation-1"}}
    assert _findings(semantic) == {
        "uniqueness": {"fact-1", "negation-1"},
        "semantic_normalization": {"paraphrase-1", "paraphrase-2"}}
    verdicts = {name: v.verdict for name, v in semantic.report.invariants.items()}
    assert verdicts["uniqueness"] == verdicts["semantic_normalization"] == "fail"
    assert semantic.namespaces["ns"].canonical_duplicates == 1
    assert lexical.namespaces["ns"].canonical_duplicates == 0


def test_an_entity_s_values_are_embedded_in_one_call(minilm):
    calls: list[int] = []
    model = minilm.load()

    def counting(texts):
        calls.append(len(texts))
        return model(texts)

    batched = BatchedEmbedder(counting)
    semantic = Normalizer("semantic", embedder=batched, threshold=minilm.DEFAULT_THRESHOLD)
    records = [("coffee_preference", SAME[0]), ("Coffee Preference", SAME[1]),
               ("coffee_preference", NEGATED), ("city", "lives in Paris")]
    keys = fact_keys(semantic, batched, records)
    assert calls == [4]
    assert keys[0] == keys[1] != keys[2]
    assert keys[3][0] != keys[0][0]


def test_the_semantic_level_without_a_model_is_named():
    with pytest.raises(InvalidArgument, match="semantic"):
        audit_items(iter(()), "x", AuditOptions(level="semantic"))


@pytest.mark.slow
def test_the_command_audits_at_the_semantic_level(minilm, dump, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "audit", str(dump), "--level", "semantic",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert results["level"] == "semantic"
    assert results["invariants"]["semantic_normalization"]["verdict"] == "fail"
    assert "level semantic)" in done.stdout.splitlines()[0]
