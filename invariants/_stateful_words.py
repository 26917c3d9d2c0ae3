"""What the stateful machine says: facts, their paraphrases and attribute spellings.

The wording comes from the scenarios' paraphrase tables (``scenarios.paraphrases``),
the one ground truth on which texts state one fact and at which level; the reference
store's lexicon is tested against those tables. A second table here would drift from
them. ``invariants`` sits below ``scenarios`` in the layers, so the tables are imported
inside the functions below, on first use by a running machine, never when ``invariants`` or
this module is imported; the dependency is on data only (no database, no runner).

Every text is a pure function of small integers that Hypothesis draws (``obj``,
``pick``), so a printed program replays to the very same texts.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from scenarios.paraphrases import Phrasing

__all__ = [
    "LEVELS",
    "SLOTS",
    "Attribute",
    "Fact",
    "Level",
    "Wording",
    "attribute_variant",
    "fact",
    "higher",
    "reworded",
]

Level: TypeAlias = Literal["none", "surface", "lexical", "semantic"]
LEVELS: tuple[Level, ...] = ("none", "surface", "lexical", "semantic")

SLOTS: tuple[str, ...] = ("coffee_preference", "city")
"""Few slots on purpose: writes collide on a slot often, which is where bugs live."""

OBJECTS = 2
"""Objects per slot a fact may be about."""

@dataclass(frozen=True, slots=True)
class Attribute:
    """An attribute name for ``slot``, departing from the canonical name by ``level``."""

    slot: str
    name: str
    level: Level


@dataclass(frozen=True, slots=True)
class Fact:
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
class Wording:
    """A way to write ``fact``: the attribute name, and which text of the fact to send
    (``value_level``, and ``pick``, which chooses among the texts of that level)."""

    fact: Fact
    attribute: Attribute
    value_level: Level
    pick: int = 0

    @property
    def level(self) -> Level:
        """How far the write departs from the fact's plain form, name or value."""
        return higher(self.value_level, self.attribute.level)

    def value(self, tag: str) -> str:
        """The value text to send to the entity whose tag is ``tag``."""
        from scenarios.paraphrases import surface_variant

        texts = self.fact.texts(tag)
        rng = random.Random(self.pick)
        if self.value_level == "surface":
            return surface_variant(texts.canonical, rng)
        if self.value_level == "lexical":
            return rng.choice(texts.lexical)
        if self.value_level == "semantic":
            return rng.choice(texts.semantic)
        return texts.canonical


def higher(a: Level, b: Level) -> Level:
    return a if LEVELS.index(a) >= LEVELS.index(b) else b


def fact(slot: str, obj: int, negated: bool) -> Fact:
    """The fact "``slot``: (not) object number ``obj``"."""
    from scenarios.paraphrases import SLOTS as TABLES

    name = list(TABLES[slot].objects)[obj]
    return Fact(f"{slot}:{'not ' if negated else ''}{name}", slot, obj, negated)


@functools.cache
def _phrasing(slot: str, obj: int, negated: bool, tag: str) -> Phrasing:
    """The scenarios' texts of one fact; its canonical language alternates by object."""
    from scenarios.paraphrases import SLOTS as TABLES
    from scenarios.paraphrases import phrasing

    name = list(TABLES[slot].objects)[obj]
    return phrasing(slot, not negated, name, tag, ("en", "zh")[obj % 2])


def reworded(of: Wording, level: Level, pick: int) -> Wording:
    """A wording of ``of``'s fact at ``level``: its value reworded, its attribute name,
    or both (``pick`` decides, and seeds the variant), as the scenarios word them."""
    if level == "semantic":
        return Wording(of.fact, of.attribute, "semantic", pick)
    which = pick % 3
    attribute = of.attribute if which == 0 else attribute_variant(of.attribute, level, pick)
    return Wording(of.fact, attribute, "none" if which == 1 else level, pick)


def attribute_variant(of: Attribute, level: Level, pick: int) -> Attribute:
    """Another name for ``of``'s slot: re-spelt (surface) or reworded (lexical)."""
    from scenarios.paraphrases import SLOTS as TABLES
    from scenarios.paraphrases import attribute_surface_variant

    rng = random.Random(pick)
    if level == "surface":
        name = attribute_surface_variant(of.name, rng)
        return Attribute(of.slot, name, higher(of.level, "surface"))
    if level == "lexical":
        return Attribute(of.slot, rng.choice(TABLES[of.slot].attribute_variants), "lexical")
    return of
