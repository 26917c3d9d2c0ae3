"""What the stateful machine says: facts, their paraphrases and attribute spellings.

The wording comes from the tables of :mod:`invariants.wording`, the one ground truth on
which texts state one fact and at which level, which the scenarios word their facts
from too and the reference store's lexicon is tested against. A second table here
would drift from them.

Every text is a pure function of small integers that Hypothesis draws (``obj``,
``pick``), so a printed program replays to the very same texts.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass

from invariants.levels import PARAPHRASE_LEVELS, Paraphrase
from invariants.wording import SLOTS, Phrasing, attribute_surface_variant, phrasing, surface_variant

__all__ = [
    "MACHINE_SLOTS",
    "Attribute",
    "FactWording",
    "SlotFact",
    "attribute_variant",
    "fact",
    "higher",
    "reworded",
]

MACHINE_SLOTS: tuple[str, ...] = ("coffee_preference", "city")
"""The slots the machine writes, of the tables' :data:`~invariants.wording.SLOTS`. Few
on purpose: writes collide on a slot often, which is where bugs live."""

OBJECTS = 2
"""Objects per slot a fact may be about."""

@dataclass(frozen=True, slots=True)
class Attribute:
    """An attribute name for ``slot``, departing from the canonical name by ``level``."""

    slot: str
    name: str
    level: Paraphrase


@dataclass(frozen=True, slots=True)
class SlotFact:
    """One fact: "``slot``: (not) object number ``obj``". ``id`` is the ground truth a
    write's meta carries."""

    id: str
    slot: str
    obj: int
    negated: bool

    def texts(self, tag: str) -> Phrasing:
        """The fact's texts under ``tag``; each entity has its own tag, so that no text
        is written to two entities and a record always traces to one of them."""
        return _phrasing(self.slot, self.obj, self.negated, tag)


@dataclass(frozen=True, slots=True)
class FactWording:
    """A way to write ``fact``: the attribute name, and which text of the fact to send
    (``value_level``, and ``pick``, which chooses among the texts of that level)."""

    fact: SlotFact
    attribute: Attribute
    value_level: Paraphrase
    pick: int = 0

    @property
    def level(self) -> Paraphrase:
        """How far the write departs from the fact's plain form, name or value."""
        return higher(self.value_level, self.attribute.level)

    def value(self, tag: str) -> str:
        """The value text to send to the entity whose tag is ``tag``."""
        texts = self.fact.texts(tag)
        rng = random.Random(self.pick)
        if self.value_level == "surface":
            return surface_variant(texts.canonical, rng)
        if self.value_level == "lexical":
            return rng.choice(texts.lexical)
        if self.value_level == "semantic":
            return rng.choice(texts.semantic)
        return texts.canonical


def higher(a: Paraphrase, b: Paraphrase) -> Paraphrase:
    return a if PARAPHRASE_LEVELS.index(a) >= PARAPHRASE_LEVELS.index(b) else b


def fact(slot: str, obj: int, negated: bool) -> SlotFact:
    """The fact "``slot``: (not) object number ``obj``"."""
    name = list(SLOTS[slot].objects)[obj]
    return SlotFact(f"{slot}:{'not ' if negated else ''}{name}", slot, obj, negated)


@functools.cache
def _phrasing(slot: str, obj: int, negated: bool, tag: str) -> Phrasing:
    """The texts of one fact; its canonical language alternates by object."""
    name = list(SLOTS[slot].objects)[obj]
    return phrasing(slot, not negated, name, tag, ("en", "zh")[obj % 2])


def reworded(of: FactWording, level: Paraphrase, pick: int) -> FactWording:
    """A wording of ``of``'s fact at ``level``: its value reworded, its attribute name,
    or both (``pick`` decides, and seeds the variant), as the scenarios word them."""
    if level == "semantic":
        return FactWording(of.fact, of.attribute, "semantic", pick)
    which = pick % 3
    attribute = of.attribute if which == 0 else attribute_variant(of.attribute, level, pick)
    return FactWording(of.fact, attribute, "none" if which == 1 else level, pick)


def attribute_variant(of: Attribute, level: Paraphrase, pick: int) -> Attribute:
    """Another name for ``of``'s slot: re-spelt (surface) or reworded (lexical)."""
    rng = random.Random(pick)
    if level == "surface":
        name = attribute_surface_variant(of.name, rng)
        return Attribute(of.slot, name, higher(of.level, "surface"))
    if level == "lexical":
        return Attribute(of.slot, rng.choice(SLOTS[of.slot].attribute_variants), "lexical")
    return of
