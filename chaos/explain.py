"""What a failed run says about each cause: counts, the most telling example, the fix.

The verdict table (:func:`chaos.report.render_table`) and the nightly report show a
failed invariant the same way: its violations per root cause (``invariants.causes``),
one example per cause, chosen for how easily a person can read it rather than for
coming first, and each cause's fix paragraph once. ``verbose`` adds the remaining kept
examples, with examples that cite the same operations shown once and counted.

Everything here fits in :data:`WIDTH` columns: a CI log is read in a narrow pane.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from invariants import display
from invariants.causes import CAUSES, FIXES
from invariants.verdict import (
    CheckResult,
    ConflictExplanation,
    DuplicateExplanation,
    EntityOpRef,
    Explanation,
    LeakExplanation,
    LostExplanation,
    MisorderExplanation,
    PhantomExplanation,
    ReadRef,
    ResurrectionExplanation,
    StaleExplanation,
    Violation,
    WriteRef,
    cited,
    overlapping_writes,
    render_interpretation,
    render_view,
)

__all__ = [
    "WIDTH",
    "cause_counts",
    "cause_summary",
    "example_lines",
    "examples_by_cause",
    "fix_lines",
    "gist",
    "more_examples",
    "most_telling",
    "wrap",
]

WIDTH = 100
"""The widest line this module writes."""


def cause_counts(results: Iterable[CheckResult]) -> dict[str, int]:
    """The violations of one invariant's checkers per cause, in :data:`CAUSES` order,
    zeros included; the checkers' own order first."""
    counts: dict[str, int] = {}
    for result in results:
        for cause in CAUSES.get(result.checker, ()):
            counts.setdefault(cause, 0)
        for cause, n in result.causes.items():
            counts[cause] = counts.get(cause, 0) + n
    return counts


def cause_summary(counts: Mapping[str, int], width: int = WIDTH) -> str:
    """``alias 2,082, race 0, not_replaced 0``: the causes found, largest first, then
    those ruled out, as many as fit in ``width``."""
    found = sorted(((c, n) for c, n in counts.items() if n), key=lambda cn: -cn[1])
    parts: list[str] = []
    for i, (cause, n) in enumerate(found):
        more = f", +{len(found) - i} more"
        if parts and len(", ".join([*parts, f"{cause} {n:,}"])) + len(more) > width:
            return ", ".join(parts) + more
        parts.append(f"{cause} {n:,}")
    for cause, n in counts.items():
        if not n:
            candidate = f"{cause} 0"
            if len(", ".join([*parts, candidate])) > width:
                break
            parts.append(candidate)
    return ", ".join(parts)


def most_telling(violations: Sequence[Violation]) -> Violation:
    """The example a person reads fastest: for a race, one whose own writes overlap
    (the race in plain sight, not its leftover); every cited operation answered (no
    unknown outcome to reason about), the fewest operations cited, the shortest
    attributes and values as shown (plain words before long, escaped or full-width
    text), the fewest records in the read, the most repeated (the bug shows on many
    reads), then the earliest."""

    def cost(v: Violation) -> tuple[int, int, int, int, int, int, int]:
        e = v.explanation
        refs = [ref for _, ref in cited(e)]
        unsure = sum(1 for ref in refs if getattr(ref, "outcome", "ok") not in ("ok", "fail"))
        indirect = int(v.cause == "race" and isinstance(e, ConflictExplanation)
                       and not overlapping_writes(e.writes))
        shown = sum(len((_name(w.attribute or w.slot) + _clip(w.value)).encode())
                    for w in refs[:SHOWN_OPS] if isinstance(w, WriteRef))
        return (indirect, unsure, len(v.witnesses), shown, len(e.read.records), -v.repeats,
                v.witnesses[0] if v.witnesses else 0)

    return min(violations, key=cost)


def examples_by_cause(results: Iterable[CheckResult]) -> dict[str, list[Violation]]:
    """The kept violations of some checkers, per cause, in the order they were found."""
    found: dict[str, list[Violation]] = {}
    for result in results:
        for v in result.violations:
            found.setdefault(v.cause, []).append(v)
    return found


