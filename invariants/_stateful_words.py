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
from invariants.wording.values import DEFAULT_VALUE_BYTES, TEXT_CLASSES, with_payload

__all__ = [
    "MACHINE_SLOTS",
    "PAYLOAD_SIZES",
    "TWINS",
    "Attribute",
    "FactWording",
    "Payload",
    "SlotFact",
    "attribute_variant",
    "fact",
    "higher",
    "reworded",
    "twin",
]

MACHINE_SLOTS: tuple[str, ...] = ("coffee_preference", "city")
"""The slots the machine writes, of the tables' :data:`~invariants.wording.SLOTS`. Few
on purpose: writes collide on a slot often, which is where bugs live."""

OBJECTS = 2
"""Objects per slot a fact may be about."""

TWINS: tuple[str, ...] = ("_备注", "_笔记", "_记忆")
"""What a twin slot's name adds to its base slot's: Chinese characters alone, which an
ASCII-only canonicalizer drops, so that it folds the twins and their base into one key.
The third makes a name of 256 characters (:func:`twin`)."""

LONG_NAME = 256
"""The length of the long twin's name: the longest attribute name the issue asks for."""

PAYLOAD_SIZES = 15
"""A payload is 2**k characters long for k below this: 1 character to 16 KiB, each
doubling as likely, so short values stay common and Hypothesis shrinks toward them."""

@dataclass(frozen=True, slots=True)
class Attribute:
    """An attribute name for ``slot``, departing from the canonical name by ``level``.
    ``table`` is the slot of :data:`~invariants.wording.SLOTS` whose wording its facts
    take: the slot itself, or a twin's base."""

    slot: str
    name: str
    level: Paraphrase
    table: str = ""

    def __post_init__(self) -> None:
        if not self.table:
            object.__setattr__(self, "table", self.slot)


@dataclass(frozen=True, slots=True)
class Payload:
    """Text of one :data:`~invariants.wording.values.TEXT_CLASSES` class after a fact's
    text, ``length`` characters in all: what a store that cuts, re-encodes, strips or
    normalizes values turns into a value nobody wrote, as the scenarios' payloads do."""

    text_class: str
    length: int

    @property
    def number(self) -> int:
        """Tells payload facts of one slot and object apart in their text, as the
        scenarios' tags do: a semantic store never merges texts whose numbers differ,
        so two long payloads of one class never read as one fact."""
        return TEXT_CLASSES.index(self.text_class) * PAYLOAD_SIZES + self.length.bit_length()


@dataclass(frozen=True, slots=True)
class SlotFact:
    """One fact: "``slot``: (not) object number ``obj``", with a payload or not. ``id``
    is the ground truth a write's meta carries."""

    id: str
    slot: str
    obj: int
    negated: bool
    payload: Payload | None = None
    table: str = ""

    def texts(self, tag: str) -> Phrasing:
        """The fact's texts under ``tag``; each entity has its own tag, so that no text
        is written to two entities and a record always traces to one of them. A twin
        slot's facts take their base's wording with a tag of their own, so that no
        text is written to two slots either."""
        table = self.table or self.slot
        if table != self.slot:
            tag += str(TWINS.index(self.slot[len(table):len(table) + 3]) + 1)
        return _phrasing(table, self.obj, self.negated, tag)


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

    def value(self, tag: str, max_bytes: int = DEFAULT_VALUE_BYTES) -> str:
        """The value text to send to the entity whose tag is ``tag``; a payload makes it
        at most ``max_bytes`` bytes of UTF-8."""
        payload = self.fact.payload
        if payload is not None:
            text = f"{self.fact.texts(tag).canonical} n{payload.number}"
            return with_payload(text, random.Random(f"{self.fact.id}|{tag}"),
                                payload.text_class, max_bytes=max_bytes,
                                length=payload.length)
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


def fact(attribute: Attribute, obj: int, negated: bool,
         payload: Payload | None = None) -> SlotFact:
    """The fact "(not) object number ``obj``" about ``attribute``'s slot, a fact of its
    own with each payload."""
    name = list(SLOTS[attribute.table].objects)[obj]
    id_ = f"{attribute.slot}:{'not ' if negated else ''}{name}"
    if payload is not None:
        id_ += f"+{payload.text_class}/{payload.length}"
    return SlotFact(id_, attribute.slot, obj, negated, payload, attribute.table)


def twin(of: Attribute, suffix: str) -> Attribute:
    """A slot of its own, named after ``of``'s slot with ``suffix`` (one of
    :data:`TWINS`; the last is repeated to a name of :data:`LONG_NAME` characters): a
    store that keys by ASCII alone folds it into ``of``'s slot. A twin is named from
    its base slot's canonical name, since a reworded name with a suffix would be a
    name no lexicon knows; a twin of a twin is itself."""
    if of.table != of.slot:
        return of
    if suffix == TWINS[-1]:
        suffix = (suffix * LONG_NAME)[: LONG_NAME - len(of.table)]
    return Attribute(of.slot + suffix[:3], of.slot + suffix, "none", of.slot)


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
        return Attribute(of.slot, name, higher(of.level, "surface"), of.table)
    if level == "lexical" and of.table == of.slot:
        return Attribute(of.slot, rng.choice(SLOTS[of.slot].attribute_variants), "lexical")
    return of
