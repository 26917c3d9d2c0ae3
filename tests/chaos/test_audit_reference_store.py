"""``memcert audit`` of the reference store, on SQLite and PostgreSQL: every state the
store can hold exports and audits clean; defects seeded by direct SQL are each found,
with the rows' ids; and neither the export nor the audit through the factory changes
the database."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text

from chaos.audit import AuditOptions, AuditResult, audit_factory, audit_items
from chaos.audit_input import read_items
from chaos.certify import CertifyOptions, certify
from invariants.backend import Delete, Restore, Write
from reference_store import ReferenceStore
from reference_store.lifecycle import forget
from reference_store.schema import entities, memories, operations, tombstones


def fill(store: ReferenceStore) -> None:
    """Writes that leave every status and tombstone state, and refusals that leave none."""
    seq = iter(range(1, 1000))

    def w(entity: str, attribute: str, value: str, ns: str = "alpha") -> None:
        n = next(seq)
        store.write(Write(ns, entity, attribute, value, n, f"w{n}"))

    w("u1", "city", "lives in Oslo")
    w("u1", "city", "lives in Rome")
    w("u1", "City", "LIVES IN ROME")  # a paraphrase: merged, no second record
    store.write(Write("alpha", "u1", "city", "lives in Lima", 0, "stale"))  # refused
    w("u2", "coffee_preference", "喜欢美式")
    w("u2", "drink", "likes tea")
    w("u2", "drink", "likes coffee")
    w("u3", "job", "nurse")
    store.delete(Delete("alpha", "u3", next(seq), "d-u3"))
    store.restore(Restore("alpha", "u3", next(seq), "r-u3"))
    w("u3", "job", "teacher")
    w("u4", "pet", "has a cat")
    store.delete(Delete("alpha", "u4", next(seq), "d-u4"))
    w("u4", "pet", "has a dog")  # refused: u4 is tombstoned
    w("u5", "hobby", "chess")
    forget(store, "alpha", "u5")
    w("u6", "food", "likes pizza")
    w("u6", "food", "likes sushi")
    w("u1", "job", "nurse", ns="beta")


@pytest.fixture
def store(db_url: str) -> Iterator[ReferenceStore]:
    with ReferenceStore(db_url) as opened:
        fill(opened)
        yield opened


def export(store: ReferenceStore, path: Path) -> Path:
    out = io.StringIO()
    store.export_jsonl(out)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def audited(path: Path, out: Path) -> AuditResult:
    with path.open("rb") as stream:
        return audit_items(read_items(stream), str(path), AuditOptions(out=out))


def findings(result: AuditResult) -> list[dict[str, object]]:
    lines = (result.out / "findings.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def fingerprint(url: str) -> dict[str, object]:
    """Every row of every table, in a fixed order, and for SQLite the file's hash."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = {table.name: sorted(map(repr, conn.execute(select(table)).all()))
                    for table in (memories, entities, tombstones, operations)}
            rows["count"] = conn.execute(select(func.count()).select_from(memories)).scalar()
    finally:
        engine.dispose()
    if url.startswith("sqlite:///"):
        rows["sha256"] = hashlib.sha256(Path(url.removeprefix("sqlite:///")).read_bytes()
                                        ).hexdigest()
    return rows


def test_every_state_of_the_store_audits_clean(store, db_url, tmp_path):
    before = fingerprint(db_url)
    result = audited(export(store, tmp_path / "export.jsonl"), tmp_path / "out")
    assert fingerprint(db_url) == before
    assert findings(result) == []
    assert result.report.verdict == "certified" and result.exit_code == 0
    verdicts = {name: v.verdict for name, v in result.report.invariants.items()}
    assert verdicts == {"uniqueness": "pass", "causal_monotonicity": "pass",
                        "deletion_monotonicity": "pass", "semantic_normalization": "pass",
                        "durability": "skipped", "isolation": "skipped"}
    assert result.records == store.count_rows()
    assert set(result.namespaces) == {"alpha", "beta"}
    assert result.report.invariants["deletion_monotonicity"].checked >= 1


