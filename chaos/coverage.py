"""Did the run produce the conditions its invariants need? Measured from the history.

A scenario that never made two writes to one key overlap has not tested uniqueness
under concurrency, however green its reads look. Each condition here is counted from
the saved history alone (so ``memcert replay`` gets the same answer), and a required
condition that never occurred turns the invariant it serves into ``unknown``.

The network and crash conditions also need to know when the nemesis acted: its events
(saved with each scenario in results.json) say how long the history was around each
action, and which workers it acted on. An operation *got no answer* if it ended
``info``, or is a read that failed with an error.

Everything is counted in one pass over the history, an entry at a time
(:class:`Coverage`), so that a history of millions of operations is measured as it is
read. What is kept does not grow with the history's length: per key or entity a few
values (the highest causal_seq seen, the first spelling and fact, the namespaces...),
the operations in flight, and the few operations whose count waits on one of those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from invariants.backend import Ack, Record, Write
from invariants.history import Entry
from invariants.levels import CLAIMABLE_LEVELS
from invariants.wording.values import text_classes
from scenarios.conditions import CONDITIONS, VALUE_CONDITIONS

__all__ = ["Coverage", "backend_errors", "measure"]

_Key = tuple[str, str, str]
"""A write's key: namespace, entity_id and canonical slot."""
_Entity = tuple[str, str]
_Window = tuple[frozenset[int], int, int]
"""Workers the nemesis hit, and the first and last history index of its action."""
_NONE: frozenset[int] = frozenset()


def measure(history: Iterable[Entry],
            nemesis: Sequence[Mapping[str, Any]] = ()) -> dict[str, int]:
    """Count how often each condition of :data:`scenarios.conditions.CONDITIONS`
    occurred, in the order declared there, in one pass over ``history``.

    ``nemesis`` holds the events of every scenario's nemesis
    (:class:`chaos.nemesis.Nemesis`); without them the network and crash conditions
    count 0.
    """
    coverage = Coverage(nemesis)
    observe = coverage.observe
    for entry in history:
        observe(entry)
    return coverage.counts()


def backend_errors(history: Iterable[Entry]) -> dict[str, tuple[int, str]]:
    """Errors the backend itself raised (not injected faults): type -> (count, first
    text), as :meth:`Coverage.errors` counts them, in one pass over ``history``."""
    coverage = Coverage()
    observe = coverage.observe
    for entry in history:
        observe(entry)
    return coverage.errors()