def example_lines(
    invariant: str, counts: Mapping[str, int], results: Sequence[CheckResult], *,
    verbose: bool = False,
) -> list[str]:
    """Per cause found, largest first: a line naming the invariant and the cause, its
    most telling example and, with ``verbose``, the other kept examples, each distinct
    set of operations once."""
    by_cause = examples_by_cause(results)
    lines: list[str] = []
    for cause, n in sorted(counts.items(), key=lambda cn: -cn[1]):
        kept = by_cause.get(cause)
        if not n or not kept:
            continue
        best = most_telling(kept)
        shown = [best]
        if verbose:
            seen = {_ops(best)}
            for v in kept:
                if _ops(v) not in seen:
                    seen.add(_ops(v))
                    shown.append(v)
        lines.extend(wrap(f"{invariant}: {cause}, e.g. {best.detail}", "", "    "))
        for i, v in enumerate(shown):
            if i:
                lines.extend(wrap(f"also ({v.detail}):", "  ", "    "))
            lines.extend(_example(v, verbose=verbose))
    return lines


def more_examples(results: Iterable[CheckResult]) -> int:
    """Kept examples, each distinct set of operations once, beyond one per cause:
    what ``verbose`` would add."""
    return sum(len({_ops(v) for v in kept}) - 1 for kept in examples_by_cause(results).values())


def fix_lines(causes: Iterable[str]) -> list[str]:
    """Each cause's fix paragraph once, in the order given; the long form is at
    ``FIX_PAGE#<cause>``, which the caller names once."""
    lines: list[str] = []
    for cause in dict.fromkeys(causes):
        fix = FIXES.get(cause)
        if fix is None:
            continue
        lines.extend(wrap(f"{cause}: {fix}", "  ", "    "))
    return lines


