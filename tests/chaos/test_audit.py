"""``memcert audit`` of JSON Lines dumps and live backends: 100k records with one of
each defect seeded are all found, with exactly the seeded record ids and nothing else;
the clean bulk alone passes; a live store is audited through ``entities``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.audit import AuditOptions, AuditResult, Unauditable, audit_factory, audit_items
from chaos.audit_input import read_file, read_items
from chaos.examples import in_memory
from chaos.examples.known_bad import RawAttributeKeys, UnsortedReads
from chaos.examples.memory import InMemoryBackend, MemoryStore
from invariants.backend import Delete, Write
from invariants.capabilities import enumeration_supported

from .audit_dumps import FIELD_DEFECTS, clean, seeded

BULK = 100_000


def audit(path: Path, out: Path, **options: object) -> AuditResult:
    return audit_items(read_file(path), str(path), AuditOptions(out=out, **options))  # type: ignore[arg-type]


def findings(result: AuditResult) -> list[dict[str, object]]:
    text = (result.out / "findings.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture(scope="module")
def bulk(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The clean bulk, and the same with one of each defect appended."""
    folder = tmp_path_factory.mktemp("dumps")
    return (clean(BULK).write(folder / "clean.jsonl"),
            seeded(clean(BULK)).write(folder / "seeded.jsonl"))


def test_a_clean_dump_of_100k_records_has_nothing_to_report(bulk, tmp_path):
    result = audit(bulk[0], tmp_path / "out")
    assert result.records >= BULK
    assert findings(result) == []
    assert (tmp_path / "out" / "offending_ids.txt").read_text() == ""
    assert result.exit_code == 0
    assert {n: v.verdict for n, v in result.report.invariants.items()} == {
        "uniqueness": "pass", "causal_monotonicity": "pass", "deletion_monotonicity": "pass",
        "semantic_normalization": "pass", "durability": "skipped", "isolation": "skipped"}
    # The bulk has supersede chains and deleted entities, so the checkers had work.
    assert result.report.invariants["causal_monotonicity"].checked > BULK / 2
    assert result.report.invariants["deletion_monotonicity"].checked > 100
    counts = result.namespaces
    assert sum(c.records for c in counts.values()) == result.records
    assert all(c.exact_duplicates == c.canonical_duplicates == 0 for c in counts.values())
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["verdict"] == "certified" and saved["audit"]["records"] == result.records


def test_each_seeded_defect_in_100k_records_is_found_with_its_record_ids(bulk, tmp_path):
    dump = seeded(clean(BULK))
    result = audit(bulk[1], tmp_path / "out")
    found: dict[str, set[str]] = {}
    for finding in findings(result):
        found.setdefault(str(finding["finding"]), set()).update(finding["ids"])  # type: ignore[arg-type]
    assert found == dump.seeded
    listed = (tmp_path / "out" / "offending_ids.txt").read_text().split("\n")[:-1]
    assert sorted(listed) == sorted(set().union(*dump.seeded.values()))
    assert result.exit_code == 1 and result.report.verdict == "failed"
    defects = {f["id"]: f["field"] for f in findings(result) if f["finding"] == "field_defect"}
    assert {i: defects[i] for i in FIELD_DEFECTS} == FIELD_DEFECTS
    assert defects[f"line {len(dump.lines)}"] == "line"  # the line that is not JSON
    invariants = result.report.invariants
    assert {n: invariants[n].violations for n in ("uniqueness", "causal_monotonicity",
                                                  "deletion_monotonicity",
                                                  "semantic_normalization")} == {
        "uniqueness": 2, "causal_monotonicity": 1, "deletion_monotonicity": 1,
        "semantic_normalization": 2}
    assert invariants["causal_monotonicity"].causes["stale_overwrite"] == 1
    assert invariants["deletion_monotonicity"].causes["delete_ignored"] == 1
    tenant_a = result.namespaces["tenant-a"]
    assert (tenant_a.exact_duplicates, tenant_a.canonical_duplicates) == (1, 2)
    assert result.namespaces["tenant-b"].defects == 5


def lines(*records: dict[str, object]) -> list[bytes]:
    return [json.dumps(r).encode() + b"\n" for r in records]


def record(rid: str, entity: str, attribute: str, value: str, seq: int,
           **more: object) -> dict[str, object]:
    return {"id": rid, "namespace": "ns", "entity_id": entity, "attribute": attribute,
            "value": value, "causal_seq": seq, **more}


def test_timestamps_order_a_chain_when_there_is_no_causal_seq(tmp_path):
    dump = lines(
        {**record("t1", "e", "city", "lives in Rome", 0), "causal_seq": None,
         "timestamp": "2026-01-02T00:00:00+00:00", "status": "superseded"},
        {**record("t2", "e", "city", "lives in Oslo", 0), "causal_seq": None,
         "timestamp": "2026-01-01T00:00:00+00:00"})
    result = audit_items(read_items(dump), "dump", AuditOptions(out=tmp_path))
    assert [f["ids"] for f in findings(result)] == [["t2", "t1"]]
    assert findings(result)[0]["cause"] == "stale_overwrite"


def test_namespace_limits_a_file_to_the_ones_named(tmp_path):
    dump = lines(record("a", "e", "city", "lives in Rome", 1),
                 {**record("b", "e", "city", "lives in Oslo", 2), "namespace": "other"},
                 {**record("c", "e", "City", "lives in Lima", 3), "namespace": "other"})
    only = audit_items(read_items(dump), "dump", AuditOptions(namespaces=("ns",), out=tmp_path))
    assert only.records == 1 and only.exit_code == 0
    every = audit_items(read_items(dump), "dump", AuditOptions(out=tmp_path / "all"))
    assert every.exit_code == 1 and {f["entity_id"] for f in findings(every)} == {"e"}


