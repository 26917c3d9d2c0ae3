"""Facts and the texts that state them, handed out so that the ground truth holds.

Every fact gets a plan-unique id and a tag (the scenario's code and a counter, like
``cw17``) that appears in each of its texts, so no text is shared by two facts, within
the plan or across the scenarios of one suite, and no normalizer can fold two facts
together however hard it works on the wording.

A plain fact's text carries a payload of one of the value classes of
:mod:`invariants.wording.values` (emoji, combining marks, whitespace, SQL quotes...), to a
length drawn log-uniformly up to the plan's ``max_value_bytes``: a plain fact is written
only verbatim, so its text is free to be anything a store must keep as it is. Two
``normalization`` facts in turn share one payload, decomposed in the first and in NFC in
the second: separate facts whose values differ only in normalization form. Paraphrased
facts (:class:`Topic`) keep the tables' wording, since their variants are judged
against it.
"""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass

from invariants.history import Paraphrase
from invariants.wording.values import (
    DEFAULT_VALUE_BYTES,
    TEXT_CLASSES,
    log_uniform_length,
    nfd_payload,
    with_payload,
)

from ..paraphrases import (
    LANGS,
    SLOTS,
    Phrasing,
    attribute_surface_variant,
    phrasing,
    surface_variant,
)
from ..plan import Step

__all__ = [
    "LONG_ATTRIBUTES",
    "NON_ASCII_SLOTS",
    "PLAIN",
    "Facts",
    "ParaphraseFact",
    "PlanFact",
    "Topic",
    "scenario_code",
]

_LONG_STEM = ("agent_context_上下文_记忆_" * 13)[:255]
LONG_ATTRIBUTES: tuple[str, str] = (f"{_LONG_STEM}甲", f"{_LONG_STEM}乙")
"""Two attribute names of 256 characters that differ only in their last, Chinese,
character."""

NON_ASCII_SLOTS: tuple[str, ...] = ("备注", "笔记", "memo_备注", "memo_笔记", *LONG_ATTRIBUTES)
"""Slots named in Chinese, in mixed script and at length, in pairs that differ only in
characters an ASCII-only canonicalizer drops: each pair is two slots, which such a
store folds into one key."""

#: The template of a plain fact's text per slot; the tag makes each text unique.
PLAIN: dict[str, str] = {
    "city": "lives in city-{tag}",
    "job": "works as role-{tag}",
    "coffee_preference": "drinks blend-{tag}",
    "drink_preference": "sips brew-{tag}",
    "language": "speaks dialect-{tag}",
    "备注": "备注 remark-{tag}",
    "笔记": "笔记 jotting-{tag}",
    "memo_备注": "memo remark-{tag}",
    "memo_笔记": "memo jotting-{tag}",
    LONG_ATTRIBUTES[0]: "long key one-{tag}",
    LONG_ATTRIBUTES[1]: "long key two-{tag}",
}


def scenario_code(name: str) -> str:
    """The initials of a scenario's name, which start every tag it hands out."""
    return "".join(part[0] for part in name.split("_") if part)


@dataclass(frozen=True, slots=True)
class PlanFact:
    """One fact about one key, and its canonical write."""

    id: str
    namespace: str
    entity_id: str
    slot: str
    text: str

    def write(self, *, pause_s: float = 0.0, seq_offset: int = 0) -> Step:
        """The fact in its plain form: canonical attribute, canonical text."""
        return self._step(self.slot, self.text, "none", pause_s, seq_offset)

    def _step(
        self, attribute: str, value: str, paraphrase: Paraphrase, pause_s: float, seq_offset: int
    ) -> Step:
        return Step(
            kind="write",
            namespace=self.namespace,
            entity_id=self.entity_id,
            attribute=attribute,
            value=value,
            meta={"fact": self.id, "slot": self.slot, "paraphrase": paraphrase},
            seq_offset=seq_offset,
            pause_s=pause_s,
        )


