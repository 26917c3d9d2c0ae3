"""Verdicts: what a checker concludes, as data, and how that data reads as text.

A broken invariant is never an exception; it is a :class:`Violation` inside a
:class:`CheckResult`. Each violation names the operations that witness it (by the index
of their invocation, "op 12") and carries a structured explanation; only
:func:`render_explanation` turns that into prose, in the form Elle uses: "Let W1 = op
12, a write of ... Then read op 40 returned ..., but ..., a contradiction."

Validity is three-valued and combines as in Jepsen: ``INVALID`` outranks ``UNKNOWN``,
which outranks ``VALID``, and combining nothing is ``UNKNOWN``. A checker that had nothing
to check says ``UNKNOWN``: "never tested" must not read as "passed".
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeAlias

from invariants.display import quote

__all__ = [
    "Answer",
    "CheckResult",
    "ConflictExplanation",
    "DuplicateExplanation",
    "EntityOpRef",
    "Explanation",
    "Key",
    "LeakExplanation",
    "LostExplanation",
    "MisorderExplanation",
    "Outcome",
    "PhantomExplanation",
    "ReadRef",
    "ResurrectionExplanation",
    "ServedRecord",
    "StaleExplanation",
    "Validity",
    "Violation",
    "ViolationGroup",
    "ViolationKind",
    "WriteRef",
    "cited",
    "overlapping_writes",
    "render_explanation",
    "render_interpretation",
    "render_view",
]

ViolationKind: TypeAlias = Literal[
    "conflict", "reorder", "resurrection", "duplicate", "lost", "leak", "phantom"
]
Outcome: TypeAlias = Literal["ok", "fail", "info", "pending"]
"""An operation's completion type as known when the violation was found.

``pending`` means the operation had been invoked but had not completed yet.
"""


class Validity(enum.Enum):
    """A three-valued verdict."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"

    @classmethod
    def combine(cls, validities: Iterable[Validity]) -> Validity:
        """Jepsen's merge: any INVALID wins, then any UNKNOWN; nothing at all is UNKNOWN."""
        seen = set(validities)
        if Validity.INVALID in seen:
            return Validity.INVALID
        if Validity.UNKNOWN in seen or not seen:
            return Validity.UNKNOWN
        return Validity.VALID


@dataclass(frozen=True, slots=True)
class Key:
    """Where a violation happened; ``slot`` is None when no slot is involved."""

    namespace: str
    entity_id: str
    slot: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """What the backend answered an operation: the Ack's fields, or the exception.

    ``error`` is ``"TypeName: message"`` when the call raised (or the text a ``fail``
    carried instead of an Ack); the Ack fields are None then.
    """

    applied: bool | None = None
    version: int | None = None
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class WriteRef:
    """A write, as an explanation cites it.

    The backend's view comes first: the attribute as the backend received it, the
    op_id, the answer and when the call was made and answered, in seconds since the
    run's first entry. ``slot``, ``fact`` and ``paraphrase`` are the generator's ground
    truth, which the backend never saw. ``completed``/``completed_s`` are None and
    ``answer`` is None while the write is still in flight.
    """

    op: int
    completed: int | None
    outcome: Outcome
    namespace: str
    entity_id: str
    slot: str
    fact: str
    value: str
    causal_seq: int
    paraphrase: str
    attribute: str = ""
    op_id: str = ""
    answer: Answer | None = None
    invoked_s: float | None = None
    completed_s: float | None = None

    def overlaps(self, other: WriteRef) -> bool:
        """Whether the two writes were in flight at one time (one invoked before the
        other completed); a write not completed, or completed ``info`` (it may take
        effect at any later time), is in flight to the end."""
        return self.op < other.end and other.op < self.end

    @property
    def end(self) -> float:
        """The index until which this write may take effect."""
        if self.completed is None or self.outcome in ("info", "pending"):
            return float("inf")
        return self.completed


def overlapping_writes(writes: tuple[WriteRef, ...]) -> bool:
    """Whether any two of ``writes`` were in flight at one time."""
    return any(a.overlaps(b) for i, a in enumerate(writes) for b in writes[i + 1 :])


@dataclass(frozen=True, slots=True)
class EntityOpRef:
    """A delete or a restore, as an explanation cites it."""

    op: int
    completed: int | None
    outcome: Outcome
    f: Literal["delete", "restore"]
    namespace: str
    entity_id: str
    causal_seq: int
    op_id: str = ""
    answer: Answer | None = None
    invoked_s: float | None = None
    completed_s: float | None = None