def test_nothing_to_audit_is_undecided_and_defects_alone_fail(tmp_path):
    empty = audit_items(read_items([]), "empty", AuditOptions(out=tmp_path / "empty"))
    assert empty.exit_code == 3 and empty.report.verdict == "unknown"
    broken = audit_items(read_items([b'{"namespace": "ns"}\n']), "broken",
                         AuditOptions(out=tmp_path / "broken"))
    assert broken.exit_code == 1 and broken.records == 0
    assert set(broken.defects) == {"entity_id"}


def test_a_restored_entity_keeps_only_what_was_written_after_the_restore(tmp_path):
    export = [json.dumps(line).encode() + b"\n" for line in (
        {"kind": "entity", "namespace": "ns", "entity_id": "e", "next_version": 4,
         "deleted": False, "delete_seq": 2, "restore_seq": 3},
        _memory("e", "pet", "has a cat", 1, 1, "active"),  # revived by the restore
        _memory("e", "job", "nurse", 4, 3, "active"),
        {"kind": "tombstone", "namespace": "ns", "entity_id": "e", "version": 2,
         "causal_seq": 2, "op_id": "d", "reason": None, "created_at": 1.0,
         "restored_at": 2.0, "restore_seq": 3, "restore_op_id": "r"})]
    result = audit_items(read_items(export), "export", AuditOptions(out=tmp_path))
    [finding] = findings(result)
    assert finding["finding"] == "deletion_monotonicity"
    assert "ns/e/v1" in finding["ids"] and "ns/e/v3" not in finding["ids"]  # type: ignore[operator]


def _memory(entity: str, attribute: str, value: str, seq: int, version: int,
            status: str) -> dict[str, object]:
    return {"kind": "memory", "namespace": "ns", "entity_id": entity, "attribute": attribute,
            "attr_key": attribute, "value": value, "value_key": value, "version": version,
            "causal_seq": seq, "op_id": f"w{version}", "status": status, "superseded_by": None}


# -- live backends, through entities(namespace) ------------------------------------------


def filled(backend: InMemoryBackend) -> InMemoryBackend:
    backend.write(Write("ns", "alice", "coffee_preference", "drinks americano", 1, "w1"))
    backend.write(Write("ns", "alice", "Coffee Preference", "drinks espresso", 2, "w2"))
    backend.write(Write("ns", "bob", "city", "lives in Rome", 3, "w3"))
    backend.write(Write("ns", "bob", "job", "nurse", 1, "w4"))
    backend.write(Write("ns", "carol", "city", "lives in Oslo", 1, "w5"))
    backend.delete(Delete("ns", "carol", 2, "d1"))
    backend.write(Write("other", "dave", "city", "lives in Lima", 1, "w6"))
    return backend


def test_a_correct_live_store_passes_what_reads_can_show(tmp_path):
    store = MemoryStore("lexical")
    filled(InMemoryBackend(store=store))
    result = audit_factory(lambda: InMemoryBackend(store=store), "memory",
                           AuditOptions(namespaces=("ns",), out=tmp_path))
    assert result.exit_code == 0, findings(result)
    assert result.entities == 3 and result.records == 3  # carol is deleted: an empty read
    assert result.report.invariants["deletion_monotonicity"].verdict == "skipped"


@pytest.mark.parametrize(("backend", "invariant", "cause", "ids"), [
    (RawAttributeKeys, "uniqueness", "alias", {"ns/alice#0", "ns/alice#1"}),
    (UnsortedReads, "causal_monotonicity", "read_order", {"ns/bob#0", "ns/bob#1"}),
])
def test_a_known_bad_live_store_is_caught_with_the_right_cause(backend, invariant, cause,
                                                                ids, tmp_path):
    store = MemoryStore("lexical")
    filled(backend(store=store))
    result = audit_factory(lambda: backend(store=store), backend.__name__,
                           AuditOptions(namespaces=("ns",), out=tmp_path))
    assert result.exit_code == 1
    [finding] = [f for f in findings(result) if f["finding"] == invariant]
    assert finding["cause"] == cause and set(finding["ids"]) == ids  # type: ignore[arg-type]


def test_a_backend_without_entities_cannot_be_audited_live(tmp_path):
    factory = in_memory
    assert enumeration_supported(factory())

    class Opaque:
        def __init__(self) -> None:
            self.inner = factory()

        def __getattr__(self, name: str) -> object:
            if name == "entities":
                raise AttributeError(name)
            return getattr(self.inner, name)

    assert not enumeration_supported(Opaque())  # type: ignore[arg-type]
    with pytest.raises(Unauditable, match=r"entities\(namespace\)"):
        audit_factory(Opaque, "opaque", AuditOptions(namespaces=("ns",), out=tmp_path))  # type: ignore[arg-type]


def test_a_backend_that_raises_while_read_leaves_the_audit_undecided(tmp_path):
    store = MemoryStore("lexical")
    filled(InMemoryBackend(store=store))

    class Failing(InMemoryBackend):
        def read(self, namespace, entity_id):
            raise ConnectionError("the store went away")

    with pytest.raises(Unauditable, match="raised ConnectionError: the store went away"):
        audit_factory(lambda: Failing(store=store), "failing",
                      AuditOptions(namespaces=("ns",), out=tmp_path))


def test_a_dump_with_a_kind_field_of_its_own_is_a_dump(tmp_path):
    dump = lines({**record("k1", "e", "city", "lives in Rome", 1), "kind": "fact"})
    result = audit_items(read_items(dump), "dump", AuditOptions(out=tmp_path))
    assert result.records == 1 and result.exit_code == 0
