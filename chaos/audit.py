"""``memcert audit``: the invariants over what a store holds, with no workload.

A store's data is not a history, but it is what a history leaves behind, and the
checkers are the one definition of each invariant. So the audit writes the history
the data implies and lets the checkers judge it: per entity, a write of each record in
the order the store applied it (a delete and a restore where a tombstone says so), a
read right after each record the store no longer serves (it was served once, and a
supersede chain whose causal_seq goes backwards shows there), then a read of every
active record. A record's slot and fact are memcert's own canonical keys
(:class:`invariants.normalize.Normalizer` at ``--level``), since a store's data carries
no ground truth: two active records of one slot are a conflict, two of one fact a
duplicate, an active record of a tombstoned entity a resurrection, a served record
older than one it superseded a stale overwrite. Causes, rates and explanations are
then certify's own.

A snapshot cannot show everything. Durability and isolation are about the writes sent
and the reads made, which a dump does not hold: they are skipped, with that reason,
never passed. A live backend read through ``entities`` shows no tombstones either.
An invariant whose checker found nothing to count in a non-empty store (no slot ever
had two facts) passes: every record was looked at, and none breaks it.

Everything lands in ``--out``: ``results.json`` (certify's fields, plus ``audit``),
``junit.xml``, ``findings.jsonl`` (one line per violation or defect, with the record
ids and lines involved) and ``offending_ids.txt`` (each id once), for a repair script.
Files are streamed into a temporary SQLite index to group them by entity; the store
and the file are only ever read.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Final

from invariants.backend import Ack, BackendFactory, Delete, Record, Restore, Write
from invariants.capabilities import enumeration_supported
from invariants.checkers import CheckerSuite, check_history
from invariants.history import Entry, Read, WriteMeta, describe_error
from invariants.levels import ClaimableLevel, Paraphrase
from invariants.normalize import Embedder, Normalizer
from invariants.verdict import (
    ConflictExplanation,
    DuplicateExplanation,
    MisorderExplanation,
    ResurrectionExplanation,
    StaleExplanation,
    Violation,
    render_explanation,
)

from .audit_facts import BatchedEmbedder, fact_keys
from .audit_input import AuditRecord, EntityMark, FieldDefect, Item, Tombstone, enumerated
from .explain import WIDTH
from .metrics import Exporter, MetricsOptions
from .report import INVARIANTS, InvariantVerdict, Report, build_report, render_table

__all__ = ["AuditOptions", "AuditResult", "Unauditable", "audit_factory", "audit_items",
           "render_audit"]

FILE_JUDGED: Final = ("uniqueness", "causal_monotonicity", "deletion_monotonicity",
                      "semantic_normalization")
"""The checkers a store's data can be judged by."""
LIVE_JUDGED: Final = ("uniqueness", "causal_monotonicity", "semantic_normalization")
"""Through ``entities`` and ``read``, deleted entities look empty: no tombstone shows."""

NOT_SHOWN: Final = {
    "durability": "a store's data holds no record of the writes sent to it, so a lost "
                  "write cannot show; certify and the guard check durability",
    "isolation": "each record of a dump names its own namespace, so a leak, which is a "
                 "read served across namespaces, cannot show; certify and the guard check it",
    "deletion_monotonicity": "a live store's reads show no tombstones: audit an export "
                             "of its data to check deletions",
}
PASS_NOTE: Final = ("audit: every record was examined and none breaks it (the checker's "
                    "unit found nothing to count, e.g. no slot ever held two facts)")
EXAMPLES: Final = 3
"""Field defects kept in full per field, for the table and results.json."""


class Unauditable(Exception):
    """The source cannot be audited (no ``entities`` capability, or the backend raised
    while it was read): nothing was decided; exit 3."""


@dataclass(frozen=True)
class AuditOptions:
    """What to audit and how: the normalization level keys canonical forms, and
    ``namespaces`` limits a file to those namespaces (and names the ones a live
    backend is enumerated in). The semantic level needs ``embedder`` (and takes
    ``threshold``): two values are one fact when the normalizer's ``same_fact`` says so
    (:mod:`chaos.audit_facts`)."""

    level: ClaimableLevel = "lexical"
    embedder: Embedder | None = None
    threshold: float = 0.9
    namespaces: tuple[str, ...] = ()
    out: Path = Path("memcert-audit")
    command: str = "memcert audit"
    metrics: MetricsOptions | None = None
    """Serve or push the audit's counts as certify's ``memcert_*`` metrics, under
    ``suite="audit"`` and ``scenario="audit"``, so a nightly audit lands on the
    dashboard beside the chaos runs."""