@dataclass(frozen=True, slots=True)
class ServedRecord:
    """One record a read returned; ``position`` counts from 0 in serving order."""

    position: int
    attribute: str
    value: str
    causal_seq: int
    version: int | None = None


@dataclass(frozen=True, slots=True)
class ReadRef:
    """A read that completed ok; ``op`` is its invocation index.

    ``records`` is every record it returned, in serving order, as the backend returned
    them; the times are seconds since the run's first entry.
    """

    op: int
    completed: int
    namespace: str
    entity_id: str
    records: tuple[ServedRecord, ...] = ()
    invoked_s: float | None = None
    completed_s: float | None = None


@dataclass(frozen=True, slots=True)
class ConflictExplanation:
    """A read served several facts for one slot; ``writes`` holds one write per fact.

    ``records`` are the records of that slot the read served, one per write in the
    same order: their attributes show whether the backend kept the spellings apart.
    ``racers`` are the first two writes to the slot that were in flight together,
    before the read (a check-then-insert race needs such a pair, and the surplus record
    it leaves outlives both); ``raced_writes`` counts the writes to the slot invoked
    while another was in flight, up to the read: each can have left at most one surplus
    record. ``sequential`` is a read, anywhere in the history, that served more facts
    of one spelling for a slot than its races can explain: proof that the store keeps
    records it should replace even without concurrency; ``aliased`` a read that served
    two spellings of a slot from writes that did not overlap: proof that the store
    keeps spellings apart (both known once the history has been read).
    """

    read: ReadRef
    slot: str
    writes: tuple[WriteRef, ...]
    records: tuple[ServedRecord, ...] = ()
    racers: tuple[WriteRef, ...] = ()
    sequential: ReadRef | None = None
    aliased: ReadRef | None = None
    raced_writes: int = 0


@dataclass(frozen=True, slots=True)
class DuplicateExplanation:
    """A read served one fact more than once; ``writes`` produced each copy, in order.

    ``level`` is the widest paraphrase level among the copies: the level a backend must
    reach to be required to merge them.
    """

    read: ReadRef
    slot: str
    fact: str
    level: str
    writes: tuple[WriteRef, ...]


@dataclass(frozen=True, slots=True)
class MisorderExplanation:
    """A read listed ``later`` right after ``earlier`` with a lower causal_seq."""

    read: ReadRef
    earlier: ServedRecord
    later: ServedRecord


@dataclass(frozen=True, slots=True)
class StaleExplanation:
    """A read served fact ``top.fact`` after ``newer`` superseded every write of it.

    ``top`` is the write of the served fact with the highest causal_seq among those
    that could have taken effect; ``served`` is the record the read returned.
    """

    read: ReadRef
    served: ServedRecord
    top: WriteRef
    newer: WriteRef


@dataclass(frozen=True, slots=True)
class ResurrectionExplanation:
    """A read served a record of an entity that a delete had emptied.

    ``cause`` is ``no_restore`` (no restore could have taken effect after ``delete``),
    ``stale_seq`` (``write``'s causal_seq is below ``delete``'s, so it must stay
    refused even after a restore) or ``before_delete`` (``write`` was acknowledged
    before ``delete`` was invoked, so ``restore`` revived it). ``revived`` counts the
    records of this read that break the rule; ``record`` is the first. ``refused`` is
    the first write to the entity invoked after ``delete`` completed and before the
    read that the backend refused: the sign of a tombstone that held for a while.
    ``refusals`` counts the writes, to any entity, that the backend refused after a
    delete of their entity had completed, up to the read: none at all says the store
    keeps no tombstone.
    """

    read: ReadRef
    delete: EntityOpRef
    cause: Literal["no_restore", "stale_seq", "before_delete"]
    record: ServedRecord
    write: WriteRef
    restore: EntityOpRef | None
    revived: int
    refused: WriteRef | None = None
    refusals: int = 0


@dataclass(frozen=True, slots=True)
class LostExplanation:
    """A read served nothing for ``slot`` although ``write`` had to be visible.

    ``concurrent`` are writes to other slots of the same entity that overlapped
    ``write`` in time (the mark of a read-modify-write of the whole entity);
    ``served_later`` is a later read that did serve ``write``, known only once the
    history has been read to its end.
    """

    read: ReadRef
    slot: str
    write: WriteRef
    concurrent: tuple[WriteRef, ...] = ()
    served_later: ReadRef | None = None


