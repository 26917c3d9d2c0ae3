"""The semantic level: free paraphrase, judged by an embedding model the caller plugs in.

memcert ships no model. An embedder is any callable that maps a batch of texts to one
vector each; two values are one fact when their vectors' cosine similarity reaches
the configured threshold. The negation guard is not here but in the normalizer: a
model may well score "likes X" and "does not like X" as near-identical.

An embedder may also say what it cannot see, with a method ``unreadable(text)``
returning the characters of ``text`` it reads only as "unknown"; the normalizer never
lets it merge two values that differ there (:data:`Blind`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from invariants.errors import InvalidArgument

__all__ = ["Blind", "Embedder", "blind_spots", "cosine", "similarity"]

#: Maps a batch of texts to one vector per text, all of one length.
Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]

#: An embedder's ``unreadable``: the characters of a text it reads only as "unknown".
Blind = Callable[[str], Sequence[str]]


def blind_spots(embedder: Embedder) -> Blind | None:
    """The embedder's ``unreadable`` method, if it has one."""
    unreadable = getattr(embedder, "unreadable", None)
    return unreadable if callable(unreadable) else None


def similarity(embedder: Embedder, a: str, b: str) -> float:
    """Cosine similarity of ``a`` and ``b`` as the embedder sees them, in one batch."""
    vectors = embedder([a, b])
    if len(vectors) != 2:
        raise InvalidArgument(
            f"embedder returned {len(vectors)} vector(s) for 2 texts. An embedder must "
            "return one vector per text, in order."
        )
    first, second = vectors
    if len(first) != len(second):
        raise InvalidArgument(
            f"embedder returned vectors of lengths {len(first)} and {len(second)}. An "
            "embedder must give every text a vector of the same length."
        )
    return cosine(first, second)


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros, as it points nowhere."""
    norm = math.sqrt(math.fsum(x * x for x in u) * math.fsum(y * y for y in v))
    if norm == 0.0:
        return 0.0
    return math.fsum(x * y for x, y in zip(u, v, strict=True)) / norm