@dataclass
class NamespaceCounts:
    """Per namespace: records, active ones, entities, and the active records that
    repeat another of their entity: ``exact`` word for word under one attribute,
    ``canonical`` once both are put through the normalizer."""

    entities: int = 0
    records: int = 0
    active: int = 0
    exact_duplicates: int = 0
    canonical_duplicates: int = 0
    defects: int = 0


@dataclass
class DefectStats:
    """One field's defects: how many, and the first few in full."""

    count: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class AuditResult:
    """The audit's verdict: certify's report, plus what only an audit counts."""

    report: Report
    source: str
    records: int
    entities: int
    defects: dict[str, DefectStats]
    namespaces: dict[str, NamespaceCounts]
    findings: int
    offending: int
    out: Path

    @property
    def exit_code(self) -> int:
        return self.report.exit_code

    def to_json(self) -> dict[str, Any]:
        """results.json: certify's fields, and the audit's own under ``audit``."""
        return {**self.report.to_json(), "audit": {
            "source": self.source,
            "records": self.records,
            "entities": self.entities,
            "defects": {name: {"count": s.count, "examples": s.examples}
                        for name, s in sorted(self.defects.items())},
            "defect_count": sum(s.count for s in self.defects.values()),
            "namespaces": {name: vars(c) for name, c in sorted(self.namespaces.items())},
            "findings": self.findings,
            "offending_records": self.offending,
            "findings_file": "findings.jsonl",
            "offending_file": "offending_ids.txt",
        }}


def audit_items(items: Iterable[Item], source: str, options: AuditOptions) -> AuditResult:
    """Audit a file's items (:func:`chaos.audit_input.read_file`), grouped by entity."""
    with tempfile.TemporaryDirectory(prefix="memcert-audit-") as folder, \
            _Auditor(source, options, FILE_JUDGED) as auditor:
        index = _Index(Path(folder) / "index.sqlite3")
        try:
            wanted = set(options.namespaces)
            for item in items:
                if wanted and item.namespace is not None and item.namespace not in wanted:
                    continue  # a defect without a namespace may be any namespace's: kept
                if isinstance(item, FieldDefect):
                    auditor.defect(item)
                else:
                    index.add(item)
            for namespace, entity_id, records, tombs, marks in index.entities():
                auditor.entity(namespace, entity_id, records, tombs, marks, served=False)
        finally:
            index.close()
        return auditor.result()


def audit_factory(factory: BackendFactory, source: str, options: AuditOptions) -> AuditResult:
    """Audit a live backend: every entity its ``entities`` lists in each namespace."""
    backend = factory()
    try:
        if not enumeration_supported(backend):
            raise Unauditable(
                f"memcert audit: {source} returns a {type(backend).__name__}, which has no "
                "entities(namespace) method, so its entities cannot be listed; add one "
                "(docs/audit.md), or audit an export of its data")
        with _Auditor(source, options, LIVE_JUDGED) as auditor:
            for namespace in options.namespaces:
                try:
                    for entity_id, records, defects in enumerated(backend, namespace):
                        for defect in defects:
                            auditor.defect(defect)
                        auditor.entity(namespace, entity_id, records, [], [], served=True)
                except Exception as error:  # the backend's: the store was not read whole
                    raise Unauditable(
                        f"memcert audit: {source} raised {describe_error(error)} while "
                        f"namespace {namespace!r} was listed and read; nothing was "
                        "decided") from error
            return auditor.result()
    finally:
        backend.close()