@dataclass(frozen=True, slots=True)
class LeakExplanation:
    """A read served a value written only in other namespaces (``writes``)."""

    read: ReadRef
    record: ServedRecord
    writes: tuple[WriteRef, ...]


@dataclass(frozen=True, slots=True)
class PhantomExplanation:
    """A read served a value no write could have produced.

    ``candidates`` are the writes of that value that exist but do not count: ones that
    failed, or that went to another entity of the namespace. Often it is empty.
    ``nearest`` is the write to the read's entity whose value is closest to the record's,
    if one is close: the value the backend most likely altered; a write under the
    record's own attribute name comes first. ``difference`` says how the record's value
    departs from the nearest's, in :func:`invariants.causes.value_difference`'s words
    ("cut after 255 characters (of 2946)", "normalization form changed (NFC applied)",
    "whitespace changed (stripped from the ends)", "characters replaced at ...").
    """

    read: ReadRef
    record: ServedRecord
    candidates: tuple[WriteRef, ...]
    nearest: WriteRef | None = None
    difference: str | None = None


Explanation: TypeAlias = (
    ConflictExplanation
    | DuplicateExplanation
    | MisorderExplanation
    | StaleExplanation
    | ResurrectionExplanation
    | LostExplanation
    | LeakExplanation
    | PhantomExplanation
)


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant, with its minimal witnesses and its explanation as data.

    ``witnesses`` are the invocation indices of the operations that together show the
    contradiction, ascending; none of them can be left out. ``magnitude`` measures how
    bad it is where that means something (facts served at once, copies of a fact,
    causal_seq gap, records revived) and picks a kind's worst violation; None elsewhere.
    ``cause`` and ``detail`` are the root cause that :func:`invariants.causes.classify`
    reads off the explanation's data ("" until a checker has classified it).
    ``repeats`` counts the violations of the history that cite the same operations
    (this one included): most often, many reads that saw one bad write.
    """

    kind: ViolationKind
    key: Key
    witnesses: tuple[int, ...]
    explanation: Explanation
    magnitude: int | None = None
    cause: str = ""
    detail: str = ""
    repeats: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the explanation as data, plus its rendered text."""
        return {
            "kind": self.kind,
            "cause": self.cause,
            "detail": self.detail,
            "repeats": self.repeats,
            "key": asdict(self.key),
            "witnesses": list(self.witnesses),
            "magnitude": self.magnitude,
            "explanation": asdict(self.explanation),
            "text": render_explanation(self),
        }


@dataclass(frozen=True, slots=True)
class ViolationGroup:
    """All violations of one kind, summarised as Jepsen's bank checker does."""

    kind: ViolationKind
    count: int
    first: Violation
    worst: Violation | None
    last: Violation