@dataclass(frozen=True, slots=True)
class ParaphraseFact(PlanFact):
    """A fact whose writes may paraphrase its text and its attribute name."""

    phrasing: Phrasing

    def variant(
        self, rng: random.Random, level: Paraphrase, *, pause_s: float = 0.0, seq_offset: int = 0
    ) -> Step:
        """A write of this fact that departs from its plain form by exactly ``level``.

        The level of a write is the higher of its value's and its attribute's, so one of
        the two is at ``level`` and the other at or below it.
        """
        if level == "none":
            return self.write(pause_s=pause_s, seq_offset=seq_offset)
        canonical = self.phrasing.canonical
        if level == "semantic":
            value = self._noisy(rng, rng.choice(self.phrasing.semantic))
            attribute = self._attribute(rng, rng.choice(("none", "surface", "lexical")))
        elif level == "lexical":
            if rng.random() < 0.7:
                value = self._noisy(rng, rng.choice(self.phrasing.lexical))
                attribute = self._attribute(rng, rng.choice(("none", "surface", "lexical")))
            else:
                value = rng.choice((canonical, surface_variant(canonical, rng)))
                attribute = self._attribute(rng, "lexical")
        else:
            which = rng.randrange(3)
            value = canonical if which == 1 else surface_variant(canonical, rng)
            attribute = self._attribute(rng, "none" if which == 0 else "surface")
        return self._step(attribute, value, level, pause_s, seq_offset)

    def _attribute(self, rng: random.Random, level: str) -> str:
        if level == "none":
            return self.slot
        if level == "surface":
            return attribute_surface_variant(self.slot, rng)
        name = rng.choice(SLOTS[self.slot].attribute_variants)
        return attribute_surface_variant(name, rng) if rng.random() < 0.3 else name

    @staticmethod
    def _noisy(rng: random.Random, text: str) -> str:
        return surface_variant(text, rng) if rng.random() < 0.3 else text


class Topic:
    """What one key says over time: facts about one slot of one entity, in turn.

    Facts come as must-not-merge pairs: "likes X", then "does not like X", then
    "likes Y"... Each fact's canonical language is drawn at random, so plain forms come
    in Chinese and in English. When the objects run out, the topic takes a new tag and
    starts over.
    """

    def __init__(self, facts: Facts, namespace: str, entity_id: str, slot: str) -> None:
        self._facts = facts
        self.namespace = namespace
        self.entity_id = entity_id
        self.slot = slot
        self._queue: list[tuple[bool, str]] = []
        self._tag = ""

    def next(self, rng: random.Random) -> ParaphraseFact:
        if not self._queue:
            self._tag = self._facts.tag()
            objects = list(SLOTS[self.slot].objects)
            rng.shuffle(objects)
            self._queue = [(positive, obj) for obj in objects for positive in (True, False)]
            self._queue.reverse()
        positive, obj = self._queue.pop()
        words = phrasing(self.slot, positive, obj, self._tag, rng.choice(LANGS))
        return ParaphraseFact(
            id=self._facts.fact_id(),
            namespace=self.namespace,
            entity_id=self.entity_id,
            slot=self.slot,
            text=words.canonical,
            phrasing=words,
        )


class Facts:
    """Hands out fact ids, tags and plain texts for one plan, in the order asked for.

    A plain text's payload is drawn from a stream of its own per tag, seeded by ``seed``,
    so the same seed gives the same texts and the generators' own streams are untouched.
    """

    def __init__(
        self, code: str, *, seed: int | str = 0, max_value_bytes: int = DEFAULT_VALUE_BYTES
    ) -> None:
        self._code = code
        self._tags = 0
        self._facts = 0
        self._seed = seed
        self.max_value_bytes = max_value_bytes
        self._twin: str | None = None
        """The NFC form of the last normalization payload, for the next one."""

    def tag(self) -> str:
        self._tags += 1
        return f"{self._code}{self._tags}"

    def fact_id(self) -> str:
        self._facts += 1
        return f"f{self._facts}"

    def plain(
        self, namespace: str, entity_id: str, slot: str, *, text_class: str | None = None,
        length: int | None = None,
    ) -> PlanFact:
        """A new fact with a text of its own, in one of the :data:`PLAIN` slots: the
        slot's template, then a payload of ``text_class`` (drawn when None) about
        ``length`` characters long (drawn log-uniformly when None)."""
        tag = self.tag()
        rng = random.Random(f"values|{self._code}|{self._seed}|{tag}")
        chosen = text_class or rng.choice(TEXT_CLASSES)
        text = PLAIN[slot].format(tag=tag)
        size = length or log_uniform_length(rng, self.max_value_bytes)
        body = None
        if chosen == "normalization":
            body, self._twin = self._twin, None
            if body is None:
                body = nfd_payload(rng, max(1, size - len(text) - 1))
        value = with_payload(text, rng, chosen, max_bytes=self.max_value_bytes, length=size,
                             body=body)
        if chosen == "normalization" and body is not None and self._twin is None and (
                unicodedata.normalize("NFC", body) != body):
            self._twin = unicodedata.normalize("NFC", value[len(text) + 1:])
        return PlanFact(id=self.fact_id(), namespace=namespace, entity_id=entity_id,
                        slot=slot, text=value)

    def topic(self, namespace: str, entity_id: str, slot: str) -> Topic:
        """A key whose facts are paraphrased, one of the :data:`~scenarios.paraphrases.SLOTS`."""
        return Topic(self, namespace, entity_id, slot)
