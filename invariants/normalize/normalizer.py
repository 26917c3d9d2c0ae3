"""The normalizer the store calls: canonical keys, and whether two values are one fact."""

from __future__ import annotations

import math
import re
from typing import Literal, get_args

from invariants.errors import InvalidArgument

from .lexical import Lexicon, default_lexicon
from .semantic import Embedder, blind_spots, similarity
from .surface import fold

__all__ = ["Level", "Normalizer"]

#: How hard the normalizer works to see two texts as one fact; each level includes
#: the ones before it.
Level = Literal["surface", "lexical", "semantic"]
_LEVELS: tuple[str, ...] = get_args(Level)
_NUMBER = re.compile(r"\d+")


class Normalizer:
    """Canonical keys for attributes and values, at one level; immutable once built.

    ``value_key`` and ``attribute_key`` are deterministic at every level (the semantic
    level keys like the lexical one) and idempotent. ``same_fact`` is key equality,
    and at the semantic level also embedding similarity at or above ``threshold``,
    except across a difference in negation, in the numbers a value holds, or in the
    characters the embedder says it cannot read, which no similarity can override:
    sentence models score "room 101" and "room 102" as nearly one text, and a wrong
    merge loses the newer fact, where a missed one only keeps a paraphrase twice.

    An ``embedder`` given below the semantic level is kept but not consulted here, so
    a store can hand the same one to its search without switching levels.
    """

    __slots__ = ("_embedder", "_level", "_lexicon", "_threshold")

    def __init__(
        self,
        level: Level = "lexical",
        *,
        lexicon: Lexicon | None = None,
        embedder: Embedder | None = None,
        threshold: float = 0.9,
    ) -> None:
        if level not in _LEVELS:
            raise InvalidArgument(
                f"level={level!r} (type {type(level).__name__}) is not a normalization "
                "level. Use 'surface', 'lexical' or 'semantic'."
            )
        if lexicon is not None and not isinstance(lexicon, Lexicon):
            raise InvalidArgument(
                f"lexicon={lexicon!r} (type {type(lexicon).__name__}) is not a Lexicon. "
                "Build one with load_lexicon(path), or pass lexicon=None for the default."
            )
        if embedder is not None and not callable(embedder):
            raise InvalidArgument(
                f"embedder={embedder!r} (type {type(embedder).__name__}) is not callable. "
                "Pass a function that maps a list of texts to one vector per text."
            )
        if level == "semantic" and embedder is None:
            raise InvalidArgument(
                "level='semantic' needs an embedder, and none was given. Pass "
                "embedder=<a function that maps a list of texts to one vector per text>, "
                "or use level='lexical'."
            )
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise InvalidArgument(
                f"threshold={threshold!r} (type {type(threshold).__name__}) is not a number. "
                "Pass the cosine similarity at which two values are one fact, in (0, 1], "
                "e.g. threshold=0.9."
            )
        if not (math.isfinite(threshold) and 0 < threshold <= 1):
            raise InvalidArgument(
                f"threshold={threshold!r} (type {type(threshold).__name__}) is outside "
                "(0, 1]. Pass the cosine similarity at which two values are one fact, "
                "e.g. threshold=0.9."
            )
        self._level: Level = level
        self._lexicon = lexicon if lexicon is not None else default_lexicon()
        self._embedder = embedder
        self._threshold = float(threshold)

    @property
    def level(self) -> Level:
        return self._level

    @property
    def lexicon(self) -> Lexicon:
        return self._lexicon

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def embedder(self) -> Embedder | None:
        """The embedder given at construction, used for similarity beyond same_fact too."""
        return self._embedder

    def __repr__(self) -> str:
        return f"Normalizer(level={self._level!r}, threshold={self._threshold!r})"

    def attribute_key(self, attribute: str) -> str:
        """The slot an attribute name stands for."""
        folded = fold(attribute)
        if self._level == "surface":
            return folded
        return self._lexicon.slot(folded)

    def value_key(self, value: str) -> str:
        """The canonical text of a value; equal keys mean one fact at every level."""
        folded = fold(value)
        if self._level == "surface":
            return folded
        return self._lexicon.rewrite(folded)

    def same_fact(self, a: str, b: str) -> bool:
        """Whether values ``a`` and ``b`` state one fact, so a store keeps one record."""
        key_a, key_b = self.value_key(a), self.value_key(b)
        if key_a == key_b:
            return True
        if self._embedder is None or self._level != "semantic":
            return False
        if self._lexicon.negations(key_a) != self._lexicon.negations(key_b):
            return False
        if sorted(_NUMBER.findall(key_a)) != sorted(_NUMBER.findall(key_b)):
            return False
        unreadable = blind_spots(self._embedder)
        if unreadable is not None and sorted(unreadable(a)) != sorted(unreadable(b)):
            return False
        return similarity(self._embedder, a, b) >= self._threshold