@dataclass(frozen=True)
class CheckResult:
    """What one checker concluded about one history.

    - ``validity``: INVALID when a violation was found, else UNKNOWN when nothing could
      be checked (``checked == 0``) or the checker crashed, else VALID.
    - ``violation_count``: every violation found; ``violations`` keeps only the first
      few per kind (the checker's ``keep``), ``groups`` the first, worst and last.
    - ``checked``: how many opportunities for a violation the history offered; the
      unit is the checker's own (docs/invariants.md defines each).
    - ``rate``: ``rate_numerator / rate_denominator``, named by the two ``_name``
      fields; 0.0 when the denominator is 0.
    - ``coverage``: counts of the conditions the checker could examine, so that an
      UNKNOWN can say which condition never occurred.
    - ``notes``: anything a reader needs to trust the numbers (a crash, skipped reads).
    - ``causes``: every violation counted by its root cause (``invariants.causes``),
      so that one verdict can say which of several bugs it is.
    """

    checker: str
    validity: Validity
    violation_count: int
    violations: tuple[Violation, ...]
    groups: tuple[ViolationGroup, ...]
    checked: int
    rate: float
    rate_numerator: int
    rate_numerator_name: str
    rate_denominator: int
    rate_denominator_name: str
    coverage: Mapping[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    causes: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with each kept violation's explanation rendered too."""
        return {
            "checker": self.checker,
            "validity": self.validity.value,
            "violation_count": self.violation_count,
            "checked": self.checked,
            "rate": self.rate,
            "rate_numerator": self.rate_numerator,
            "rate_numerator_name": self.rate_numerator_name,
            "rate_denominator": self.rate_denominator,
            "rate_denominator_name": self.rate_denominator_name,
            "coverage": dict(self.coverage),
            "notes": list(self.notes),
            "causes": dict(self.causes),
            "groups": [
                {
                    "kind": g.kind,
                    "count": g.count,
                    "first": g.first.to_dict(),
                    "worst": None if g.worst is None else g.worst.to_dict(),
                    "last": g.last.to_dict(),
                }
                for g in self.groups
            ],
            "violations": [v.to_dict() for v in self.violations],
        }


def _q(text: str) -> str:
    """A value in prose: whole, quoted, every invisible character escaped."""
    return quote(text)


def _outcome(op: WriteRef | EntityOpRef) -> str:
    if op.outcome == "ok":
        return f"acknowledged at index {op.completed}"
    if op.outcome == "fail":
        return f"refused at index {op.completed}"
    if op.outcome == "info":
        return f"with an unknown outcome (info at index {op.completed})"
    return "not completed yet"


def _write(name: str, w: WriteRef) -> str:
    level = "" if w.paraphrase == "none" else f", {w.paraphrase} paraphrase"
    return (
        f"{name} = op {w.op}, a write of {_q(w.value)} (fact {w.fact}, slot {w.slot}, "
        f"causal_seq {w.causal_seq}{level}) to {w.entity_id} in namespace {w.namespace}, "
        f"{_outcome(w)}"
    )


def _entity_op(name: str, op: EntityOpRef) -> str:
    return (
        f"{name} = op {op.op}, a {op.f} of {op.entity_id} in namespace {op.namespace} "
        f"(causal_seq {op.causal_seq}), {_outcome(op)}"
    )


def _read(r: ReadRef) -> str:
    return f"read op {r.op} of {r.entity_id} in namespace {r.namespace}"


def _served(s: ServedRecord) -> str:
    return f"{_q(s.value)} (causal_seq {s.causal_seq})"


def _and(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _let(bindings: list[str]) -> str:
    if len(bindings) == 1:
        return f"Let {bindings[0]}."
    return "Let " + ", ".join(bindings[:-1]) + ", and " + bindings[-1] + "."


def _named_writes(writes: tuple[WriteRef, ...]) -> tuple[list[str], list[str]]:
    """W1, W2, ... per distinct write; returns the bindings and each write's name."""
    names: dict[int, str] = {}
    bindings: list[str] = []
    for w in writes:
        if w.op not in names:
            names[w.op] = f"W{len(names) + 1}"
            bindings.append(_write(names[w.op], w))
    return bindings, [names[w.op] for w in writes]


VALUE_WIDTH = 60
"""Terminal columns of a value in the rendered view; a longer one is cut to its head and
tail, its length stated (results.json has it whole), so that one operation stays on one
line of a terminal."""

NAME_WIDTH = 40
"""Terminal columns of an attribute name in the rendered view, cut as values are."""


def render_explanation(violation: Violation) -> str:
    """The explanation as a person reads it: the backend's view, then memcert's reading.

    First every operation the violation cites, as the backend received and answered
    it (attribute as written, value, causal_seq, op_id, the Ack or the exception, the
    times), and every record the read returned. Then memcert's interpretation, which
    uses the generator's ground truth (slot, fact, paraphrase level) that the backend
    never saw, marked as such: see :func:`render_interpretation`.
    """
    lines = render_view(violation)
    lines.append(f"memcert's reading (ground truth): {render_interpretation(violation)}")
    return "\n".join(lines)


def render_view(violation: Violation) -> list[str]:
    """The backend's view of a violation, one operation or record per line."""
    lines: list[str] = []
    for name, ref in cited(violation.explanation):
        if isinstance(ref, ReadRef):
            lines.extend(_view_read(name, ref))
        elif isinstance(ref, WriteRef):
            lines.append(
                f"{name} op {ref.op}: write {ref.namespace}/{ref.entity_id} "
                f"{_attr(ref.attribute or ref.slot)} = {_clip(ref.value)} "
                f"causal_seq {ref.causal_seq}"
                f" op_id {ref.op_id or '?'}"
            )
            lines.append(f"   {_view_answer(ref)}")
        else:
            lines.append(
                f"{name} op {ref.op}: {ref.f} {ref.namespace}/{ref.entity_id} "
                f"causal_seq {ref.causal_seq} op_id {ref.op_id or '?'}"
            )
            lines.append(f"   {_view_answer(ref)}")
    return lines


Cited: TypeAlias = "tuple[str, WriteRef | EntityOpRef | ReadRef]"


def cited(e: Explanation) -> list[Cited]:
    """The operations an explanation cites, named as its prose names them, in the
    order they were invoked, the read last; for a conflict of one spelling whose writes
    did not overlap, also the pair that raced on the slot (P1, P2), which left the
    surplus."""
    refs: list[Cited] = []
    if isinstance(e, ConflictExplanation | DuplicateExplanation):
        seen: dict[int, str] = {}
        for w in e.writes:
            if w.op not in seen:
                seen[w.op] = f"W{len(seen) + 1}"
                refs.append((seen[w.op], w))
        if (
            isinstance(e, ConflictExplanation)
            and len({r.attribute for r in e.records}) <= 1
            and not overlapping_writes(e.writes)
        ):
            refs += [(f"P{i + 1}", w) for i, w in enumerate(e.racers) if w.op not in seen]
    elif isinstance(e, StaleExplanation):
        refs += [("W1", e.top), ("W2", e.newer)]
    elif isinstance(e, ResurrectionExplanation):
        refs += [("D", e.delete), ("W", e.write)]
        if e.refused is not None:
            refs.append(("X", e.refused))
        if e.restore is not None:
            refs.append(("S", e.restore))
    elif isinstance(e, LostExplanation):
        refs.append(("W", e.write))
        refs += [(f"C{i + 1}", c) for i, c in enumerate(e.concurrent[:2])]
    elif isinstance(e, LeakExplanation):
        refs.append(("W", e.writes[0]))
    elif isinstance(e, PhantomExplanation):
        if e.candidates:
            refs.append(("W", e.candidates[0]))
        elif e.nearest is not None:
            refs.append(("N", e.nearest))
    refs.sort(key=lambda named: named[1].op)
    refs.append(("R", e.read))
    if isinstance(e, LostExplanation) and e.served_later is not None:
        refs.append(("R2", e.served_later))
    return refs


def _clip(value: str) -> str:
    return quote(value, VALUE_WIDTH)


def _attr(name: str) -> str:
    return quote(name, NAME_WIDTH, "'")


def _times(invoked: float | None, completed: float | None) -> str:
    start = "?" if invoked is None else f"{invoked:.3f}"
    end = "in flight" if completed is None else f"{completed:.3f} s"
    return f"t={start}..{end}"


def _view_answer(ref: WriteRef | EntityOpRef) -> str:
    a = ref.answer
    if a is None:
        said = "no answer yet"
    elif a.error is not None:
        said = f"raised {a.error}"
    else:
        fields = [f"applied={a.applied}"]
        if a.version is not None:
            fields.append(f"version={a.version}")
        if a.reason is not None:
            fields.append(f"reason={_attr(a.reason)}")
        said = f"Ack({', '.join(fields)})"
    return f"-> {said}  {_times(ref.invoked_s, ref.completed_s)}"


def _view_read(name: str, r: ReadRef) -> list[str]:
    n = len(r.records)
    lines = [
        f"{name} op {r.op}: read {r.namespace}/{r.entity_id} -> {n} record"
        f"{'' if n == 1 else 's'}  {_times(r.invoked_s, r.completed_s)}"
    ]
    for rec in r.records:
        version = "" if rec.version is None else f" version {rec.version}"
        lines.append(
            f"   [{rec.position}] {_attr(rec.attribute)} = {_clip(rec.value)} "
            f"causal_seq {rec.causal_seq}{version}"
        )
    return lines


def render_interpretation(violation: Violation) -> str:
    """memcert's reading in prose, in Elle's form: "Let ... Then ..., but ..., a
    contradiction."; it speaks of slots and facts, the generator's ground truth."""
    e = violation.explanation
    if isinstance(e, ConflictExplanation):
        bindings, names = _named_writes(e.writes)
        return (
            f"{_let(bindings)} Then {_read(e.read)} returned the values of "
            f"{'both ' if len(names) == 2 else ''}{_and(names)}, {len(names)} different "
            f"facts for slot {e.slot}, but a slot holds one fact at a time, a contradiction."
        )
    if isinstance(e, DuplicateExplanation):
        bindings, names = _named_writes(e.writes)
        distinct = list(dict.fromkeys(names))
        served = (
            f"the value of {distinct[0]} {len(names)} times"
            if len(distinct) == 1
            else f"the values of {'both ' if len(distinct) == 2 else ''}{_and(distinct)}"
        )
        rule = (
            "a fact written twice must leave one record"
            if e.level == "none"
            else f"{e.level} paraphrases of one fact must leave one record"
        )
        return (
            f"{_let(bindings)} Then {_read(e.read)} returned {served}, {len(names)} "
            f"records of fact {e.fact} for slot {e.slot}, but {rule}, a contradiction."
        )
    if isinstance(e, MisorderExplanation):
        r = e.read
        return (
            f"Let R = op {r.op}, a read of {r.entity_id} in namespace {r.namespace}, "
            f"completed at index {r.completed}. Then R returned {_served(e.earlier)} at position "
            f"{e.earlier.position} and {_served(e.later)} at position {e.later.position}, "
            "but a read lists records in ascending causal_seq, a contradiction."
        )
    if isinstance(e, StaleExplanation):
        return (
            f"{_let([_write('W1', e.top), _write('W2', e.newer)])} Then {_read(e.read)}, "
            "invoked after W2 was acknowledged, with no delete of "
            f"{e.read.entity_id} that could have intervened, returned {_q(e.served.value)}, "
            f"a value of fact {e.top.fact}, for slot {e.top.slot}, but W2's causal_seq "
            f"{e.newer.causal_seq} is above W1's {e.top.causal_seq}, the highest of any "
            f"write of fact {e.top.fact}, so W2 must have replaced it, a contradiction."
        )
    if isinstance(e, ResurrectionExplanation):
        return _render_resurrection(e)
    if isinstance(e, LostExplanation):
        return (
            f"{_let([_write('W', e.write)])} Then {_read(e.read)}, invoked after W was "
            f"acknowledged, with no delete of {e.read.entity_id} that could have "
            f"intervened, returned no record for slot {e.slot}, but an acknowledged write "
            "keeps its slot readable until a delete, a contradiction."
        )
    if isinstance(e, LeakExplanation):
        return (
            f"{_let([_write('W', e.writes[0])])} Then {_read(e.read)} returned W's value, "
            f"but no write of that value was made in {e.read.namespace}, and namespaces "
            "never share records, a contradiction."
        )
    return _render_phantom(e)


def _render_resurrection(e: ResurrectionExplanation) -> str:
    more = "" if e.revived == 1 else f" and {e.revived - 1} more record(s)"
    entity = e.read.entity_id
    if e.cause == "no_restore":
        return (
            f"{_let([_entity_op('D', e.delete)])} Then {_read(e.read)}, invoked after D "
            f"was acknowledged, with no restore of {entity} that could have taken effect, "
            f"returned {_q(e.record.value)} (written by op {e.write.op}){more}, but a "
            "deleted entity has no records until a restore, a contradiction."
        )
    after = "" if e.restore is None else f", after restore op {e.restore.op},"
    bindings = [_entity_op("D", e.delete), _write("W", e.write)]
    if e.write.op < e.delete.op:
        bindings.reverse()
    if e.cause == "stale_seq":
        return (
            f"{_let(bindings)} Then "
            f"{_read(e.read)}{after} returned W's value{more}, but W's causal_seq "
            f"{e.write.causal_seq} is below D's {e.delete.causal_seq}, so W must stay "
            "refused even after a restore, a contradiction."
        )
    return (
        f"{_let(bindings)} Then "
        f"{_read(e.read)}{after} returned W's value{more}, but D was invoked after W was "
        "acknowledged and a restore must not revive what the entity held before the "
        "delete, a contradiction."
    )


def _render_phantom(e: PhantomExplanation) -> str:
    r = e.read
    target = f"to {r.entity_id} in namespace {r.namespace} was invoked before the read completed"
    if not e.candidates:
        nearest = ""
        if e.nearest is not None and e.difference:
            nearest = (f"; the nearest written value, N's (op {e.nearest.op}, slot "
                       f"{e.nearest.slot}), differs from it: {e.difference}")
        return (
            f"Let R = op {r.op}, a read of {r.entity_id} in namespace {r.namespace}, "
            f"completed at index {r.completed}. Then R returned {_served(e.record)}, but no "
            f"write of that value {target}{nearest}, a contradiction."
        )
    w = e.candidates[0]
    if w.outcome == "fail" and w.entity_id == r.entity_id and w.namespace == r.namespace:
        because = f"W did not take effect and no other write of that value {target}"
    else:
        because = f"no write of that value {target}"
    return (
        f"{_let([_write('W', w)])} Then {_read(r)} returned W's value, but {because}, "
        "a contradiction."
    )
