"""The steps of docs/make-your-store-pass.md: the naive dict store, one fix at a time.

Each step fixes a cause memcert named on the step before, and overrides only what that
fix changes, so the tutorial can show each step's code whole. The fixes come in the
order of the write path (normalize, tombstone, staleness, commit), with restore, which
the naive store does not have, added before the commit step; a step's refusal comes
after those of the steps before it, as its check comes later in the path.

:data:`STEPS` lists them from :class:`~chaos.examples.naive_dict.NaiveDict` on; each
step's factory is usable as ``memcert certify chaos.examples.tutorial_steps:<name>``. The last step
makes the decisions of :mod:`chaos.examples.passing_dict`, which puts them in one class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from invariants.backend import Ack, Delete, Record, Restore, Write
from reference_store.normalize import Normalizer

from .naive_dict import EntityKey, Handles, NaiveDict, Shelf

__all__ = [
    "STEPS",
    "FoldedNames",
    "KeepsTheLine",
    "RefusesStale",
    "RemembersAnswers",
    "Restores",
    "Step",
    "Tombstones",
    "TutorialShelf",
    "folded_names",
    "keeps_the_line",
    "refuses_stale",
    "remembers_answers",
    "restores",
    "tombstones",
]

_Op = TypeVar("_Op", Write, Delete, Restore)


@dataclass
class TutorialShelf(Shelf):
    """What the steps add to the naive shelf, each field used from the step that
    introduces it on.

    - ``tombstones``: (namespace, entity) -> the highest causal_seq of its deletes, while
      it is deleted (step 2);
    - ``answers``: (namespace, op_id) -> the first answer to that operation (step 6);
    - ``lines``: (namespace, entity) -> the causal_seq of the delete a restore lifted,
      at or below which writes stay refused (step 5).
    """

    tombstones: dict[EntityKey, int] = field(default_factory=dict)
    answers: dict[tuple[str, str], Ack] = field(default_factory=dict)
    lines: dict[EntityKey, int] = field(default_factory=dict)

    def clear(self) -> None:
        super().clear()
        self.tombstones.clear()
        self.answers.clear()
        self.lines.clear()


class FoldedNames(NaiveDict):
    """Step 1, normalize (``alias``): every spelling of a slot files under one key.

    ``coffee_preference``, ``Coffee Preference`` and ``ｃｏｆｆｅｅ＿ｐｒｅｆｅｒｅｎｃｅ``
    fold to one key, so a write under one spelling replaces the record another made;
    the record keeps the spelling of the write that made it.
    """

    normalizer: ClassVar[Normalizer] = Normalizer("surface")

    def key(self, attribute: str) -> str:
        return self.normalizer.attribute_key(attribute)


class Tombstones(FoldedNames):
    """Step 2, tombstone (``no_tombstone``): a delete leaves a tombstone, and a write to
    a tombstoned entity is refused."""

    shelf_type: ClassVar[type[Shelf]] = TutorialShelf
    shelf: TutorialShelf

    def refusal(self, op: Write, current: Record | None) -> Ack | None:
        if (op.namespace, op.entity_id) in self.shelf.tombstones:
            return Ack(False, reason="tombstoned")
        return super().refusal(op, current)

    def delete(self, op: Delete) -> Ack:
        key = (op.namespace, op.entity_id)
        with self.shelf.lock:
            self.shelf.entities.pop(key, None)
            seq = max(op.causal_seq, self.shelf.tombstones.get(key, op.causal_seq))
            self.shelf.tombstones[key] = seq
            return Ack(True)


class RefusesStale(Tombstones):
    """Step 3, staleness (``stale_overwrite``): a write whose causal_seq is below the
    current record's is refused, however late it arrives."""

    def refusal(self, op: Write, current: Record | None) -> Ack | None:
        refused = super().refusal(op, current)
        if refused is None and current is not None and op.causal_seq < current.causal_seq:
            return Ack(False, version=current.version, reason="stale")
        return refused


class Restores(RefusesStale):
    """Step 4, a new capability: a restore lifts the tombstone (and, as memcert shows,
    forgets too much with it)."""

    def restore(self, op: Restore) -> Ack:
        key = (op.namespace, op.entity_id)
        with self.shelf.lock:
            tombstone = self.shelf.tombstones.get(key)
            if tombstone is None:
                return Ack(False, reason="not_deleted")
            if op.causal_seq < tombstone:
                return Ack(False, reason="stale")
            del self.shelf.tombstones[key]
            return Ack(True)


