"""A realistic mixed workload for the guard's tests: what an agent's memory service sees.

Several tenants (namespaces) hold the same entity ids; writes restate facts in other
words (surface and lexical variants, other attribute spellings), change them, negate
them, and some arrive late: a write takes its causal_seq when it starts and reaches the
store a few steps later, after other operations (a delete and a restore, say); reads
dominate; entities are deleted, and the deleted ones restored, now and then. Values
carry no tag, as production values do not; some are long, or of an odd text class
(emoji, combining marks, whitespace at the ends), and some attributes differ from
another only in characters outside ASCII.
Every operation draws its causal_seq from one shared Lamport clock when it starts.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import random
import threading
from collections.abc import Callable, Sequence

from invariants.backend import Delete, MemoryBackend, Restore, Write
from invariants.wording import SLOTS, attribute_surface_variant, surface_variant
from invariants.wording.values import TEXT_CLASSES, with_payload

__all__ = ["Clock", "Workload", "run_threads"]

NAMESPACES = ("tenant-a", "tenant-b")
SLOT_NAMES = ("coffee_preference", "city", "language")


class Clock:
    """A Lamport clock shared by every worker: thread-safe, strictly increasing. It
    also remembers the entities touched last, since in a live service several requests
    of one conversation are in flight at once (a tool call and the reply, say)."""

    def __init__(self) -> None:
        self._next = itertools.count(1)
        self._lock = threading.Lock()
        self._recent: collections.deque[tuple[str, str]] = collections.deque(maxlen=4)

    def tick(self) -> int:
        with self._lock:
            return next(self._next)

    def touch(self, namespace: str, entity_id: str) -> None:
        with self._lock:
            self._recent.append((namespace, entity_id))

    def recent(self, rng: random.Random) -> tuple[str, str] | None:
        with self._lock:
            return rng.choice(self._recent) if self._recent else None


class Workload:
    """One worker's random operations over ``entities``; ``step`` makes one call."""

    def __init__(self, seed: int, entities: Sequence[str], clock: Clock,
                 worker: str = "w") -> None:
        self.rng = random.Random(seed)
        self.entities = tuple(entities)
        self.clock = clock
        self.worker = worker
        self.done = 0
        self.delayed: list[tuple[int, Write]] = []
        """Writes started but not yet sent, with the step at which each arrives."""
        self.deleted: list[tuple[str, str]] = []
        self.follow: tuple[str, str, str] | None = None
        """The slot a correction goes to next: the user restates what a delayed write
        said, and the correction overtakes it."""

    def value(self, slot: str) -> str:
        rng = self.rng
        wording = SLOTS[slot]
        obj = rng.choice(list(wording.objects)[:3])
        positive = rng.random() > 0.15
        templates = wording.positive if positive else wording.negative
        lang = "en" if rng.random() < 0.7 else "zh"
        names = wording.objects[obj][lang]
        roll = rng.random()
        template = templates.lexical[lang][0] if roll < 0.6 else rng.choice(
            templates.lexical[lang])
        text = template.format(x=names[0] if roll < 0.8 else rng.choice(names))
        if rng.random() < 0.15:
            # Agents' memories are often long or odd: summaries, pasted text, emoji.
            return with_payload(text, rng, rng.choice(TEXT_CLASSES), max_bytes=4096)
        return surface_variant(text, rng) if rng.random() < 0.2 else text

    def attribute(self, slot: str) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.7:
            return slot
        if roll < 0.85:
            return attribute_surface_variant(slot, rng)
        if roll < 0.95:
            return rng.choice(SLOTS[slot].attribute_variants)
        return f"{slot}_备注"  # another slot, told apart only by its non-ASCII characters

    def step(self, backend: MemoryBackend) -> None:
        rng = self.rng
        self.done += 1
        due = [w for at, w in self.delayed if at <= self.done]
        if due:
            self.delayed = [(at, w) for at, w in self.delayed if at > self.done]
            backend.write(due[0])
            self.delayed.extend((self.done, w) for w in due[1:])
            return
        ns = rng.choice(NAMESPACES)
        entity = rng.choice(self.entities)
        busy = self.clock.recent(rng) if rng.random() < 0.3 else None
        if busy is not None:
            ns, entity = busy
        self.clock.touch(ns, entity)
        seq = self.clock.tick()
        op_id = f"{self.worker}-{self.done}"
        roll = rng.random()
        if roll < 0.35:
            backend.read(ns, entity)
        elif roll < 0.84:
            slot = rng.choice(SLOT_NAMES)
            if self.follow is not None:
                (ns, entity, slot), self.follow = self.follow, None
            write = Write(ns, entity, self.attribute(slot), self.value(slot), seq, op_id)
            if rng.random() < 0.12:
                self.delayed.append((self.done + rng.randint(3, 15), write))
                if rng.random() < 0.5:
                    self.follow = (ns, entity, slot)
            else:
                backend.write(write)
        elif roll < 0.92:
            if self.delayed and rng.random() < 0.5:  # forget what was just said
                ns, entity = self.delayed[0][1].namespace, self.delayed[0][1].entity_id
            backend.delete(Delete(ns, entity, seq, op_id, reason="user asked"))
            self.deleted.append((ns, entity))
        else:
            ns, entity = self.deleted.pop() if self.deleted else (ns, entity)
            with contextlib.suppress(NotImplementedError):
                backend.restore(Restore(ns, entity, seq, op_id))


def run_threads(handles: Sequence[MemoryBackend], ops: int, seed: int,
                entities: Sequence[str],
                on_error: Callable[[BaseException], bool] | None = None) -> list[BaseException]:
    """Run ``ops`` steps on each handle, one thread per handle, sharing one clock.

    An exception a step raises is handed to ``on_error``, which says whether the worker
    goes on; every exception is returned.
    """
    clock = Clock()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(i: int, handle: MemoryBackend) -> None:
        workload = Workload(seed * 1000 + i, entities, clock, worker=f"w{i}")
        for _ in range(ops):
            try:
                workload.step(handle)
            except BaseException as error:  # collected for the test
                with lock:
                    errors.append(error)
                if on_error is None or not on_error(error):
                    return

    threads = [threading.Thread(target=work, args=(i, h)) for i, h in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
