"""What a perfect model would judge, for the adapters whose backend needs a model.

graphiti and crewai decide what to merge, replace or keep by asking a model, and find
what to ask about with an embedder. memcert certifies the backend's mechanics, not a
model's quality, so their scripted models judge as a perfect one would: two texts state
the same thing when memcert's lexical normalizer gives them one canonical form, the very
rule its checkers apply. This module holds that judgement once, for every such adapter:
a write's text (:func:`fact`), what it is about (:func:`slot`), and an embedding
(:func:`embedding`) that puts one slot's facts together and paraphrases on one point.
It imports no backend, so each adapter stays importable on its own.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Final, NamedTuple

from invariants.normalize import Normalizer

__all__ = ["DIMENSIONS", "SEPARATOR", "Slot", "embedding", "fact", "same_name", "slot"]

SEPARATOR: Final = " | "
DIMENSIONS: Final = 256
"""The embedding's length: half for the slot's words, half for the value's."""
SLOT_WEIGHT: Final = 3.0
"""How much more the slot weighs than the value in an embedding: two facts of one slot
are at cosine 0.9 or more, facts of two slots at 0.1 or less."""

_NORMALIZER = Normalizer("lexical")
_WORD = re.compile(r"\w+")


class Slot(NamedTuple):
    """What a fact is about and what it says, in canonical form."""

    entity: str
    attribute: str
    value: str


def fact(entity_id: str, attribute: str, value: str) -> str:
    """A write as text: subject, relation and value, which is all a model is shown."""
    return SEPARATOR.join((entity_id, attribute, value))


def slot(text: str) -> Slot | None:
    """The canonical slot and value of a :func:`fact` text, or None for other text."""
    parts = text.strip().split(SEPARATOR, 2)
    if len(parts) != 3:
        return None
    entity, attribute, value = parts
    return Slot(entity, _NORMALIZER.attribute_key(attribute), _NORMALIZER.value_key(value))


def same_name(a: str, b: str) -> bool:
    """Whether two names (of entities or values) state the same thing."""
    return _NORMALIZER.value_key(a) == _NORMALIZER.value_key(b)


def embedding(text: str) -> list[float]:
    """A unit vector of hashed canonical words: for a fact, its slot weighs
    :data:`SLOT_WEIGHT` times its value; for a name, its value key alone."""
    found = slot(text)
    half = DIMENSIONS // 2
    vector = [0.0] * DIMENSIONS
    if found is None:
        _add(vector, 0, _NORMALIZER.value_key(text), 1.0)
    else:
        _add(vector, 0, f"{found.entity} {found.attribute}", SLOT_WEIGHT)
        _add(vector, half, found.value, 1.0)
    total = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / total for x in vector]


def _add(vector: list[float], start: int, text: str, weight: float) -> None:
    """Add ``text``'s hashed words, as a unit vector times ``weight``, to the half of
    ``vector`` that begins at ``start``."""
    half = len(vector) // 2
    part = [0.0] * half
    for word in _WORD.findall(text.casefold()):
        digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
        part[int.from_bytes(digest, "big") % half] += 1.0
    norm = math.sqrt(sum(x * x for x in part))
    if norm:
        for i, x in enumerate(part):
            vector[start + i] += weight * x / norm
