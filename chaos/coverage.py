"""Did the run produce the conditions its invariants need? Measured from the history.

A scenario that never made two writes to one key overlap has not tested uniqueness
under concurrency, however green its reads look. Each condition here is counted from
the saved history alone (so ``memcert replay`` gets the same answer), and a required
condition that never occurred turns the invariant it serves into ``unknown``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from invariants.history import Entry, History

__all__ = ["CONDITIONS", "CONDITION_INVARIANT", "Condition", "backend_errors", "measure"]


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition a scenario can require: what it is, and which invariant it serves."""

    invariant: str
    definition: str


CONDITIONS: Mapping[str, Condition] = MappingProxyType(
    {
        "overlapping_same_key_writes": Condition(
            "uniqueness",
            "a write to a key invoked while another write to that key was still running",
        ),
        "delete_raced_write": Condition(
            "deletion_monotonicity",
            "a write and a delete of one entity whose invocation-to-completion intervals overlap",
        ),
        "read_after_delete": Condition(
            "deletion_monotonicity",
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a delete",
        ),
        "read_after_restore": Condition(
            "deletion_monotonicity",
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a restore",
        ),
        "stale_write_after_restore": Condition(
            "deletion_monotonicity",
            "a write invoked when the last acknowledged delete or restore of its entity "
            "was a restore, with a causal_seq at or below the highest of the entity's "
            "acknowledged deletes",
        ),
        "out_of_order_arrival": Condition(
            "causal_monotonicity",
            "a write that completed (ok or fail) after a write with a higher causal_seq "
            "to the same key had completed",
        ),
        "seq_digit_boundaries": Condition(
            "causal_monotonicity",
            "for each of 10 and 100, one key received a write with causal_seq below it "
            "and one with causal_seq at or above it",
        ),
        "second_namespace": Condition(
            "isolation",
            "an entity_id used in two or more namespaces",
        ),
        "paraphrase_writes_surface": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is surface",
        ),
        "paraphrase_writes_lexical": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is lexical",
        ),
        "paraphrase_writes_semantic": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is semantic",
        ),
    }
)
"""Every coverage condition; a write's *key* is (namespace, entity_id, meta.slot)."""

CONDITION_INVARIANT: Mapping[str, str] = MappingProxyType(
    {name: condition.invariant for name, condition in CONDITIONS.items()}
)
"""Each coverage condition, and the invariant left unproven when it never occurs."""


def measure(history: History) -> dict[str, int]:
    """Count how often each condition occurred; linear after one sort per key."""
    pairs = [(inv, done) for inv, done in history.pairs() if done is not None]
    counts = dict.fromkeys(CONDITION_INVARIANT, 0)
    counts["overlapping_same_key_writes"] = _overlaps(
        (_slot_key(inv), inv.index, done.index) for inv, done in pairs if inv.f == "write"
    )
    counts["delete_raced_write"] = _races(pairs)
    counts["out_of_order_arrival"] = _out_of_order(pairs)
    counts["seq_digit_boundaries"] = _digit_boundaries(pairs)
    after = _reads_after(history)
    counts["read_after_delete"] = after["delete"]
    counts["read_after_restore"] = after["restore"]
    counts["stale_write_after_restore"] = after["stale_write"]
    for inv, _ in pairs:
        if inv.f == "write" and inv.meta is not None and inv.meta.paraphrase != "none":
            counts[f"paraphrase_writes_{inv.meta.paraphrase}"] += 1
    namespaces = defaultdict(set)
    for inv, _ in pairs:
        namespaces[inv.op.entity_id].add(inv.op.namespace)
    counts["second_namespace"] = sum(1 for spaces in namespaces.values() if len(spaces) > 1)
    return counts


def _seq(entry: Entry) -> int:
    """The causal_seq of a write, delete or restore (reads have none)."""
    return int(getattr(entry.op, "causal_seq", -1))


def _slot_key(entry: Entry) -> tuple[str, str, str]:
    slot = entry.meta.slot if entry.meta is not None else getattr(entry.op, "attribute", "")
    return (entry.op.namespace, entry.op.entity_id, slot)