def seed(url: str) -> dict[str, set[str]]:
    """Break the store behind its back; return each defect's row ids, as the export
    names them (namespace/entity/vVERSION)."""
    engine = create_engine(url)
    seeded: dict[str, set[str]] = {}

    def version(conn, entity: str, value: str) -> int:
        return int(conn.execute(text(
            "SELECT version FROM memories WHERE namespace = 'alpha' AND entity_id = :e "
            "AND value = :v"), {"e": entity, "v": value}).scalar_one())

    def rid(entity: str, number: int) -> str:
        return f"alpha/{entity}/v{number}"

    try:
        with engine.begin() as conn:
            oslo, rome = version(conn, "u1", "lives in Oslo"), version(conn, "u1", "lives in Rome")
            # The store's unique index is on its own key: a store keyed otherwise (here
            # by a stray attr_key) keeps both; memcert's normalizer folds them again.
            conn.execute(text("UPDATE memories SET status = 'active', superseded_by = NULL, "
                              "attr_key = 'stray' WHERE entity_id = 'u1' AND version = :v "
                              "AND namespace = 'alpha'"), {"v": oslo})
            seeded["uniqueness"] = {rid("u1", oslo), rid("u1", rome)}

            tea, coffee = version(conn, "u2", "likes tea"), version(conn, "u2", "likes coffee")
            conn.execute(text("UPDATE memories SET status = 'active', superseded_by = NULL, "
                              "attr_key = 'stray', value = 'Likes  Coffee!' "
                              "WHERE entity_id = 'u2' AND version = :v"), {"v": tea})
            seeded["semantic_normalization"] = {rid("u2", tea), rid("u2", coffee)}

            cat = version(conn, "u4", "has a cat")
            conn.execute(text("UPDATE memories SET status = 'active' WHERE entity_id = 'u4' "
                              "AND version = :v"), {"v": cat})
            seeded["deletion_monotonicity"] = {rid("u4", cat)}

            pizza, sushi = version(conn, "u6", "likes pizza"), version(conn, "u6", "likes sushi")
            conn.execute(text("UPDATE memories SET causal_seq = 0 WHERE entity_id = 'u6' "
                              "AND version = :v"), {"v": sushi})
            seeded["causal_monotonicity"] = {rid("u6", sushi), rid("u6", pizza)}

            conn.execute(text("UPDATE memories SET value = '' WHERE namespace = 'beta'"))
            seeded["field_defect"] = {"beta/u1/v1"}
    finally:
        engine.dispose()
    return seeded


def test_defects_seeded_by_sql_are_each_found_with_their_rows(store, db_url, tmp_path):
    seeded = seed(db_url)
    result = audited(export(store, tmp_path / "export.jsonl"), tmp_path / "out")
    found: dict[str, set[str]] = {}
    for finding in findings(result):
        found.setdefault(str(finding["finding"]), set()).update(finding["ids"])  # type: ignore[arg-type]
    assert found == seeded
    assert result.exit_code == 1
    listed = set((result.out / "offending_ids.txt").read_text().split("\n")[:-1])
    assert listed == set().union(*seeded.values())
    assert result.defects["value"].count == 1
    causes = {name: {c for c, n in v.causes.items() if n}
              for name, v in result.report.invariants.items()}
    assert causes["deletion_monotonicity"] == {"delete_ignored"}
    assert causes["causal_monotonicity"] == {"stale_overwrite"}
    assert causes["semantic_normalization"] == {"duplicate"}


def test_the_audit_through_the_factory_reads_only(store, db_url, tmp_path):
    seed(db_url)
    before = fingerprint(db_url)
    result = audit_factory(lambda: ReferenceStore(db_url), "reference_store",
                           AuditOptions(namespaces=("alpha", "beta"), out=tmp_path / "out"))
    assert fingerprint(db_url) == before
    kinds = {str(f["finding"]) for f in findings(result)}
    # A live read shows no tombstone and no superseded row: conflicts and duplicates show,
    # the resurrection too (the store serves the row it was told is active)...
    assert {"uniqueness", "semantic_normalization"} <= kinds
    assert result.report.invariants["deletion_monotonicity"].verdict == "skipped"
    assert result.exit_code == 1


def test_entities_lists_every_entity_of_a_namespace_across_pages(db_url):
    with ReferenceStore(db_url) as store:
        for n in range(1_005):
            store.write(Write("ns", f"user-{n:04}", "city", "lives in Rome", n + 1, f"w{n}"))
        store.write(Write("other", "stranger", "city", "lives in Oslo", 1, "w-other"))
        store.delete(Delete("ns", "user-0000", 5_000, "d0"))
        assert list(store.entities("ns")) == [f"user-{n:04}" for n in range(1_005)]
        assert list(store.entities("other")) == ["stranger"]


def test_what_a_chaos_run_leaves_in_the_store_audits_clean(sqlite_url, tmp_path):
    """Races, retries, stale and late writes, deletes and restores, as certify sends
    them: whatever the reference store kept of them breaks nothing."""
    report = certify(lambda: ReferenceStore(sqlite_url), CertifyOptions(
        budget_s=4, seed=3, stateful_share=0, workers=4, out=tmp_path / "run"))
    assert report.verdict != "failed"
    with ReferenceStore(sqlite_url) as store:
        assert store.count_rows() > 100
        result = audited(export(store, tmp_path / "export.jsonl"), tmp_path / "out")
    assert findings(result) == []
    assert result.exit_code == 0