class _Index:
    """A file's items in a temporary SQLite database, to read them back by entity."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path)
        self._db.executescript("""
            PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
            CREATE TABLE rec (ns TEXT, eid TEXT, ord INTEGER, line INTEGER, seq INTEGER,
                              attribute TEXT, value TEXT, status TEXT, rid TEXT);
            CREATE TABLE tomb (ns TEXT, eid TEXT, ord INTEGER, seq INTEGER,
                               restore_seq INTEGER, line INTEGER);
            CREATE TABLE mark (ns TEXT, eid TEXT, deleted INTEGER, delete_seq INTEGER,
                               line INTEGER);
        """)

    def add(self, item: AuditRecord | Tombstone | EntityMark) -> None:
        if isinstance(item, AuditRecord):
            self._db.execute("INSERT INTO rec VALUES (?,?,?,?,?,?,?,?,?)", (
                item.namespace, item.entity_id, item.order, item.line, item.causal_seq,
                item.attribute, item.value, item.status, item.record_id))
        elif isinstance(item, Tombstone):
            self._db.execute("INSERT INTO tomb VALUES (?,?,?,?,?,?)", (
                item.namespace, item.entity_id, item.order, item.causal_seq,
                item.restore_seq, item.line))
        else:
            self._db.execute("INSERT INTO mark VALUES (?,?,?,?,?)", (
                item.namespace, item.entity_id, item.deleted, item.delete_seq, item.line))

    def entities(self) -> Iterator[tuple[str, str, list[AuditRecord], list[Tombstone],
                                         list[EntityMark]]]:
        db = self._db
        db.executescript("""
            CREATE INDEX rec_entity ON rec (ns, eid, ord, line);
            CREATE INDEX tomb_entity ON tomb (ns, eid, ord);
            CREATE INDEX mark_entity ON mark (ns, eid);
        """)
        keys = db.execute("SELECT ns, eid FROM rec UNION SELECT ns, eid FROM tomb "
                          "ORDER BY 1, 2").fetchall()
        for ns, eid in keys:
            records = [AuditRecord(ns, eid, attribute, value, seq, status, rid, order, line)
                       for order, line, seq, attribute, value, status, rid in db.execute(
                           "SELECT ord, line, seq, attribute, value, status, rid FROM rec "
                           "WHERE ns = ? AND eid = ? ORDER BY ord, line", (ns, eid))]
            tombs = [Tombstone(ns, eid, order, seq, restore_seq, line)
                     for order, seq, restore_seq, line in db.execute(
                         "SELECT ord, seq, restore_seq, line FROM tomb WHERE ns = ? AND "
                         "eid = ? ORDER BY ord", (ns, eid))]
            marks = [EntityMark(ns, eid, bool(deleted), delete_seq, line)
                     for deleted, delete_seq, line in db.execute(
                         "SELECT deleted, delete_seq, line FROM mark WHERE ns = ? AND "
                         "eid = ?", (ns, eid))]
            yield ns, eid, records, tombs, marks

    def close(self) -> None:
        self._db.close()


@dataclass
class _Served:
    """One read of the implied history: which records it served, by position."""

    records: list[AuditRecord]


class _Auditor:
    """Writes the implied history entity by entity into one checker suite, and the
    findings as they are found."""

    def __init__(self, source: str, options: AuditOptions, judged: Sequence[str]) -> None:
        self.source = source
        self.options = options
        self.judged = tuple(judged)
        self.embedder = None if options.embedder is None else BatchedEmbedder(options.embedder)
        self.normalizer = Normalizer(options.level, embedder=self.embedder,
                                     threshold=options.threshold)
        self.surface = Normalizer("surface")
        self.suite = CheckerSuite(names=self.judged, level=options.level)
        self.index = 0
        self.records = 0
        self.entities = 0
        self.defects: dict[str, DefectStats] = {}
        self.namespaces: dict[str, NamespaceCounts] = {}
        self.findings = 0
        self.offending: set[str] = set()
        self.started = time.monotonic()
        self.exporter: Exporter | None = None
        if options.metrics is not None:
            suite = self.suite
            self.exporter = Exporter.start(
                options.metrics, backend=source, suite="audit", level=options.level, seed=0,
                violations=suite.violation_counts, rate_terms=suite.rate_terms,
                causes=suite.cause_counts)
            self.exporter.begin_scenario("audit")
        options.out.mkdir(parents=True, exist_ok=True)
        self._findings: IO[str] = (options.out / "findings.jsonl").open("w", encoding="utf-8")

    def __enter__(self) -> _Auditor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._findings.close()
        if self.exporter is not None:
            self.exporter.close()

    # -- field defects ---------------------------------------------------------------

    def defect(self, defect: FieldDefect) -> None:
        stats = self.defects.setdefault(defect.field, DefectStats())
        stats.count += 1
        where = {"field": defect.field, "problem": defect.problem, "line": defect.line,
                 "id": defect.record_id, "namespace": defect.namespace,
                 "entity_id": defect.entity_id}
        if len(stats.examples) < EXAMPLES:
            stats.examples.append(where)
        if defect.namespace is not None:
            self._counts(defect.namespace).defects += 1
        ids = [defect.record_id] if defect.record_id is not None else []
        self._finding({"finding": "field_defect", **where, "ids": ids,
                       "lines": [defect.line] if defect.line is not None else []})

    # -- one entity ----------------------------------------------------------------------

    def entity(self, namespace: str, entity_id: str, records: list[AuditRecord],
               tombs: list[Tombstone], marks: list[EntityMark], *, served: bool) -> None:
        """Write the entity's implied history into the suite; if the checkers found
        something in it, check it again alone, to name every record involved."""
        self.entities += 1
        counts = self._counts(namespace)
        counts.entities += 1
        self.records += len(records)
        counts.records += len(records)
        entries, reads = self._history(namespace, entity_id, records, tombs, marks, served)
        before = self.suite.violation_count
        self.suite.observe_all(entries)
        if self.suite.violation_count > before:
            self._name_records(entries, reads)

    def _history(self, namespace: str, entity_id: str, records: list[AuditRecord],
                 tombs: list[Tombstone], marks: list[EntityMark], served: bool
                 ) -> tuple[list[Entry], dict[int, _Served]]:
        events: list[tuple[int, int, AuditRecord | Tombstone]] = [
            *((r.order, 1, r) for r in records), *((t.order, 0, t) for t in tombs)]
        if not served:
            events.sort(key=lambda event: (event[0], event[1]))
        entries: list[Entry] = []
        reads: dict[int, _Served] = {}
        first_copy: dict[tuple[str, str], str] = {}
        applied = sorted(records, key=lambda r: r.order)
        keys = {id(r): key for r, key in zip(applied, fact_keys(
            self.normalizer, self.embedder, [(r.attribute, r.value) for r in applied]),
            strict=True)}
        top = max((r.causal_seq for r in records), default=0)
        deleted = any(m.deleted for m in marks)
        open_tomb = any(t.restore_seq is None for t in tombs)
        for _, _, event in events:
            if isinstance(event, Tombstone):
                self._delete(entries, namespace, entity_id, event.causal_seq,
                             event.restore_seq, event.line)
                continue
            self._write(entries, event, keys[id(event)], first_copy)
            if event.status != "active":
                self._read(entries, reads, namespace, entity_id, [event])
        if deleted and not open_tomb:
            seq = next((m.delete_seq for m in marks if m.delete_seq is not None), top + 1)
            self._delete(entries, namespace, entity_id, seq, None, marks[0].line)
        active = [r for r in records if r.status == "active"]
        self._count_duplicates(namespace, active, keys)
        if not served:
            active.sort(key=lambda r: (r.causal_seq, r.order))
        if active or deleted or tombs:  # an empty read of a deleted entity is a check too
            self._read(entries, reads, namespace, entity_id, active)
        return entries, reads

    def _entry(self, entries: list[Entry], kind: str, f: str, op: Any,
               result: Any = None, meta: WriteMeta | None = None) -> int:
        index = self.index
        self.index += 1
        entries.append(Entry(index, 0, index * 1000, kind, f, op, result,  # type: ignore[arg-type]
                             meta))
        return index

    def _write(self, entries: list[Entry], r: AuditRecord, key: tuple[str, str],
               first_copy: dict[tuple[str, str], str]) -> None:
        slot, fact = key
        first = first_copy.setdefault((slot, fact), r.value)
        paraphrase: Paraphrase = (
            "none" if first == r.value
            else "surface" if self.surface.value_key(first) == self.surface.value_key(r.value)
            else self.options.level)
        op = Write(r.namespace, r.entity_id, r.attribute, r.value, r.causal_seq, r.record_id)
        meta = WriteMeta(fact, slot, paraphrase)
        self._entry(entries, "invoke", "write", op, None, meta)
        self._entry(entries, "ok", "write", op, _ack(r.order), meta)

    def _delete(self, entries: list[Entry], namespace: str, entity_id: str, seq: int,
                restore_seq: int | None, line: int | None) -> None:
        tag = f"line {line}" if line is not None else "end"
        delete = Delete(namespace, entity_id, seq, f"audit-delete-{tag}")
        self._entry(entries, "invoke", "delete", delete)
        self._entry(entries, "ok", "delete", delete, _ack(None))
        if restore_seq is not None:
            restore = Restore(namespace, entity_id, restore_seq, f"audit-restore-{tag}")
            self._entry(entries, "invoke", "restore", restore)
            self._entry(entries, "ok", "restore", restore, _ack(None))

    def _read(self, entries: list[Entry], reads: dict[int, _Served], namespace: str,
              entity_id: str, records: list[AuditRecord]) -> None:
        op = Read(namespace, entity_id)
        served = tuple(Record(entity_id, r.attribute, r.value, r.causal_seq, r.order)
                       for r in records)
        invoke = self._entry(entries, "invoke", "read", op)
        self._entry(entries, "ok", "read", op, served)
        reads[invoke] = _Served(records)

    def _count_duplicates(self, namespace: str, active: list[AuditRecord],
                          keys: dict[int, tuple[str, str]]) -> None:
        counts = self._counts(namespace)
        counts.active += len(active)
        exact = Counter((r.attribute, r.value) for r in active)
        canonical = Counter(keys[id(r)] for r in active)
        counts.exact_duplicates += sum(n - 1 for n in exact.values())
        counts.canonical_duplicates += sum(n - 1 for n in canonical.values())

    def _counts(self, namespace: str) -> NamespaceCounts:
        return self.namespaces.setdefault(namespace, NamespaceCounts())

    # -- findings ------------------------------------------------------------------------

    def _name_records(self, entries: list[Entry], reads: dict[int, _Served]) -> None:
        """Check one entity's history alone, keeping every violation, and write each
        with the records it involves."""
        by_id = {r.record_id: r for served in reads.values() for r in served.records}
        base = entries[0].index
        alone = [Entry(e.index - base, e.worker, e.time_ns, e.type, e.f, e.op, e.result, e.meta)
                 for e in entries]
        results = check_history(alone, names=self.judged, level=self.options.level,
                                keep=len(entries) + 1)
        for result in results.values():
            for violation in result.violations:
                involved = _involved(violation, reads[violation.explanation.read.op + base])
                records = [by_id[i] for i in involved if i in by_id]
                self._finding({
                    "finding": result.checker, "cause": violation.cause,
                    "detail": violation.detail, "namespace": violation.key.namespace,
                    "entity_id": violation.key.entity_id, "slot": violation.key.slot,
                    "ids": involved, "lines": [r.line for r in records if r.line is not None],
                    "text": render_explanation(violation)})

    def _finding(self, finding: dict[str, Any]) -> None:
        self.findings += 1
        self.offending.update(finding["ids"])
        self._findings.write(json.dumps(finding, ensure_ascii=False) + "\n")

    # -- the verdict -----------------------------------------------------------------------

    def result(self) -> AuditResult:
        self._findings.flush()
        out = self.options.out
        (out / "offending_ids.txt").write_text(
            "".join(f"{i}\n" for i in sorted(self.offending)), encoding="utf-8")
        report = build_report(
            backend=self.source, seed=0, level=self.options.level,
            checks=self.suite.results(), coverage={}, scenarios=(), restore_supported=True,
            history_entries=self.index, elapsed_s=time.monotonic() - self.started,
            command=self.options.command)
        report = self._judged(report)
        if self.exporter is not None:
            self.exporter.finish(success=report.verdict == "certified",
                                 duration_s=report.elapsed_s)
        result = AuditResult(report, self.source, self.records, self.entities, self.defects,
                             self.namespaces, self.findings, len(self.offending), out)
        report.write(out)
        (out / "results.json").write_text(
            json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return result

    def _judged(self, report: Report) -> Report:
        """The audit's reading of certify's verdicts: what a snapshot cannot show is
        skipped with the reason; nothing to count in a non-empty store is a pass; any
        field defect fails the audit; no record at all leaves it unknown."""
        invariants: dict[str, InvariantVerdict] = {}
        for name, verdict in report.invariants.items():
            if verdict.verdict == "fail":
                verdict = replace(verdict, found_by=("audit",))
            if not set(INVARIANTS[name]) & set(self.judged):
                verdict = replace(verdict, verdict="skipped", notes=(NOT_SHOWN[name],))
            elif verdict.verdict == "unknown" and self.records and _nothing_to_count(
                    report, name):
                verdict = replace(verdict, verdict="pass", notes=(*verdict.notes, PASS_NOTE))
            invariants[name] = verdict
        outcomes = {v.verdict for v in invariants.values()}
        defects = sum(s.count for s in self.defects.values())
        overall = ("failed" if "fail" in outcomes or defects
                   else "unknown" if "unknown" in outcomes or not self.records
                   else "certified")
        return replace(report, invariants=invariants, verdict=overall)  # type: ignore[arg-type]


def _nothing_to_count(report: Report, invariant: str) -> bool:
    """Whether the invariant's checkers are unknown only for having nothing to count
    (not for a crash): none found a violation and none checked anything."""
    results = [report.checks[c] for c in INVARIANTS[invariant] if c in report.checks]
    return bool(results) and all(
        r.violation_count == 0 and r.checked == 0
        and not any("crashed" in note for note in r.notes) for r in results)


def _ack(version: int | None) -> Ack:
    return Ack(True, version=version)


def _involved(violation: Violation, read: _Served) -> list[str]:
    """The record ids a violation involves, in the order its explanation cites them:
    the records its ``read`` served, where it names them, and the writes it cites."""
    e = violation.explanation
    served = read.records
    ids: list[str] = []
    if isinstance(e, ConflictExplanation):
        ids += [served[r.position].record_id for r in e.records]
        ids += [w.op_id for w in e.writes]
    elif isinstance(e, DuplicateExplanation):
        ids += [w.op_id for w in e.writes]
    elif isinstance(e, StaleExplanation):
        ids += [served[e.served.position].record_id, e.newer.op_id]
    elif isinstance(e, MisorderExplanation):
        ids += [served[e.earlier.position].record_id, served[e.later.position].record_id]
    elif isinstance(e, ResurrectionExplanation):
        if e.cause == "no_restore":
            ids += [r.record_id for r in served]
        else:
            ids += [served[e.record.position].record_id, e.write.op_id]
    return list(dict.fromkeys(ids))


def render_audit(result: AuditResult, *, verbose: bool = False) -> str:
    """Certify's verdict table, then what only an audit shows: the field defects and
    the counts per namespace."""
    lines = [render_table(result.report, verbose=verbose), ""]
    defects = sum(s.count for s in result.defects.values())
    lines.append(f"audited {result.records:,} record(s) of {result.entities:,} entities; "
                 f"{defects:,} field defect(s)")
    for name, stats in sorted(result.defects.items(), key=lambda kv: -kv[1].count):
        first = stats.examples[0]
        where = f"line {first['line']}" if first["line"] is not None else first["id"]
        head = f"  {name}: {stats.count:,} record(s); first at {where}: "
        lines.append(head + _clip(first["problem"], WIDTH - len(head)))
    if result.namespaces:
        lines.append("")
        rows = [("namespace", "entities", "records", "active", "exact dup", "canonical dup",
                 "defects")]
        for name, c in sorted(result.namespaces.items()):
            rows.append((_clip(name, 30), f"{c.entities:,}", f"{c.records:,}",
                         f"{c.active:,}", f"{c.exact_duplicates:,}",
                         f"{c.canonical_duplicates:,}", f"{c.defects:,}"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines.extend("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
                     for row in rows)
    lines.append("")
    lines.append(f"{result.findings:,} finding(s), {result.offending:,} offending record id(s)")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
