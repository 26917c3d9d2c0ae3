"""What a ``memcert load`` user does: the operation mixes, the keys, the values and the seqs.

This module knows nothing of Locust, so the CLI can list the mixes and the tests can
check the generator without importing gevent. Every value a user writes follows the
scenarios' ground truth (``scenarios.generators``): a fact has a tag of its own that
appears in each of its texts, so the checkers can trace every record a read returns to
the writes of exactly that text, whichever process or machine wrote it. A user's tags
start with its worker's index and its own number, so no two users, and no two workers,
ever write one text.

Keys are shared on purpose: every user of every worker writes the same entities of two
namespaces (the second one lets the isolation checker see a leak), so writes to one
key overlap across processes. ``forget`` only ever archives entities of a third,
scratch namespace that no contract read looks at: archiving is not part of the
contract, and an archived write would otherwise read as a lost one.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from invariants.backend import Delete, Restore, Write
from invariants.errors import InvalidArgument
from invariants.history import Paraphrase, WriteMeta
from invariants.levels import CLAIMABLE_LEVELS, PARAPHRASE_LEVELS
from scenarios.generators import Facts, ParaphraseFact, Topic
from scenarios.paraphrases import SLOTS

__all__ = [
    "CONTRACT_OPS",
    "DEFAULT_ENTITIES",
    "MIXES",
    "OPS",
    "STORE_OPS",
    "HybridClock",
    "Keyspace",
    "Op",
    "UserScript",
]

Op = Literal["write", "delete", "restore", "read", "search", "recall", "touch", "forget",
             "export"]
OPS: tuple[Op, ...] = get_args(Op)
CONTRACT_OPS: tuple[Op, ...] = ("write", "delete", "restore", "read")
STORE_OPS: tuple[Op, ...] = ("search", "recall", "touch", "forget", "export")

MIXES: Mapping[str, Mapping[Op, int]] = MappingProxyType({
    "balanced": MappingProxyType({
        "write": 30, "read": 30, "delete": 3, "restore": 3, "search": 10, "recall": 10,
        "touch": 7, "forget": 4, "export": 3}),
    "read-heavy": MappingProxyType({
        "write": 10, "read": 70, "delete": 1, "restore": 1, "search": 6, "recall": 8,
        "touch": 4}),
    "write-heavy": MappingProxyType({
        "write": 75, "read": 15, "delete": 2, "restore": 2, "recall": 3, "touch": 3}),
    "read-only": MappingProxyType({"read": 100}),
})
"""Relative weights of the operations, per mix. ``read-only`` reads keys nobody writes:
it measures the read path itself (the benchmark's ceiling run uses it), and its
verdict is unknown, since there is nothing to check."""

DEFAULT_ENTITIES: Final = 8
SEQ_SHIFT: Final = 10
"""Low bits of a causal seq that hold the worker's index, so two workers never draw one
seq, and one seq names one writer."""

_PARAPHRASE_SLOTS: Final = tuple(SLOTS)
_RESTATE_P: Final = 0.35
"""Chance that a write restates a fact the user wrote before on that key, in other words:
what the semantic normalization checker needs to see."""
_TWIN_P: Final = 0.3


class HybridClock:
    """Causal seqs from the wall clock, kept monotonic and merged like a Lamport clock.

    Workers in several processes, or on several machines, share no counter. Drawing
    seqs from the time (microseconds since the epoch, shifted to leave the worker's
    index in the low bits) keeps the writers of all of them roughly in step, so a write
    sent later usually supersedes one sent earlier, as it would between real clients;
    :meth:`observe` merges the seqs a read returned, so a worker whose clock lags still
    writes above what it has seen. Not thread-safe: one per process under gevent, where
    nothing runs between the read of the time and the update.
    """

    def __init__(self, worker_index: int, now_us: Callable[[], int] | None = None) -> None:
        self._low = worker_index % (1 << SEQ_SHIFT)
        self._now_us = now_us or (lambda: time.time_ns() // 1000)
        self._last = 0

    def next(self) -> int:
        candidate = (self._now_us() << SEQ_SHIFT) | self._low
        if candidate <= self._last:
            candidate = (((self._last >> SEQ_SHIFT) + 1) << SEQ_SHIFT) | self._low
        self._last = candidate
        return candidate

    def observe(self, seq: int) -> None:
        self._last = max(self._last, seq)


@dataclass(frozen=True)
class Keyspace:
    """The keys one run shares across all its users: ``run`` keeps runs apart on a
    service that outlives them, so a load never needs to reset the store."""

    run: str
    entities: int = DEFAULT_ENTITIES

    def __post_init__(self) -> None:
        if isinstance(self.entities, bool) or not isinstance(self.entities, int) \
                or not 1 <= self.entities <= 10_000:
            raise InvalidArgument(f"entities={self.entities!r} must be an int in 1..10000.")

    @property
    def namespaces(self) -> tuple[str, str]:
        return (f"load-{self.run}", f"load-{self.run}-twin")

    @property
    def scratch(self) -> str:
        """Where ``forget`` archives: no contract read ever looks here."""
        return f"load-{self.run}-scratch"

    def entity(self, number: int) -> str:
        return f"user-{number + 1}"


class UserScript:
    """One Locust user's choices: which operation next, on which key, with which text.

    Everything random comes from ``rng``, seeded by the run's seed, the worker's index
    and the user's number, so the same seed replays the same choices (the timing, and so
    the outcomes, are the service's). ``level`` is the widest paraphrase a restated
    fact may take, the level the backend claims to normalize.
    """

    def __init__(self, keys: Keyspace, *, mix: str, level: Paraphrase, seed: int,
                 worker_index: int, user: int, clock: HybridClock) -> None:
        if mix not in MIXES:
            raise InvalidArgument(f"mix={mix!r} is not a mix; use one of {', '.join(MIXES)}.")
        if level not in CLAIMABLE_LEVELS:
            raise InvalidArgument(f"level={level!r} is not a paraphrase level; use one of "
                                  f"{', '.join(CLAIMABLE_LEVELS)}.")
        self.keys = keys
        self.clock = clock
        self.code = f"w{worker_index}u{user}x"
        self.rng = random.Random(f"memcert load|{seed}|{worker_index}|{user}")
        self._levels: tuple[Paraphrase, ...] = PARAPHRASE_LEVELS[
            : PARAPHRASE_LEVELS.index(level) + 1]
        weights = MIXES[mix]
        self._ops: tuple[Op, ...] = tuple(weights)
        self._weights = tuple(weights.values())
        self._facts = Facts(self.code)
        self._topics: dict[tuple[str, str, str], Topic] = {}
        self._said: dict[tuple[str, str, str], ParaphraseFact] = {}
        self._ops_sent = 0

    def choose(self) -> Op:
        return self.rng.choices(self._ops, self._weights)[0]

    def target(self) -> tuple[str, str]:
        """A shared key: mostly the first namespace, sometimes its twin."""
        namespace = self.keys.namespaces[self.rng.random() < _TWIN_P]
        return namespace, self.keys.entity(self.rng.randrange(self.keys.entities))

    def write(self) -> tuple[Write, WriteMeta]:
        """A new fact on a shared key, or a fact said before restated in other words."""
        namespace, entity_id = self.target()
        slot = self.rng.choice(_PARAPHRASE_SLOTS)
        key = (namespace, entity_id, slot)
        said = self._said.get(key)
        if said is not None and self.rng.random() < _RESTATE_P:
            step = said.variant(self.rng, self.rng.choice(self._levels))
        else:
            topic = self._topics.get(key)
            if topic is None:
                topic = self._topics[key] = self._facts.topic(namespace, entity_id, slot)
            said = self._said[key] = topic.next(self.rng)
            step = said.write()
        assert step.attribute is not None and step.value is not None
        meta = WriteMeta(f"{self.code}{step.meta['fact']}", step.meta["slot"],
                         step.meta["paraphrase"])  # type: ignore[arg-type]
        seq = self.clock.next()
        return Write(namespace, entity_id, step.attribute, step.value, seq,
                     self._op_id(seq)), meta

    def scratch_write(self) -> tuple[Write, WriteMeta]:
        """A write to the scratch namespace, for a ``forget`` to archive next."""
        fact = self._facts.plain(self.keys.scratch, f"scratch-{self.code}", "city")
        seq = self.clock.next()
        return Write(fact.namespace, fact.entity_id, fact.slot, fact.text, seq,
                     self._op_id(seq)), WriteMeta(f"{self.code}{fact.id}", fact.slot)

    def delete(self) -> Delete:
        namespace, entity_id = self.target()
        seq = self.clock.next()
        return Delete(namespace, entity_id, seq, self._op_id(seq), reason="memcert load")

    def restore(self) -> Restore:
        namespace, entity_id = self.target()
        seq = self.clock.next()
        return Restore(namespace, entity_id, seq, self._op_id(seq))

    def read(self) -> tuple[str, str]:
        if self._ops == ("read",):
            # read-only: keys no one writes, so every read is the same request
            return self.keys.namespaces[0], f"unwritten-{self.rng.randrange(1000)}"
        return self.target()

    def search(self) -> dict[str, Any]:
        slot = SLOTS[self.rng.choice(_PARAPHRASE_SLOTS)]
        obj = self.rng.choice(tuple(slot.objects.values()))
        return {"namespace": self.target()[0], "query": obj["en"][0], "limit": 10}

    def recall(self) -> dict[str, Any]:
        namespace, entity_id = self.target()
        return {"namespace": namespace, "entity_id": entity_id, "limit": 10}

    def touch(self) -> dict[str, Any]:
        namespace, entity_id = self.target()
        return {"namespace": namespace, "entity_id": entity_id,
                "attribute": self.rng.choice(_PARAPHRASE_SLOTS)}

    def export(self) -> str:
        return self.target()[0]

    def _op_id(self, seq: int) -> str:
        self._ops_sent += 1
        return f"{self.code}/{self._ops_sent}/{seq}"