class Coverage:
    """The conditions and the backend's errors of one history, counted as it goes by.

    Feed :meth:`observe` every entry once, in index order (a :class:`History`, a
    :class:`~invariants.history.HistoryStream`, or a recorder's observer); then
    :meth:`counts` and :meth:`errors` say what :func:`measure` and
    :func:`backend_errors` say of the whole. Either may be asked at any point, and
    then says so of the entries so far, with operations still in flight left out,
    as an operation never completed is.

    ``entries``, ``invocations`` and ``completions`` count what was observed, and
    ``restore_unsupported`` says whether a restore failed as ``unsupported:``.
    """

    def __init__(self, nemesis: Sequence[Mapping[str, Any]] = ()) -> None:
        self.entries = 0
        self.invocations = 0
        self.completions = 0
        self.restore_unsupported = False
        self._open: dict[int, tuple[int, _Key | None, frozenset[int], frozenset[int]]] = {}
        """Per worker, its operation in flight: its index, a write's key and the writes
        to that key in flight when it began, and (writes and deletes) the operations of
        the other kind on its entity that were."""
        self._overlaps = _Overlaps()
        self._deletes_in_writes = _Overlaps()  # a delete begun while a write ran
        self._writes_in_deletes = _Overlaps()  # a write begun while a delete ran
        self._variants: dict[_Key, tuple[str | None, str | None]] = {}
        """Per key, its acknowledged writes' spelling and fact, None once there were two."""
        self._highest: dict[_Key, int] = {}
        self._out_of_order = 0
        self._seqs: dict[_Key, tuple[int, int]] = {}
        self._last_change: dict[_Entity, str] = {}
        """Per entity, whether its last acknowledged delete or restore was a delete."""
        self._horizon: dict[_Entity, int] = {}
        self._after = {"delete": 0, "restore": 0, "stale_write": 0}
        self._paraphrases: dict[str, int] = dict.fromkeys(CLAIMABLE_LEVELS, 0)
        self._spaces: dict[str, str | None] = {}
        """Per entity_id, its one namespace, or None once it was used in two."""
        self._errors: dict[str, tuple[int, str]] = {}
        self._toxics, self._cuts, self._crashes, self._pauses = _windows(nemesis)
        self._nemesis_acted = bool(self._toxics or self._cuts or self._crashes or self._pauses)
        self._during_toxics = self._during_cuts = self._in_flight = self._survived = 0
        self._across_pause = 0
        self._read_after: dict[_Entity, int] = {}
        """Per entity, the highest index of a read of it invoked and answered."""
        self._read_back = _ReadBack()
        self._unread: dict[_Entity, dict[int, int]] = {}
        """Per entity, acknowledged writes before a crash not yet read back after it: how
        many, by the earliest restart index a read must follow for one to count."""

    def observe(self, entry: Entry) -> None:
        """Count one entry, the next in index order."""
        self.entries += 1
        op = entry.op
        etype = entry.type
        entity = (op.namespace, op.entity_id)
        if isinstance(entry.result, str) and etype != "ok":
            self._error(entry.result, entry.f, etype)
        if etype == "invoke":
            self.invocations += 1
            self._invoke(entry, entity)
            return
        self.completions += 1
        f = entry.f
        if etype == "ok" and (f == "delete" or f == "restore"):
            self._last_change[entity] = f
            if f == "delete":
                self._horizon[entity] = max(self._horizon.get(entity, -1), _seq(entry))
        opened = self._open.pop(entry.worker, None)
        if opened is None:  # not a history a validator would pass; nothing to pair
            return
        index, key, same_key, other_kind = opened
        spaces = self._spaces
        space = spaces.get(op.entity_id, op.namespace)
        if space is not None:
            spaces[op.entity_id] = space if space == op.namespace else None
        if key is not None:
            self._complete_write(entry, index, key, entity, same_key, other_kind)
        elif f == "delete":
            self._writes_in_deletes.end(entity, index)
            self._deletes_in_writes.close(entity, other_kind)
        elif f == "read" and etype == "ok":
            if isinstance(entry.result, tuple):
                self._read_back.served(entity, entry.result)
            if self._crashes:
                self._read(entity, index)
        if self._nemesis_acted:
            self._nemesis(entry, index)

    def _invoke(self, entry: Entry, entity: _Entity) -> None:
        f = entry.f
        last = self._last_change.get(entity)
        if last is not None:
            if f == "read":
                self._after[last] += 1
            elif f == "write" and last == "restore" and (
                    _seq(entry) <= self._horizon.get(entity, -1)):
                self._after["stale_write"] += 1
        key = None
        if f == "write":
            key = _slot_key(entry)
            same_key = self._overlaps.begin(key, entry.index, snapshot=True)
            other_kind = self._writes_in_deletes.running(entity)
            self._deletes_in_writes.begin(entity, entry.index)
        elif f == "delete":
            same_key = _NONE
            other_kind = self._deletes_in_writes.running(entity)
            self._writes_in_deletes.begin(entity, entry.index)
        else:
            same_key = other_kind = _NONE
        self._open[entry.worker] = (entry.index, key, same_key, other_kind)

    def _complete_write(self, entry: Entry, index: int, key: _Key, entity: _Entity,
                        same_key: frozenset[int], other_kind: frozenset[int]) -> None:
        self._overlaps.end(key, index)
        self._overlaps.close(key, same_key)
        self._deletes_in_writes.end(entity, index)
        self._writes_in_deletes.close(entity, other_kind)
        seq = _seq(entry)
        etype = entry.type
        meta = entry.meta
        if etype == "ok" and meta is not None:
            attribute = getattr(entry.op, "attribute", "")
            spelling, fact = self._variants.get(key, (attribute, meta.fact))
            if spelling != attribute or fact != meta.fact or key not in self._variants:
                self._variants[key] = (spelling if spelling == attribute else None,
                                       fact if fact == meta.fact else None)
        if etype == "ok" or etype == "fail":
            highest = self._highest.get(key, -1)
            if seq < highest:
                self._out_of_order += 1
            else:
                self._highest[key] = seq
        low, high = self._seqs.get(key, (seq, seq))
        if seq <= low or seq >= high:
            self._seqs[key] = (min(low, seq), max(high, seq))
        if meta is not None and meta.paraphrase != "none":
            self._paraphrases[meta.paraphrase] += 1
        if etype == "ok" and isinstance(entry.op, Write) and (
                isinstance(entry.result, Ack) and entry.result.applied):
            self._read_back.wrote(entity, key[2], entry.op)
        if etype == "ok" and self._crashes:
            self._acknowledged(entry, entity)

    def _acknowledged(self, entry: Entry, entity: _Entity) -> None:
        """An acknowledged write counts as surviving a crash it completed before, once a
        read of its entity invoked after that crash's restart was answered."""
        backs = [back for hit, start, back in self._crashes
                 if entry.worker in hit and entry.index < start]
        if not backs:
            return
        back = min(backs)
        if self._read_after.get(entity, -1) >= back:
            self._survived += 1
            return
        unread = self._unread.setdefault(entity, {})
        unread[back] = unread.get(back, 0) + 1

    def _read(self, entity: _Entity, index: int) -> None:
        if index <= self._read_after.get(entity, -1):
            return
        self._read_after[entity] = index
        unread = self._unread.get(entity)
        if unread:
            for back in [back for back in unread if back <= index]:
                self._survived += unread.pop(back)
            if not unread:
                del self._unread[entity]

    def _nemesis(self, entry: Entry, index: int) -> None:
        if entry.type == "ok" and any(
                entry.worker in hit and index < back <= entry.index
                for hit, _, back in self._pauses):
            self._across_pause += 1
        if not _no_answer(entry):
            return
        worker, done = entry.worker, entry.index
        if any(worker in hit and start <= done <= stop for hit, start, stop in self._toxics):
            self._during_toxics += 1
        if any(worker in hit and start <= done <= stop for hit, start, stop in self._cuts):
            self._during_cuts += 1
        if any(worker in hit and index < start <= done for hit, start, _ in self._crashes):
            self._in_flight += 1

    def _error(self, text: str, f: str, etype: str) -> None:
        if f == "restore" and etype == "fail" and text.startswith("unsupported:"):
            self.restore_unsupported = True
        if text.endswith("(injected)") or text.startswith("unsupported: "):
            return
        name = text.split(":", 1)[0]
        count, first = self._errors.get(name, (0, text))
        self._errors[name] = (count + 1, first)

    def counts(self) -> dict[str, int]:
        """How often each condition occurred, as :func:`measure` returns it."""
        crossed = {b for low, high in self._seqs.values() for b in (10, 100) if low < b <= high}
        counts: dict[str, int] = {
            "overlapping_same_key_writes": self._overlaps.found,
            "attribute_variant_facts": sum(
                1 for spelling, fact in self._variants.values()
                if spelling is None and fact is None),
            "delete_raced_write": self._deletes_in_writes.found + self._writes_in_deletes.found,
            "out_of_order_arrival": self._out_of_order,
            "seq_digit_boundaries": int(crossed == {10, 100}),
            "read_after_delete": self._after["delete"],
            "read_after_restore": self._after["restore"],
            "stale_write_after_restore": self._after["stale_write"],
        }
        counts.update({f"paraphrase_writes_{level}": count
                       for level, count in self._paraphrases.items()})
        counts["second_namespace"] = sum(1 for space in self._spaces.values() if space is None)
        counts.update({"network_fault_during_ops": self._during_toxics,
                       "partition_cut_ops": self._during_cuts,
                       "crash_lost_in_flight": self._in_flight,
                       "writes_acked_before_crash": self._survived,
                       "answered_across_pause": self._across_pause})
        counts.update(self._read_back.counts)
        return {name: counts[name] for name in CONDITIONS} | counts

    def errors(self) -> dict[str, tuple[int, str]]:
        """Errors the backend itself raised (not injected faults): type -> (count, first
        text), in the order each type first occurred.

        Each one is an operation whose outcome nobody knows, so a run full of them checks
        little; the report shows them so that a broken handle does not pass as "unknown"
        without a reason.
        """
        return dict(self._errors)


