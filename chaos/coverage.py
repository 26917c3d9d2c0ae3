"""Did the run produce the conditions its invariants need? Measured from the history.

A scenario that never made two writes to one key overlap has not tested uniqueness
under concurrency, however green its reads look. Each condition here is counted from
the saved history alone (so ``memcert replay`` gets the same answer), and a required
condition that never occurred turns the invariant it serves into ``unknown``.

The network and crash conditions also need to know when the nemesis acted: its events
(saved with each scenario in results.json) say how long the history was around each
action, and which workers it acted on. An operation *got no answer* if it ended
``info``, or is a read that failed with an error.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from invariants.backend import Write
from invariants.history import Entry, History
from invariants.levels import CLAIMABLE_LEVELS
from scenarios.conditions import CONDITIONS

__all__ = ["backend_errors", "measure"]


def measure(history: History, nemesis: Sequence[Mapping[str, Any]] = ()) -> dict[str, int]:
    """Count how often each condition of :data:`scenarios.conditions.CONDITIONS`
    occurred, in the order declared there; linear after one sort per key.

    ``nemesis`` holds the events of every scenario's nemesis
    (:class:`chaos.nemesis.Nemesis`); without them the network and crash conditions
    count 0.
    """
    pairs = [(inv, done) for inv, done in history.pairs() if done is not None]
    counts: dict[str, int] = {}
    counts["overlapping_same_key_writes"] = _overlaps(
        (_slot_key(inv), inv.index, done.index) for inv, done in pairs if inv.f == "write"
    )
    counts["attribute_variant_facts"] = _variant_facts(pairs)
    counts["delete_raced_write"] = _races(pairs)
    counts["out_of_order_arrival"] = _out_of_order(pairs)
    counts["seq_digit_boundaries"] = _digit_boundaries(pairs)
    after = _reads_after(history)
    counts["read_after_delete"] = after["delete"]
    counts["read_after_restore"] = after["restore"]
    counts["stale_write_after_restore"] = after["stale_write"]
    counts.update({f"paraphrase_writes_{level}": 0 for level in CLAIMABLE_LEVELS})
    for inv, _ in pairs:
        if inv.f == "write" and inv.meta is not None and inv.meta.paraphrase != "none":
            counts[f"paraphrase_writes_{inv.meta.paraphrase}"] += 1
    namespaces = defaultdict(set)
    for inv, _ in pairs:
        namespaces[inv.op.entity_id].add(inv.op.namespace)
    counts["second_namespace"] = sum(1 for spaces in namespaces.values() if len(spaces) > 1)
    counts.update(_nemesis_conditions(pairs, nemesis))
    return {name: counts[name] for name in CONDITIONS} | counts


def _no_answer(done: Entry) -> bool:
    """The operation got no answer: an unknown outcome, or a read that raised."""
    return done.type == "info" or (
        done.type == "fail" and isinstance(done.result, str)
        and not done.result.startswith("unsupported: "))


def _nemesis_conditions(pairs: list[tuple[Entry, Entry]],
                        events: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The network and crash conditions, from the nemesis's events.

    A toxic is in force from its ``add_toxic`` until its ``remove_toxic`` or a ``heal``;
    a partition until a ``heal``; a service is down from a ``kill`` until the next
    ``restart``. An operation's completion index must fall in such a window (from the
    action's ``begin`` to the ending action's ``end``), and its worker among those the
    action hit.
    """
    toxics: list[tuple[frozenset[int], int, int]] = []
    cuts: list[tuple[frozenset[int], int, int]] = []
    crashes: list[tuple[frozenset[int], int, int]] = []
    open_toxics: dict[str, tuple[frozenset[int], int]] = {}
    open_cuts: list[tuple[frozenset[int], int]] = []
    down: tuple[frozenset[int], int] | None = None
    for event in events:
        workers = frozenset(event.get("workers", ()))
        begin, end = int(event["begin"]), int(event["end"])
        action = event["do"]
        if action == "add_toxic":
            open_toxics[event["toxic"]["name"]] = (workers, begin)
        elif action == "remove_toxic" and event.get("name") in open_toxics:
            hit, start = open_toxics.pop(event["name"])
            toxics.append((hit, start, end))
        elif action == "partition":
            open_cuts.append((workers, begin))
        elif action == "heal":
            toxics += [(hit, start, end) for hit, start in open_toxics.values()]
            cuts += [(hit, start, end) for hit, start in open_cuts]
            open_toxics, open_cuts = {}, []
        elif action == "kill":
            down = (workers, begin)
        elif action == "restart" and down is not None:
            crashes.append((down[0], down[1], end))
            down = None

    def during(windows: list[tuple[frozenset[int], int, int]]) -> int:
        return sum(1 for inv, done in pairs if _no_answer(done) and any(
            inv.worker in hit and start <= done.index <= stop for hit, start, stop in windows))

    in_flight = sum(1 for inv, done in pairs if _no_answer(done) and any(
        inv.worker in hit and inv.index < start <= done.index for hit, start, _ in crashes))
    read_after: dict[tuple[str, str], int] = {}
    for inv, done in pairs:
        if inv.f == "read" and done.type == "ok":
            key = (inv.op.namespace, inv.op.entity_id)
            read_after[key] = max(read_after.get(key, -1), inv.index)
    survived = sum(1 for inv, done in pairs if inv.f == "write" and done.type == "ok" and any(
        inv.worker in hit and done.index < start
        and read_after.get((inv.op.namespace, inv.op.entity_id), -1) >= back
        for hit, start, back in crashes))
    return {"network_fault_during_ops": during(toxics), "partition_cut_ops": during(cuts),
            "crash_lost_in_flight": in_flight, "writes_acked_before_crash": survived}


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


def _variant_facts(pairs: list[tuple[Entry, Entry]]) -> int:
    """Keys where a store keyed by the raw attribute would hold two facts at once: with
    two spellings and two facts among a key's acknowledged writes, some two writes
    differ in both."""
    seen: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for inv, done in pairs:
        op = inv.op
        if isinstance(op, Write) and done.type == "ok" and inv.meta is not None:
            spellings, facts = seen.setdefault(_slot_key(inv), (set(), set()))
            spellings.add(op.attribute)
            facts.add(inv.meta.fact)
    return sum(1 for spellings, facts in seen.values() if len(spellings) > 1 and len(facts) > 1)


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
