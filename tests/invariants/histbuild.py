"""A small DSL for writing histories by hand in tests.

    h = HistoryBuilder()
    w = h.write(0, "u1", "drink", "likes tea", seq=1)   # invocation by worker 0
    w.ok()                                               # its completion
    h.read(1, "u1").ok("likes tea")                      # records by value
    history = h.history()

Entries are appended in call order, so interleavings are written as they happen. A read
record given as a value string takes its attribute and causal_seq from the write that
carried that value; give ``(value, causal_seq)`` to override the seq, or a ``Record``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.checkers import check_history
from invariants.history import Entry, History, Paraphrase, Read, WriteMeta
from invariants.verdict import CheckResult, render_interpretation


@dataclass
class Op:
    builder: HistoryBuilder
    invocation: Entry
    completion: Entry | None = None

    @property
    def index(self) -> int:
        return self.invocation.index

    def _complete(self, etype: str, result: object) -> Op:
        assert self.completion is None, f"op {self.index} completed twice"
        self.completion = self.builder._add(
            self.invocation.worker,
            etype,
            self.invocation.f,
            self.invocation.op,
            result,
            self.invocation.meta,
        )
        return self

    def ok(self, *records: str | tuple[str, int] | Record) -> Op:
        if self.invocation.f == "read":
            entity = self.invocation.op.entity_id
            return self._complete("ok", tuple(self.builder.record(entity, r) for r in records))
        assert not records
        return self._complete("ok", Ack(applied=True, version=1))

    def fail(self, reason: str = "stale") -> Op:
        if self.invocation.f == "read":
            return self._complete("fail", f"Refused: {reason}")
        return self._complete("fail", Ack(applied=False, reason=reason))

    def info(self, error: str = "TimeoutError: timed out") -> Op:
        return self._complete("info", error)


@dataclass
class HistoryBuilder:
    entries: list[Entry] = field(default_factory=list)
    values: dict[str, Write] = field(default_factory=dict)

    def _add(self, worker, etype, f, op, result=None, meta=None) -> Entry:
        entry = Entry(
            index=len(self.entries),
            worker=worker,
            time_ns=1_000 * len(self.entries),
            type=etype,
            f=f,
            op=op,
            result=result,
            meta=meta,
        )
        self.entries.append(entry)
        return entry

    def write(
        self,
        worker: int,
        entity: str,
        slot: str,
        value: str,
        seq: int,
        fact: str | None = None,
        *,
        ns: str = "ns",
        attribute: str | None = None,
        paraphrase: Paraphrase = "none",
    ) -> Op:
        op = Write(
            namespace=ns,
            entity_id=entity,
            attribute=attribute or slot,
            value=value,
            causal_seq=seq,
            op_id=f"w{len(self.entries)}",
        )
        self.values.setdefault(value, op)
        meta = WriteMeta(fact=fact or f"{slot}={value}", slot=slot, paraphrase=paraphrase)
        return Op(self, self._add(worker, "invoke", "write", op, None, meta))

    def delete(self, worker: int, entity: str, seq: int, *, ns: str = "ns") -> Op:
        op = Delete(namespace=ns, entity_id=entity, causal_seq=seq, op_id=f"d{len(self.entries)}")
        return Op(self, self._add(worker, "invoke", "delete", op))

    def restore(self, worker: int, entity: str, seq: int, *, ns: str = "ns") -> Op:
        op = Restore(namespace=ns, entity_id=entity, causal_seq=seq, op_id=f"r{len(self.entries)}")
        return Op(self, self._add(worker, "invoke", "restore", op))

    def read(self, worker: int, entity: str, *, ns: str = "ns") -> Op:
        return Op(self, self._add(worker, "invoke", "read", Read(namespace=ns, entity_id=entity)))

    def record(self, entity: str, spec: str | tuple[str, int] | Record) -> Record:
        if isinstance(spec, Record):
            return spec
        value, seq = (spec, None) if isinstance(spec, str) else spec
        write = self.values.get(value)
        return Record(
            entity_id=entity,
            attribute=write.attribute if write else "unknown",
            value=value,
            causal_seq=seq if seq is not None else (write.causal_seq if write else 0),
            version=1,
        )

    def history(self, *, allow_incomplete: bool = False) -> History:
        return History(self.entries, allow_incomplete=allow_incomplete)


def check(builder: HistoryBuilder, name: str, **options: object) -> CheckResult:
    """One checker's verdict on the builder's history (all ops must be complete)."""
    return check_history(builder.history(), names=[name], **options)[name]


def texts(result: CheckResult) -> list[str]:
    return [render_interpretation(v) for v in result.violations]
