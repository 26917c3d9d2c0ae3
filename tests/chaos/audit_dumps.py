"""Generated JSON Lines dumps for the audit's tests: a clean bulk, and seeded defects
whose record ids the tests know, so they can assert exactly what must be listed."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMESPACES = ("tenant-a", "tenant-b", "tenant-c", "tenant-d")


@dataclass
class Dump:
    """A dump's lines, and per seeded defect the ids the audit must name for it."""

    lines: list[str] = field(default_factory=list)
    seeded: dict[str, set[str]] = field(default_factory=dict)
    records: int = 0

    def add(self, record: dict[str, Any] | str, defect: str | None = None) -> None:
        self.lines.append(record if isinstance(record, str)
                          else json.dumps(record, ensure_ascii=False))
        self.records += 1
        if defect is not None:
            rid = record["id"] if isinstance(record, dict) and "id" in record else (
                f"line {len(self.lines)}")
            self.seeded.setdefault(defect, set()).add(str(rid))

    def write(self, path: Path) -> Path:
        path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path


def clean(records: int, *, seed: int = 7) -> Dump:
    """About ``records`` records of many entities: supersede chains in ascending
    causal_seq, deleted entities whose records are all deleted, some with timestamps
    instead of causal_seq, none breaking anything."""
    rng = random.Random(seed)
    dump = Dump()
    entity = 0
    while dump.records < records:
        namespace = NAMESPACES[entity % len(NAMESPACES)]
        entity_id = f"user-{entity}"
        deleted = rng.random() < 0.05
        stamped = namespace == "tenant-d"
        seq = 0
        for slot in range(rng.randint(1, 6)):
            chain = rng.randint(1, 3)
            for link in range(chain):
                seq += rng.randint(1, 3)
                last = link == chain - 1
                status = "deleted" if deleted and last else "active" if last else "superseded"
                record: dict[str, Any] = {
                    "id": f"{entity_id}-{slot}-{link}", "namespace": namespace,
                    "entity_id": entity_id, "attribute": f"field_{slot}",
                    "value": f"answer q{entity}x{slot}y{link}", "status": status}
                if stamped:
                    record["timestamp"] = 1_700_000_000 + seq
                else:
                    record["causal_seq"] = seq
                if deleted:
                    record["deleted"] = True
                dump.add(record)
        entity += 1
    return dump


def seeded(dump: Dump) -> Dump:
    """Add one of each defect the audit finds, each in an entity of its own."""
    ns = "tenant-a"

    def rec(rid: str, entity: str, attribute: str, value: str, seq: int,
            **more: Any) -> dict[str, Any]:
        return {"id": rid, "namespace": ns, "entity_id": entity, "attribute": attribute,
                "value": value, "causal_seq": seq, **more}

    dump.add(rec("c1", "conflicted", "city", "lives in Paris", 1), "uniqueness")
    dump.add(rec("c2", "conflicted", "city", "lives in Rome", 2), "uniqueness")
    dump.add(rec("a1", "aliased", "coffee_preference", "drinks americano", 1), "uniqueness")
    dump.add(rec("a2", "aliased", "Coffee Preference", "drinks espresso", 2), "uniqueness")
    dump.add(rec("d1", "doubled", "drink", "likes green tea", 1), "semantic_normalization")
    dump.add(rec("d2", "doubled", "drink", "Likes  Green-Tea", 2), "semantic_normalization")
    dump.add(rec("x1", "repeated", "pet", "has a cat", 1), "semantic_normalization")
    dump.add(rec("x2", "repeated", "pet", "has a cat", 2), "semantic_normalization")
    dump.add(rec("r1", "resurrected", "city", "lives in Oslo", 1, deleted=True),
             "deletion_monotonicity")
    dump.add(rec("s1", "backwards", "job", "works as a baker", 10, status="superseded"),
             "causal_monotonicity")
    dump.add(rec("s2", "backwards", "job", "works as a pilot", 5), "causal_monotonicity")
    for line in _field_defects():
        dump.add(line, "field_defect")
    return dump


def _field_defects() -> Iterator[dict[str, Any] | str]:
    base = {"namespace": "tenant-b", "entity_id": "broken", "attribute": "city",
            "value": "lives in Lima", "causal_seq": 1}
    yield {**{k: v for k, v in base.items() if k != "namespace"}, "id": "f-namespace"}
    yield {**{k: v for k, v in base.items() if k != "entity_id"}, "id": "f-entity"}
    yield {**base, "id": "f-value", "value": ""}
    yield {**base, "id": "f-seq", "causal_seq": "seven"}
    yield {**base, "id": "f-status", "status": "gone"}
    yield {**base, "id": "f-time", "causal_seq": None, "timestamp": "yesterday"}
    yield "{not json"


FIELD_DEFECTS = {"f-namespace": "namespace", "f-entity": "entity_id", "f-value": "value",
                 "f-seq": "causal_seq", "f-status": "status", "f-time": "timestamp"}
"""Each seeded field defect's id, and the field the audit must name."""
