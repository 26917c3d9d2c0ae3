"""What an agent asks its memory: ``search`` by text, ``recall`` by strength.

Both serve only ``active`` rows, prefiltered in SQL by namespace, memory type and tags,
and scored in Python, where the arithmetic is plain enough to check by hand.

Strength is a memory's ``score`` decayed by half-lives since it was last *refreshed*:
written, re-confirmed by a write of the same fact (``updated_at``), or used (``touch``
sets ``last_accessed_at``), whichever is latest. Reading search results does not
refresh them; an agent calls ``touch`` on what it actually used, so merely being
listed never keeps a memory alive.

Similarity is the cosine of the query's and the memory's token sets (``|Q ∩ D| /
sqrt(|Q| · |D|)``), or the cosine of their embeddings when the store's normalizer
holds an embedder. Tokens come from the surface form of the text and from its
canonical key at the store's level, so "americano" finds "喜欢美式" through the lexicon
while "咖啡" still finds "偏好美式咖啡" through its own characters. Chinese and Japanese
are cut into character bigrams, since they are written without spaces.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, Select, select

from invariants.errors import InvalidArgument

from .normalize.semantic import cosine
from .normalize.surface import CJK, fold
from .schema import memories
from .validation import check_memory_type, check_namespace, check_text

if TYPE_CHECKING:
    from .store import ReferenceStore

__all__ = [
    "RANK_WEIGHTS",
    "Hit",
    "recall",
    "search",
    "strength",
    "tokens",
]

#: Weights of similarity and strength in a search rank.
RANK_WEIGHTS = (0.6, 0.4)

MAX_TAG_BYTES = 256

_CJK_RUN = re.compile(f"[{CJK}]+")


@dataclass(frozen=True, slots=True)
class Hit:
    """One active memory as search or recall serves it.

    ``similarity`` is None for ``recall``, which has no query; its ``rank`` is then
    the strength itself.
    """

    namespace: str
    entity_id: str
    attribute: str
    value: str
    causal_seq: int
    version: int
    memory_type: str
    tags: tuple[str, ...]
    trust: str
    instruction_like: bool
    access_count: int
    score: float
    strength: float
    similarity: float | None
    rank: float


def strength(score: float, half_life_seconds: float, elapsed_seconds: float) -> float:
    """``score × 0.5^(elapsed / half_life)``.

    A negative elapsed time (one process's clock behind another's) counts as zero: a
    clock that ran backwards must not make a memory stronger than it was written.
    """
    if not (half_life_seconds > 0):
        raise InvalidArgument(
            f"half_life_seconds={half_life_seconds!r} must be > 0 (math.inf means "
            "never decays)."
        )
    if math.isnan(elapsed_seconds) or math.isnan(score):
        raise InvalidArgument(
            f"score={score!r}, elapsed_seconds={elapsed_seconds!r}: neither may be NaN."
        )
    return float(score * 0.5 ** (max(0.0, elapsed_seconds) / half_life_seconds))


def tokens(text: str) -> frozenset[str]:
    """Words of a surface-form text, with runs of CJK characters cut into bigrams."""
    found: set[str] = set()
    for chunk in text.split():
        start = 0
        for run in _CJK_RUN.finditer(chunk):
            if run.start() > start:
                found.add(chunk[start:run.start()])
            chars = run.group()
            if len(chars) == 1:
                found.add(chars)
            else:
                found.update(chars[i:i + 2] for i in range(len(chars) - 1))
            start = run.end()
        if start < len(chunk):
            found.add(chunk[start:])
    return frozenset(found)


def search(
    store: ReferenceStore,
    namespace: str,
    query: str,
    *,
    tags: Iterable[str] = (),
    memory_type: str | None = None,
    limit: int = 10,
    now: float | None = None,
) -> list[Hit]:
    """The active memories most relevant to ``query``, best first.

    Ranked by ``0.6 × similarity + 0.4 × strength``; a memory sharing nothing with the
    query is not a hit, however strong. ``tags`` must all be present on a memory.
    Ties are broken by similarity, then strength, then entity, attribute and version,
    so the same database always answers the same way.
    """
    check_text("query", query, max_bytes=store.config.max_value_bytes)
    _check_limit(limit)
    rows = _candidates(store, namespace, tags, memory_type)
    moment = store._clock() if now is None else now
    similarities = _similarities(store, query, rows)
    weight_sim, weight_strength = RANK_WEIGHTS
    hits = []
    for row, similarity in zip(rows, similarities, strict=True):
        if similarity <= 0.0:
            continue
        power = _strength_of(row, moment)
        hits.append(_hit(row, power, similarity, weight_sim * similarity + weight_strength * power))
    return _best(hits, limit)


def recall(
    store: ReferenceStore,
    namespace: str,
    *,
    entity_id: str | None = None,
    tags: Iterable[str] = (),
    memory_type: str | None = None,
    limit: int = 10,
    now: float | None = None,
) -> list[Hit]:
    """The strongest active memories of a namespace, or of one entity, strongest first."""
    if entity_id is not None:
        check_text("entity_id", entity_id)
    _check_limit(limit)
    rows = _candidates(store, namespace, tags, memory_type, entity_id=entity_id)
    moment = store._clock() if now is None else now
    hits = []
    for row in rows:
        power = _strength_of(row, moment)
        hits.append(_hit(row, power, None, power))
    return _best(hits, limit)


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit={limit!r} must be an int >= 1.")


def _candidates(
    store: ReferenceStore,
    namespace: str,
    tags: Iterable[str],
    memory_type: str | None,
    *,
    entity_id: str | None = None,
) -> list[Row[Any]]:
    """Active rows passing the prefilter; the tag test is finished here in Python.

    SQL narrows tags with ``LIKE '%"tag"%'`` on the JSON text (metacharacters
    escaped), which can over-match, e.g. SQLite's LIKE ignores ASCII case, so the
    decoded list is checked exactly before a row is kept.
    """
    check_namespace(namespace)
    if isinstance(tags, str):
        raise InvalidArgument(
            f"tags={tags!r} is one str, which would be read as its characters; "
            f"pass a tuple of tags, e.g. tags=({tags!r},)."
        )
    wanted = tuple(tags)
    for tag in wanted:
        check_text("tags", tag, max_bytes=MAX_TAG_BYTES)
    if memory_type is not None:
        check_memory_type(memory_type)
    query: Select[Any] = select(memories).where(
        memories.c.namespace == namespace, memories.c.status == "active")
    if entity_id is not None:
        query = query.where(memories.c.entity_id == entity_id)
    if memory_type is not None:
        query = query.where(memories.c.memory_type == memory_type)
    for tag in wanted:
        query = query.where(
            memories.c.tags.contains(json.dumps(tag, ensure_ascii=False), autoescape=True))
    with store._connect() as conn:
        rows = conn.execute(query).all()
    return [row for row in rows if set(wanted) <= set(json.loads(row.tags))]


def _similarities(store: ReferenceStore, query: str, rows: Sequence[Row[Any]]) -> list[float]:
    if not rows:
        return []
    embedder = store.normalizer.embedder
    if embedder is not None:
        vectors = embedder([query, *(f"{row.attribute}: {row.value}" for row in rows)])
        if len(vectors) != len(rows) + 1:
            raise InvalidArgument(
                f"embedder returned {len(vectors)} vector(s) for {len(rows) + 1} texts. "
                "An embedder must return one vector per text, in order."
            )
        return [max(0.0, cosine(vectors[0], vector)) for vector in vectors[1:]]
    normalizer = store.normalizer
    folded = fold(query)
    wanted = tokens(folded) | tokens(normalizer.value_key(query)) | tokens(
        normalizer.attribute_key(query))
    result = []
    for row in rows:
        have = (tokens(fold(row.attribute)) | tokens(row.attr_key)
                | tokens(fold(row.value)) | tokens(row.value_key))
        shared = len(wanted & have)
        result.append(shared / math.sqrt(len(wanted) * len(have)) if shared else 0.0)
    return result


def _strength_of(row: Row[Any], now: float) -> float:
    refreshed = float(row.updated_at)
    if row.last_accessed_at is not None:
        refreshed = max(refreshed, float(row.last_accessed_at))
    return strength(float(row.score), float(row.half_life_seconds), now - refreshed)


def _hit(row: Row[Any], power: float, similarity: float | None, rank: float) -> Hit:
    return Hit(
        namespace=row.namespace,
        entity_id=row.entity_id,
        attribute=row.attribute,
        value=row.value,
        causal_seq=int(row.causal_seq),
        version=int(row.version),
        memory_type=row.memory_type,
        tags=tuple(json.loads(row.tags)),
        trust=row.trust,
        instruction_like=bool(row.instruction_like),
        access_count=int(row.access_count),
        score=float(row.score),
        strength=power,
        similarity=similarity,
        rank=rank,
    )


def _best(hits: list[Hit], limit: int) -> list[Hit]:
    hits.sort(key=lambda hit: (
        -hit.rank, -(hit.similarity or 0.0), -hit.strength, hit.entity_id, hit.attribute,
        hit.version))
    return hits[:limit]