def wrap(text: str, first: str = "", rest: str = "", width: int = WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` terminal columns, long words broken too:
    a wide character counts two (:func:`invariants.display.wrap`)."""
    return display.wrap(text, width, first, rest)


def _ops(v: Violation) -> tuple[int, ...]:
    return tuple(ref.op for _, ref in cited(v.explanation) if not isinstance(ref, ReadRef))


def _example(v: Violation, *, verbose: bool) -> list[str]:
    lines: list[str] = []
    if verbose:
        for line in render_view(v):
            indent = "  " + " " * (len(line) - len(line.lstrip()))
            lines.extend(wrap(line.strip(), indent, indent + "    "))
        if v.repeats > 1:
            lines.append(f"  ({v.repeats:,} reads saw these same operations)")
        reading = render_interpretation(v)
    else:
        lines.extend(_compact(v))
        reading = gist(v)
    lines.extend(wrap(f"truth: {reading}", "  ", "    "))
    return lines


def _compact(v: Violation) -> list[str]:
    """The backend's view in a few lines: each cited operation with its answer on one
    line, then the read, naming which cited write each record it is about came from;
    a record that matches no cited write (an altered value, a merged causal_seq) is
    shown whole. Times only where overlap is the point (a race, a write in flight), and
    causal_seq only where the rule is about it (an order, a delete's tombstone): -v
    shows every field."""
    e = v.explanation
    read = e.read
    timed = v.cause in ("race", "in_flight_write", "lost_update")
    seq = v.kind in ("reorder", "resurrection")
    lines: list[str] = []
    writes: dict[tuple[str, str, int], str] = {}
    ops = [(name, ref) for name, ref in cited(e) if not isinstance(ref, ReadRef)]
    for name, ref in ops[:SHOWN_OPS]:
        if isinstance(ref, WriteRef):
            writes.setdefault((ref.attribute, ref.value, ref.causal_seq), name)
            where = "" if ref.entity_id == read.entity_id else f" to {ref.entity_id}"
            what = f"write{where} {_name(ref.attribute or ref.slot)} = {_clip(ref.value)}"
            what += f" seq {ref.causal_seq}" if seq else ""
        else:
            what = f"{ref.f} seq {ref.causal_seq}"
        lines.extend(wrap(f"{name} op {ref.op}: {what} -> {_answer(ref, timed=timed)}",
                          "  ", "      "))
    if len(ops) > SHOWN_OPS:
        lines.append(f"  (+{len(ops) - SHOWN_OPS} more operations: -v shows them)")
    shown = _relevant(e)
    n = len(read.records)
    own: list[str] = []
    whole: list[str] = []
    unshown = {(w.attribute, w.value, w.causal_seq) for _, w in ops[SHOWN_OPS:]
               if isinstance(w, WriteRef)}
    for r in read.records:
        if r.position not in shown:
            continue
        source = writes.get((r.attribute, r.value, r.causal_seq))
        if source is not None:
            own.append(f"[{r.position}] is {source}'s")
        elif (r.attribute, r.value, r.causal_seq) in unshown:
            continue
        else:
            whole.append(f"    [{r.position}] {_name(r.attribute)} = {_clip(r.value)}"
                         + (f" seq {r.causal_seq}" if seq else ""))
    head = (f"R op {read.op}: read {read.namespace}/{read.entity_id} -> {n} "
            f"record{'' if n == 1 else 's'}")
    if own:
        head += "; " + ", ".join(own)
    elif not shown and n:
        head += ": " + ", ".join(sorted({_name(r.attribute) for r in read.records}))
    if v.repeats > 1:
        head += f" ({v.repeats:,} reads saw this)"
    lines.extend(wrap(head, "  ", "      "))
    for line in whole:
        lines.extend(wrap(line.strip(), "    ", "        "))
    return lines


SHOWN_OPS = 4
"""Operations one compact example shows; a store that appends every write can make a
conflict cite dozens."""

CLIP = 32
"""Terminal columns of a value shown in the compact view: enough for a fact's words, and
for a cut value's head and tail, to keep an operation on one line."""


def _name(attribute: str) -> str:
    """An attribute name quoted, escaped, its middle elided past :data:`NAME_WIDTH`
    columns: a 256-character name would fill the screen and says nothing more than its
    ends."""
    return display.quote(attribute, NAME_WIDTH, "'")


NAME_WIDTH = 40
"""How many terminal columns of an attribute name the explanations show."""


def _clip(value: str) -> str:
    return display.quote(value, CLIP)


def _answer(ref: WriteRef | EntityOpRef, *, timed: bool) -> str:
    a = ref.answer
    when = (f" (t={ref.invoked_s or 0:.3f}..{ref.completed_s or 0:.3f} s)" if timed
            else "")
    if a is None:
        return f"no answer yet{when}"
    if a.error is not None:
        return f"raised {a.error.split(':', 1)[0]}{when}"
    said = "applied" if a.applied else "refused"
    reason = "" if a.reason is None else f" {_name(a.reason)}"
    return f"{said}{reason}{when}"


def _relevant(e: Explanation) -> set[int]:
    """Positions of the records an explanation is about."""
    if isinstance(e, ConflictExplanation):
        return {r.position for r in e.records}
    if isinstance(e, MisorderExplanation):
        return {e.earlier.position, e.later.position}
    if isinstance(e, StaleExplanation):
        return {e.served.position}
    if isinstance(e, ResurrectionExplanation | LeakExplanation | PhantomExplanation):
        return {e.record.position}
    if isinstance(e, DuplicateExplanation):
        values = {w.value for w in e.writes}
        return {r.position for r in e.read.records if r.value in values}
    return set()


def gist(v: Violation) -> str:
    """memcert's reading in one sentence: what the ground truth says should have been."""
    e = v.explanation
    if isinstance(e, ConflictExplanation):
        facts = ", ".join(w.fact for w in e.writes)
        return f"{len(e.writes)} facts ({facts}) of slot {e.slot}, which holds one"
    if isinstance(e, DuplicateExplanation):
        how = "the same wording" if e.level == "none" else f"{e.level} paraphrases"
        return f"{how} of fact {e.fact}, to be stored once"
    if isinstance(e, MisorderExplanation):
        return "a read lists records in ascending causal_seq"
    if isinstance(e, StaleExplanation):
        return f"W2 supersedes fact {e.top.fact} of slot {e.top.slot}"
    if isinstance(e, ResurrectionExplanation):
        if e.cause == "no_restore":
            return "D emptied the entity; no restore could have taken effect"
        return "a restore reopens the entity for new, newer writes only"
    if isinstance(e, LostExplanation):
        slot = e.slot if len(e.slot) <= NAME_WIDTH else _name(e.slot)
        return f"W is slot {slot}'s latest acknowledged write and no delete intervened"
    if isinstance(e, LeakExplanation):
        return f"that value was written only in namespace {e.writes[0].namespace}"
    if isinstance(e, PhantomExplanation) and e.difference:
        return f"no write to this entity produced that value: it is N's, {e.difference}"
    return "no write to this entity produced that value"
