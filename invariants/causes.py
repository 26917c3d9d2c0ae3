"""Root causes: which bug a violation is, read off its explanation's data.

One verdict can hide several bugs. Two facts served for one slot is a check-then-insert
race when both writes used one attribute spelling and overlapped in time, and an
unfolded attribute alias when the backend kept two spellings as two keys; the fixes
have nothing in common. :func:`classify` tells them apart from the explanation's fields
only (never from the rendered prose), so the rule is testable on a minimal history and
the same everywhere the cause is shown: the verdict table, results.json, the nightly
report and the ``cause`` label of the metrics.

:data:`CAUSES` lists each checker's causes in a fixed order (the label set is small and
closed, as a Prometheus label's must be); :data:`FIXES` says, per cause, what to change
in the backend in the contract's terms. docs/fix-your-backend.md has the long form,
with one section per cause, anchored by the cause's name.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from invariants.display import quote
from invariants.verdict import (
    ConflictExplanation,
    DuplicateExplanation,
    LeakExplanation,
    LostExplanation,
    MisorderExplanation,
    PhantomExplanation,
    ResurrectionExplanation,
    StaleExplanation,
    Violation,
    overlapping_writes,
)

__all__ = [
    "CAUSES",
    "FIXES",
    "FIX_PAGE",
    "alteration",
    "classify",
    "similarity",
    "spelling_difference",
    "value_difference",
]

CAUSES: Final[dict[str, tuple[str, ...]]] = {
    "uniqueness": ("race", "alias", "not_replaced"),
    "causal_monotonicity": ("stale_overwrite", "over_merged", "read_order"),
    "deletion_monotonicity": (
        "no_tombstone",
        "tombstone_expired",
        "in_flight_write",
        "delete_ignored",
        "restore_revived",
        "stale_after_restore",
    ),
    "durability": ("lost_update", "never_visible", "visible_late"),
    "isolation": ("leak",),
    "phantom": ("altered_value", "non_idempotent_retry", "wrong_entity", "invented"),
    "semantic_normalization": ("duplicate",),
}
"""Every cause, per checker, in the order a report lists them."""

FIX_PAGE: Final = "docs/fix-your-backend.md"

FIXES: Final[dict[str, str]] = {
    "race": "make check and replace atomic: a unique index on the folded key plus an upsert, "
    "or a lock per entity",
    "alias": "fold attribute names (case, width, separators, synonyms) before keying them",
    "not_replaced": "a write replaces its key's active record: one per (namespace, entity, "
    "attribute)",
    "stale_overwrite": "compare causal_seq first; refuse a lower one: Ack(False, reason='stale')",
    "over_merged": "your normalizer merges different facts (often a negation): keep "
    "negation and quantities in value keys",
    "read_order": "return a read's records sorted by causal_seq, then version",
    "no_tombstone": "keep a tombstone; refuse later writes: Ack(False, reason='tombstoned')",
    "tombstone_expired": "never expire or evict a tombstone: it refuses writes until an "
    "explicit restore",
    "in_flight_write": "order writes and deletes of one entity (a lock or transaction per "
    "entity); refuse writes landing after a delete",
    "delete_ignored": "a delete answered applied=True takes every active record of the "
    "entity out of reads",
    "restore_revived": "a restore reopens the entity for new writes only; it brings back "
    "nothing the delete removed",
    "stale_after_restore": "after a restore, keep refusing writes with a causal_seq below "
    "the delete's (reason='stale')",
    "lost_update": "never write a whole entity back from an earlier copy: update one "
    "attribute, or compare-and-set a version",
    "never_visible": "answer applied=True only once the write is stored and readable; if "
    "unsure, raise",
    "visible_late": "read from the primary, or acknowledge only once replicas and caches "
    "have the write",
    "leak": "scope every lookup by namespace as well as entity: the namespace is part of "
    "every key",
    "altered_value": "store and return values byte for byte: no truncation, re-encoding or "
    "normalization of the text",
    "non_idempotent_retry": "answer a repeated op_id with its first outcome: keep each "
    "op_id's Ack and return it again",
    "wrong_entity": "key records by entity_id exactly as given; never serve one entity's "
    "value for another",
    "invented": "return only records some write stored: no made-up defaults, summaries or "
    "merged values",
    "duplicate": "normalize values: a paraphrase of the slot's fact merges into its record",
}
"""A short fix paragraph per cause, in the contract's terms."""

_SEPARATORS = re.compile(r"[\W_]+")


def classify(violation: Violation) -> tuple[str, str]:
    """The violation's root cause and a short detail (which may be "")."""
    e = violation.explanation
    if isinstance(e, ConflictExplanation):
        return _conflict(e)
    if isinstance(e, StaleExplanation):
        return _stale(e)
    if isinstance(e, MisorderExplanation):
        return "read_order", (
            f"seq {e.earlier.causal_seq} listed before seq {e.later.causal_seq}"
        )
    if isinstance(e, ResurrectionExplanation):
        return _resurrection(e)
    if isinstance(e, LostExplanation):
        return _lost(e)
    if isinstance(e, LeakExplanation):
        spaces = sorted({w.namespace for w in e.writes})
        return "leak", f"written in namespace {', '.join(map(repr, spaces))}"
    if isinstance(e, PhantomExplanation):
        return _phantom(e)
    assert isinstance(e, DuplicateExplanation)
    how = "the same wording" if e.level == "none" else f"{e.level} paraphrases"
    spellings = _distinct(w.attribute for w in e.writes)
    if len(spellings) > 1:
        how += f" under attributes {' vs '.join(map(repr, spellings[:2]))}"
    return "duplicate", how