class _ReadBack:
    """Per key, the latest applied write of a value class or under a non-ASCII attribute
    name, until a read of its entity serves its value: then its conditions count, once.

    A later applied write to the key takes its place (one without a class just ends the
    wait), so what is kept follows the keys, not the history.
    """

    __slots__ = ("counts", "latest")

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(
            (*VALUE_CONDITIONS.values(), "non_ascii_attribute_read_back"), 0)
        self.latest: dict[_Entity, dict[str, tuple[str, tuple[str, ...]]]] = {}

    def wrote(self, entity: _Entity, slot: str, op: Write) -> None:
        proves = [VALUE_CONDITIONS[name] for name in text_classes(op.value)]
        if not op.attribute.isascii():
            proves.append("non_ascii_attribute_read_back")
        if proves:
            self.latest.setdefault(entity, {})[slot] = (op.value, tuple(proves))
        elif entity in self.latest:
            self.latest[entity].pop(slot, None)

    def served(self, entity: _Entity, records: tuple[Record, ...]) -> None:
        latest = self.latest.get(entity)
        if not latest or not records:
            return
        values = {record.value for record in records}
        for slot, (value, proves) in list(latest.items()):
            if value in values:
                del latest[slot]
                for name in proves:
                    self.counts[name] += 1


class _Overlaps:
    """Operations that began while an operation of another set, on the same key, was
    still running, counted once both have completed (an operation never completed is
    no interval).

    The *targets* (the set run against) are tracked while they run; a *candidate*
    takes a snapshot of the targets running on its key when it begins
    (:meth:`running`). When it completes, it counts at once if one of them has
    completed already; else it waits, with the others of the same snapshot, until one
    does. Every operation of a waiting snapshot is still running, so what waits is
    bounded by the operations in flight, not by the history.
    """

    __slots__ = ("found", "running_on", "waiting")

    def __init__(self) -> None:
        self.found = 0
        self.running_on: dict[object, set[int]] = {}
        self.waiting: dict[object, dict[frozenset[int], int]] = {}

    def running(self, key: object) -> frozenset[int]:
        running = self.running_on.get(key)
        return frozenset(running) if running else _NONE

    def begin(self, key: object, index: int, *, snapshot: bool = False) -> frozenset[int]:
        """Target ``index`` starts running on ``key``; with ``snapshot`` (a set run
        against itself), returns the targets that were running there before it."""
        running = self.running_on.get(key)
        if running is None:
            self.running_on[key] = {index}
            return _NONE
        before = frozenset(running) if snapshot and running else _NONE
        running.add(index)
        return before

    def end(self, key: object, index: int) -> None:
        """Target ``index`` completed: every candidate waiting on it counts."""
        running = self.running_on.get(key)
        if running is not None:
            running.discard(index)
            if not running:
                del self.running_on[key]
        waiting = self.waiting.get(key) if self.waiting else None
        if waiting:
            for snapshot in [s for s in waiting if index in s]:
                self.found += waiting.pop(snapshot)
            if not waiting:
                del self.waiting[key]

    def close(self, key: object, snapshot: frozenset[int]) -> None:
        """A candidate that began while ``snapshot`` ran on ``key`` completed."""
        if not snapshot:
            return
        if not snapshot <= self.running_on.get(key, _NONE):
            self.found += 1
            return
        waiting = self.waiting.setdefault(key, {})
        waiting[snapshot] = waiting.get(snapshot, 0) + 1