class KeepsTheLine(Restores):
    """Step 5, tombstone after a restore (``stale_after_restore``): the restore keeps
    the delete's causal_seq as a line, and a write from before the delete that arrives
    after the restore is still refused."""

    def refusal(self, op: Write, current: Record | None) -> Ack | None:
        refused = super().refusal(op, current)
        line = self.shelf.lines.get((op.namespace, op.entity_id))
        if refused is None and line is not None and op.causal_seq <= line:
            return Ack(False, reason="stale")
        return refused

    def restore(self, op: Restore) -> Ack:
        key = (op.namespace, op.entity_id)
        with self.shelf.lock:
            tombstone = self.shelf.tombstones.get(key)
            ack = super().restore(op)
            if ack.applied and tombstone is not None:
                self.shelf.lines[key] = tombstone
            return ack


class RemembersAnswers(KeepsTheLine):
    """Step 6, commit (``non_idempotent_retry``): the first answer to an op_id is kept,
    and a retry of it gets that answer again, whatever the store holds by then."""

    def write(self, op: Write) -> Ack:
        return self.once(op, super().write)

    def delete(self, op: Delete) -> Ack:
        return self.once(op, super().delete)

    def restore(self, op: Restore) -> Ack:
        return self.once(op, super().restore)

    def once(self, op: _Op, decide: Callable[[_Op], Ack]) -> Ack:
        """``decide(op)`` the first time its op_id comes, its answer ever after."""
        with self.shelf.lock:
            key = (op.namespace, op.op_id)
            if key not in self.shelf.answers:
                self.shelf.answers[key] = decide(op)
            return self.shelf.answers[key]


@dataclass(frozen=True)
class Step:
    """One step of the tutorial: its factory, its handle class, the cause it fixes
    (empty for the naive store and for a step that adds a capability), the causes its
    certification must name, and those it names only on some runs (timing decides)."""

    spec: str
    handle: type[NaiveDict]
    fixes: str
    leaves: frozenset[str] = frozenset()
    sometimes: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.spec.rpartition(":")[2]


folded_names = Handles(FoldedNames)
tombstones = Handles(Tombstones)
refuses_stale = Handles(RefusesStale)
restores = Handles(Restores)
keeps_the_line = Handles(KeepsTheLine)
remembers_answers = Handles(RemembersAnswers)

_NO_TOMBSTONE_YET = frozenset({"in_flight_write", "delete_ignored", "stale_after_restore"})
"""What a store without tombstones shows besides ``no_tombstone`` on some runs: a late
delivery that lands after a delete, or a restore whose outcome was unknown."""

_LATE_FIRST_COPY = frozenset({"non_idempotent_retry"})
"""What a store that can restore but forgets its answers shows on some runs: a retry
refused while the entity was deleted, whose first copy lands after the restore."""

_UNKNOWN_RESTORE = frozenset({"no_tombstone"})
"""How ``stale_after_restore`` reads on some runs when the restore before the late write
timed out: memcert cannot tell that any restore lifted the tombstone."""

STEPS: tuple[Step, ...] = (
    Step("chaos.examples.naive_dict:naive_dict", NaiveDict, "",
         frozenset({"alias", "duplicate", "no_tombstone", "stale_overwrite"}),
         _NO_TOMBSTONE_YET),
    Step(f"{__name__}:folded_names", FoldedNames, "alias",
         frozenset({"no_tombstone", "stale_overwrite"}), _NO_TOMBSTONE_YET),
    Step(f"{__name__}:tombstones", Tombstones, "no_tombstone", frozenset({"stale_overwrite"})),
    Step(f"{__name__}:refuses_stale", RefusesStale, "stale_overwrite"),
    Step(f"{__name__}:restores", Restores, "", frozenset({"stale_after_restore"}),
         _LATE_FIRST_COPY | _UNKNOWN_RESTORE),
    Step(f"{__name__}:keeps_the_line", KeepsTheLine, "stale_after_restore",
         sometimes=_LATE_FIRST_COPY),
    Step(f"{__name__}:remembers_answers", RemembersAnswers, "non_idempotent_retry"),
)
"""The tutorial's steps in order, from the naive store to one that certifies."""