def spelling_difference(a: str, b: str) -> str:
    """How two spellings of one attribute differ: case, width, separators or synonym."""
    if a.casefold() == b.casefold():
        return "case"
    na, nb = unicodedata.normalize("NFKC", a), unicodedata.normalize("NFKC", b)
    if na == nb or na.casefold() == nb.casefold():
        return "width"
    if _SEPARATORS.sub("", na.casefold()) == _SEPARATORS.sub("", nb.casefold()):
        return "separators"
    return "synonym"


def _conflict(e: ConflictExplanation) -> tuple[str, str]:
    """Alias when the served records carry different spellings (race if their writes
    overlapped); for one spelling, not_replaced when more facts are kept than the
    slot's races can have left, else race when writes to the slot raced.

    Two overrides use what the whole history shows: once some read proves that the
    store keeps records of one spelling without any concurrency (``sequential``),
    every conflict is not_replaced; once some read proves that it keeps two spellings
    apart without any concurrency (``aliased``), every conflict of two spellings is an
    alias, raced or not.
    """
    if e.sequential is not None:
        return "not_replaced", (
            f"read op {e.sequential.op} kept two records of one spelling from writes "
            "one after another"
        )
    spellings = _distinct(r.attribute for r in e.records) or _distinct(
        w.attribute for w in e.writes
    )
    writes = e.writes
    overlapping = overlapping_writes(writes)
    if len(spellings) >= 2:
        shown = " vs ".join(map(_spelled, spellings))
        if overlapping and e.aliased is None:
            return "race", f"spellings {shown}, these writes in flight together"
        return "alias", f"{spelling_difference(spellings[0], spellings[1])}: {shown}"
    spelling = f"one spelling {_spelled(spellings[0])}" if spellings else "one spelling"
    surplus = len(writes) - 1
    if surplus > e.raced_writes:
        return "not_replaced", (
            f"{spelling}, {len(writes)} facts kept; races explain {e.raced_writes} at most"
        )
    if overlapping:
        return "race", f"{spelling}, these writes in flight together"
    if e.racers:
        return "race", f"{spelling}, left by ops {e.racers[0].op} and {e.racers[1].op} racing"
    return "not_replaced", f"{spelling}, writes one after another, both kept"


def _spelled(name: str) -> str:
    """An attribute as the backend spelled it, every invisible character escaped."""
    return quote(name, mark="'")


def _distinct(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n for n in names if n))


def _stale(e: StaleExplanation) -> tuple[str, str]:
    newer = e.newer
    answer = newer.answer
    if answer is not None and answer.applied and (
        answer.reason == "merged" or e.served.causal_seq >= newer.causal_seq
    ):
        return "over_merged", (
            f"seq {newer.causal_seq} acknowledged, served as the older value "
            f"{quote(e.served.value, 36)}"
        )
    return "stale_overwrite", f"seq {e.served.causal_seq} served over seq {newer.causal_seq}"


def _resurrection(e: ResurrectionExplanation) -> tuple[str, str]:
    w, d, refused = e.write, e.delete, e.refused
    restored = e.restore is not None and (
        e.restore.outcome == "ok" or (e.refusals > 0 and w.causal_seq < d.causal_seq)
    )
    if e.cause != "no_restore" and restored:
        if w.completed is not None and w.outcome == "ok" and w.completed < d.op:
            return "restore_revived", f"{e.revived} record(s) from before the delete"
        return "stale_after_restore", (
            f"write seq {w.causal_seq} below delete seq {d.causal_seq}"
        )
    after = d.completed is not None and w.op > d.completed
    acknowledged_before = w.outcome == "ok" and w.completed is not None and w.completed < d.op
    if not after and not acknowledged_before:
        if not e.refusals:
            return "no_tombstone", f"op {w.op} landed after the delete; no write was ever refused"
        return "in_flight_write", f"op {w.op} in flight while the delete ran"
    if refused is not None and (not after or refused.op < w.op):
        reason = refused.answer.reason if refused.answer is not None else None
        later = f"op {w.op} later accepted" if after else f"op {w.op}'s record back later"
        return "tombstone_expired", (
            f"op {refused.op} was refused ({reason or 'applied=False'}), {later}"
        )
    if after:
        return "no_tombstone", f"op {w.op} sent after the delete, accepted"
    return "delete_ignored", f"op {w.op} acknowledged before the delete, still served"


