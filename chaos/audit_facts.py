"""The slot and fact of each record of one entity, as ``memcert audit`` keys them.

At the surface and lexical levels a record's fact is its value's canonical key: equal
keys, one fact. At the semantic level two values are one fact when
:meth:`invariants.normalize.Normalizer.same_fact` says so, which compares them by their
embeddings: a relation between two values, not a key either has alone. So each slot's
values are grouped in the order the store applied them, each joining the first group
whose first value states its fact, and the group is keyed by that first value's key.
This is the reference store's own rule (a write merges into the record it states the
same fact as), so a store that merges as it does shows no duplicate.

The model is the costly part: :class:`BatchedEmbedder` embeds every value of an entity
in one call before any two are compared, instead of a call per pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from invariants.normalize import Embedder, Normalizer
from invariants.normalize.semantic import blind_spots

__all__ = ["BatchedEmbedder", "fact_keys"]


class BatchedEmbedder:
    """An embedder that answers from the vectors of its last :meth:`prefetch`, and
    embeds what it was not given there. It keeps one entity's vectors at a time, so an
    audit's memory does not grow with the store."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._vectors: dict[str, Sequence[float]] = {}
        self.unreadable = blind_spots(embedder)
        """The wrapped embedder's ``unreadable``, which the normalizer's guard reads."""

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` in one call, forgetting the vectors held before."""
        self._vectors = {}
        self._fill(list(dict.fromkeys(texts)))

    def __call__(self, texts: Sequence[str]) -> list[Sequence[float]]:
        self._fill([text for text in dict.fromkeys(texts) if text not in self._vectors])
        return [self._vectors[text] for text in texts]

    def _fill(self, missing: list[str]) -> None:
        if missing:
            self._vectors.update(zip(missing, self._embedder(missing), strict=True))


def fact_keys(normalizer: Normalizer, embedder: BatchedEmbedder | None,
              records: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (slot, fact) of each (attribute, value), in the order given: the order the
    store applied them, which decides each semantic group's first value."""
    keys = [(normalizer.attribute_key(attribute), normalizer.value_key(value))
            for attribute, value in records]
    if normalizer.level != "semantic":
        return keys
    if embedder is not None:
        embedder.prefetch([value for _, value in records])
    firsts: dict[str, list[tuple[str, str]]] = {}
    """Per slot, each group's first value and its key."""
    facts = []
    for (slot, key), (_, value) in zip(keys, records, strict=True):
        groups = firsts.setdefault(slot, [])
        fact = next((k for first, k in groups if k == key or normalizer.same_fact(first, value)),
                    None)
        if fact is None:
            groups.append((value, key))
            fact = key
        facts.append((slot, fact))
    return facts