def _overlaps(intervals: Iterable[tuple[object, int, int]]) -> int:
    """Intervals that began while another on the same key was still running."""
    by_key: dict[object, list[tuple[int, int]]] = defaultdict(list)
    for key, start, end in intervals:
        by_key[key].append((start, end))
    found = 0
    for spans in by_key.values():
        spans.sort()
        reach = -1
        for start, end in spans:
            if start < reach:
                found += 1
            reach = max(reach, end)
    return found


def _races(pairs: list[tuple[Entry, Entry]]) -> int:
    """Deletes whose interval overlapped a write's on the same entity."""
    spans: dict[tuple[str, str], list[tuple[int, int, bool]]] = defaultdict(list)
    for inv, done in pairs:
        if inv.f in ("write", "delete"):
            spans[(inv.op.namespace, inv.op.entity_id)].append(
                (inv.index, done.index, inv.f == "delete")
            )
    found = 0
    for items in spans.values():
        items.sort()
        reach_write = reach_delete = -1
        for start, end, is_delete in items:
            if (is_delete and start < reach_write) or (not is_delete and start < reach_delete):
                found += 1
            if is_delete:
                reach_delete = max(reach_delete, end)
            else:
                reach_write = max(reach_write, end)
    return found


def _out_of_order(pairs: list[tuple[Entry, Entry]]) -> int:
    """Writes that completed after a write with a higher causal_seq on the same key."""
    done_order = sorted(
        (done.index, inv) for inv, done in pairs if inv.f == "write" and done.type in ("ok", "fail")
    )
    highest: dict[tuple[str, str, str], int] = {}
    found = 0
    for _, inv in done_order:
        key = _slot_key(inv)
        seq = _seq(inv)
        if seq < highest.get(key, -1):
            found += 1
        highest[key] = max(seq, highest.get(key, -1))
    return found


def _digit_boundaries(pairs: list[tuple[Entry, Entry]]) -> int:
    """1 if, for both 10 and 100, some key got writes on each side of it, else 0.

    A backend that compares causal seqs as text orders "9" after "10"; only a key that
    saw both sides of a digit boundary can show it.
    """
    seqs: dict[tuple[str, str, str], tuple[int, int]] = {}
    for inv, _ in pairs:
        if inv.f == "write":
            key = _slot_key(inv)
            low, high = seqs.get(key, (_seq(inv), _seq(inv)))
            seqs[key] = (min(low, _seq(inv)), max(high, _seq(inv)))
    crossed = {b for low, high in seqs.values() for b in (10, 100) if low < b <= high}
    return int(crossed == {10, 100})


def _reads_after(history: History) -> dict[str, int]:
    """Reads after an acknowledged delete or restore, and stale writes after a restore."""
    state: dict[tuple[str, str], tuple[str, int]] = {}
    counts = {"delete": 0, "restore": 0, "stale_write": 0}
    horizon: dict[tuple[str, str], int] = {}
    for entry in history:
        key = (entry.op.namespace, entry.op.entity_id)
        if entry.type == "ok" and entry.f in ("delete", "restore"):
            state[key] = (entry.f, _seq(entry))
            if entry.f == "delete":
                horizon[key] = max(horizon.get(key, -1), _seq(entry))
        elif entry.type == "invoke" and key in state:
            last = state[key][0]
            if entry.f == "read":
                counts[last] += 1
            elif entry.f == "write" and last == "restore" and _seq(entry) <= horizon.get(key, -1):
                counts["stale_write"] += 1
    return counts


def backend_errors(history: History) -> dict[str, tuple[int, str]]:
    """Errors the backend itself raised (not injected faults): type -> (count, first text).

    Each one is an operation whose outcome nobody knows, so a run full of them checks
    little; the report shows them so that a broken handle does not pass as "unknown"
    without a reason.
    """
    found: dict[str, tuple[int, str]] = {}
    for entry in history:
        text = entry.result if isinstance(entry.result, str) else None
        if text is None or entry.type == "ok" or text.endswith("(injected)"):
            continue
        if text.startswith("unsupported: "):
            continue
        name = text.split(":", 1)[0]
        count, first = found.get(name, (0, text))
        found[name] = (count + 1, first)
    return found