def _lost(e: LostExplanation) -> tuple[str, str]:
    if e.served_later is not None:
        return "visible_late", f"read op {e.served_later.op} served it later"
    if e.concurrent:
        other = e.concurrent[0]
        return "lost_update", (
            f"op {other.op} wrote {other.attribute or other.slot!r} of the same entity "
            "concurrently"
        )
    return "never_visible", "no later read served it"


def _phantom(e: PhantomExplanation) -> tuple[str, str]:
    read = e.read
    refused = [
        w
        for w in e.candidates
        if w.outcome == "fail" and (w.namespace, w.entity_id) == (read.namespace, read.entity_id)
    ]
    if refused:
        w = refused[0]
        reason = w.answer.reason if w.answer is not None else None
        return "non_idempotent_retry", (
            f"op {w.op} ({w.op_id}) answered applied=False ({reason}), yet stored"
        )
    others = [w for w in e.candidates if w.entity_id != read.entity_id]
    if others:
        return "wrong_entity", f"written to entity {others[0].entity_id!r}"
    if e.nearest is not None:
        how = alteration(e.nearest.value, e.record.value)
        if how:
            return "altered_value", f"{how} of op {e.nearest.op}'s value"
    return "invented", "no written value is near it"


def alteration(written: str, served: str, *, edits: bool = True) -> str:
    """How ``served`` was derived from ``written``, or "" if it does not look derived.

    The checks run from the most specific to the least: a replacement character or
    a UTF-8/Latin-1 round trip is re-encoding; a prefix is truncation; then
    whitespace, Unicode form and case; a close edit (similarity 0.8 or more) is
    "edit", unless ``edits`` is False, which keeps the test to cheap exact checks.
    """
    if "\ufffd" in served and served.replace("\ufffd", "") in (written, written.strip()):
        return "re-encoding (U+FFFD added)"
    try:
        if written.encode("utf-8").decode("latin-1") == served:
            return "re-encoding (UTF-8 read as Latin-1)"
    except UnicodeDecodeError:
        pass
    if served and written.startswith(served):
        return f"truncation ({len(served)} of {len(written)} characters)"
    if " ".join(served.split()) == " ".join(written.split()):
        return "whitespace"
    if unicodedata.normalize("NFKC", served) == unicodedata.normalize("NFKC", written):
        return "Unicode normalization"
    if served.casefold() == written.casefold():
        return "case"
    if edits and similarity(written, served) >= EDIT_SIMILARITY:
        return "edit"
    return ""


def value_difference(written: str, served: str) -> str:
    """How ``served`` departs from ``written``, in words a backend author can act on.

    The specific differences come first: whitespace stripped from the ends, a prefix
    ("cut after N characters"), a normalization form (NFC, NFKC, NFD, NFKD) applied,
    whitespace collapsed or otherwise changed, and case. Anything else is "characters
    replaced", located by the longest common prefix and suffix, which costs one pass
    over a 64 KiB value where an edit distance would not finish.
    """
    if written == served:
        return "no difference"
    if served in (written.strip(), written.rstrip(), written.lstrip()):
        return "whitespace changed (stripped from the ends)"
    if served and written.startswith(served):
        return f"cut after {len(served)} characters (of {len(written)})"
    for form in ("NFC", "NFKC", "NFD", "NFKD"):
        if unicodedata.normalize(form, written) == served:
            return f"normalization form changed ({form} applied)"
    if "".join(written.split()) == "".join(served.split()):
        if served == " ".join(written.split()):
            return "whitespace changed (stripped and collapsed to single spaces)"
        return "whitespace changed"
    if written.casefold() == served.casefold():
        return "case changed"
    start = 0
    limit = min(len(written), len(served))
    while start < limit and written[start] == served[start]:
        start += 1
    end = 0
    while end < limit - start and written[-1 - end] == served[-1 - end]:
        end += 1
    was, now = written[start:len(written) - end], served[start:len(served) - end]
    return (f"characters replaced at character {start}: {_snippet(was)} "
            f"became {_snippet(now)}")


def _snippet(text: str, width: int = 24) -> str:
    return quote(text, width, "'")


EDIT_SIMILARITY: Final = 0.8
"""How alike two values must be for one to count as an edit of the other: closer than
two different facts of one slot usually are, loose enough for a word dropped or
changed."""


def similarity(a: str, b: str) -> float:
    """difflib's ratio, after its cheap upper bounds have had their chance to say no.

    Two long values drawn from one small alphabet (two emoji payloads, say) pass those
    bounds although they share no text, and their ratio is quadratic; so long values
    must first be alike over their first :data:`_HEAD` characters, where an edit of one
    into the other stays alike and two different facts' texts part at once.
    """
    if min(len(a), len(b)) > 2 * _HEAD:
        head = difflib.SequenceMatcher(None, a[:_HEAD], b[:_HEAD])
        if head.ratio() < EDIT_SIMILARITY:
            return 0.0
    matcher = difflib.SequenceMatcher(None, a, b)
    if matcher.real_quick_ratio() < EDIT_SIMILARITY or matcher.quick_ratio() < EDIT_SIMILARITY:
        return 0.0
    return matcher.ratio()


_HEAD: Final = 400
"""How much of two long values :func:`similarity` compares before the whole."""
