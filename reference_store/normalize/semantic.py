"""The semantic level: free paraphrase, judged by an embedding model the caller plugs in.

memcert ships no model. An embedder is any callable that maps a batch of texts to one
vector each; two values are one fact when their vectors' cosine similarity reaches
the configured threshold. The negation guard is not here but in the normalizer: a
model may well score "likes X" and "does not like X" as near-identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from invariants.errors import InvalidArgument

__all__ = ["Embedder", "cosine", "similarity"]

#: Maps a batch of texts to one vector per text, all of one length.
Embedder = Callable[[Sequence[str]], Sequence[Sequence[float]]]


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