def _windows(events: Sequence[Mapping[str, Any]]) -> tuple[
        list[_Window], list[_Window], list[_Window], list[_Window]]:
    """When each toxic, partition, crash and pause was in force, from the nemesis's
    events.

    A toxic is in force from its ``add_toxic`` until its ``remove_toxic`` or a ``heal``;
    a partition until a ``heal``; a service is down from a ``kill`` until the next
    ``restart``, and frozen from a ``pause`` until its ``resume`` (that window ends at
    the resume's ``begin``). An operation's completion index must fall in such a window
    (from the action's ``begin`` to the ending action's ``end``), and its worker among
    those the action hit.
    """
    toxics: list[_Window] = []
    cuts: list[_Window] = []
    crashes: list[_Window] = []
    pauses: list[_Window] = []
    frozen: tuple[frozenset[int], int] | None = None
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
        elif action == "pause":
            frozen = (workers, begin)
        elif action == "resume" and frozen is not None:
            pauses.append((frozen[0], frozen[1], begin))
            frozen = None
    return toxics, cuts, crashes, pauses


def _no_answer(done: Entry) -> bool:
    """The operation got no answer: an unknown outcome, or a read that raised."""
    return done.type == "info" or (
        done.type == "fail" and isinstance(done.result, str)
        and not done.result.startswith("unsupported: "))


def _seq(entry: Entry) -> int:
    """The causal_seq of a write, delete or restore (reads have none)."""
    return int(getattr(entry.op, "causal_seq", -1))


def _slot_key(entry: Entry) -> _Key:
    slot = entry.meta.slot if entry.meta is not None else getattr(entry.op, "attribute", "")
    return (entry.op.namespace, entry.op.entity_id, slot)
