"""What an agent asks its memory: ``search`` by text, ``recall`` by strength, and
``touch`` for what it used.

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

Each call is one SQL statement, and the Python that follows does only what it must: a
memory's tokens are computed once per distinct text, and a ``Hit`` is built only for
the rows that make the ``limit``.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import Row, bindparam, select, update

from invariants.errors import InvalidArgument
from invariants.normalize.semantic import cosine
from invariants.normalize.surface import CJK, fold

from .schema import ACTIVE, AT_KEY, memories, of_entity
from .validation import check_memory_type, check_namespace, check_tags, check_text

if TYPE_CHECKING:
    from .store import ReferenceStore

__all__ = [
    "RANK_WEIGHTS",
    "Hit",
    "recall",
    "search",
    "strength",
    "tokens",
    "touch",
]

#: Weights of similarity and strength in a search rank.
RANK_WEIGHTS = (0.6, 0.4)

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
    moment = store.database.clock() if now is None else now
    weight_sim, weight_strength = RANK_WEIGHTS
    scored: list[_Scored] = []
    for row, similarity in zip(rows, _similarities(store, query, rows), strict=True):
        if similarity > 0.0:
            power = _strength_of(row, moment)
            scored.append((weight_sim * similarity + weight_strength * power, similarity,
                           power, row))
    return _best(namespace, scored, limit)


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
    moment = store.database.clock() if now is None else now
    scored: list[_Scored] = []
    for row in rows:
        power = _strength_of(row, moment)
        scored.append((power, None, power, row))
    return _best(namespace, scored, limit)


def touch(store: ReferenceStore, namespace: str, entity_id: str, attribute: str) -> int:
    """Count one use of the active memory under ``attribute`` (any variant of its name).

    Returns the new access count, or 0 when there is no active memory to touch: an agent
    touches what it just read, and a delete racing in between is normal, not a mistake.
    The database does the arithmetic under the row lock, so concurrent touches never
    lose an increment. Touching changes no fact, so it takes no version and is not logged.
    """
    check_namespace(namespace)
    check_text("entity_id", entity_id)
    check_text("attribute", attribute)
    params = {"b_namespace": namespace, "b_entity_id": entity_id,
              "b_attr_key": store.normalizer.attribute_key(attribute),
              "b_now": store.database.clock()}
    count = store.database.transaction(lambda conn: conn.execute(_TOUCH, params).scalar())
    return 0 if count is None else int(count)


_m = memories.c
_TOUCH = (
    update(memories).where(*of_entity(memories), AT_KEY, ACTIVE)
    .values(access_count=_m.access_count + 1, last_accessed_at=bindparam("b_now"))
    .returning(_m.access_count)
)


def _check_limit(limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit={limit!r} must be an int >= 1.")


_Row = Row[*tuple[Any, ...]]
"""A candidate row: a memory's columns as :data:`_CANDIDATE` reads them, by name."""

_CANDIDATE = select(
    _m.entity_id, _m.attribute, _m.attr_key, _m.value, _m.value_key, _m.causal_seq, _m.version,
    _m.memory_type, _m.tags, _m.trust, _m.instruction_like, _m.access_count, _m.score,
    _m.half_life_seconds, _m.updated_at, _m.last_accessed_at,
)
"""What search and recall read of each active memory."""

SQL_TAGS = 4
"""The most tags a candidate query narrows by in SQL; any further ones, like every one,
are checked exactly on the rows in Python. Bounding it bounds the statement shapes."""

TAG_ESCAPE = "/"


def _candidates(
    store: ReferenceStore,
    namespace: str,
    tags: Iterable[str],
    memory_type: str | None,
    *,
    entity_id: str | None = None,
) -> Sequence[_Row]:
    """The active rows that pass the prefilter and carry every one of ``tags``.

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
    check_tags(wanted)
    if memory_type is not None:
        check_memory_type(memory_type)
    # Ordered as the partial index of active rows is, so SQLite reads them through it:
    # without statistics, another index on the namespace looks as good, and which one
    # it takes would depend on the order the schema created them in.
    query = _CANDIDATE.where(_m.namespace == namespace, ACTIVE).order_by(_m.entity_id,
                                                                         _m.attr_key)
    if entity_id is not None:
        query = query.where(_m.entity_id == entity_id)
    if memory_type is not None:
        query = query.where(_m.memory_type == memory_type)
    for tag in wanted[:SQL_TAGS]:
        query = query.where(_m.tags.like(tag_pattern(json.dumps(tag, ensure_ascii=False)),
                                         escape=TAG_ESCAPE))
    with store.database.read() as conn:
        rows = conn.execute(query).all()
    if not wanted:
        return rows
    return [row for row in rows if set(wanted) <= set(json.loads(row.tags))]


def tag_pattern(encoded: str) -> str:
    """``LIKE`` pattern for a tag's JSON text anywhere in the list, metacharacters escaped."""
    escaped = (encoded.replace(TAG_ESCAPE, TAG_ESCAPE * 2).replace("%", TAG_ESCAPE + "%")
               .replace("_", TAG_ESCAPE + "_"))
    return f"%{escaped}%"


def _similarities(store: ReferenceStore, query: str, rows: Sequence[_Row]) -> list[float]:
    if not rows:
        return []
    normalizer = store.normalizer
    if normalizer.embedder is not None:
        vectors = normalizer.embedder([query, *(f"{row.attribute}: {row.value}" for row in rows)])
        if len(vectors) != len(rows) + 1:
            raise InvalidArgument(
                f"embedder returned {len(vectors)} vector(s) for {len(rows) + 1} texts. "
                "An embedder must return one vector per text, in order."
            )
        return [max(0.0, cosine(vectors[0], vector)) for vector in vectors[1:]]
    wanted = tokens(fold(query)) | tokens(normalizer.value_key(query)) | tokens(
        normalizer.attribute_key(query))
    result = []
    for row in rows:
        have = _memory_tokens(row.attribute, row.attr_key, row.value, row.value_key)
        shared = len(wanted & have)
        result.append(shared / math.sqrt(len(wanted) * len(have)) if shared else 0.0)
    return result


@functools.lru_cache(maxsize=4096)
def _memory_tokens(attribute: str, attr_key: str, value: str, value_key: str) -> frozenset[str]:
    """The tokens a memory is matched by: a pure function of its four texts, so a search
    computes them once per distinct memory, not once per search."""
    return tokens(fold(attribute)) | tokens(attr_key) | tokens(fold(value)) | tokens(value_key)


def _strength_of(row: _Row, now: float) -> float:
    refreshed = float(row.updated_at)
    if row.last_accessed_at is not None:
        refreshed = max(refreshed, float(row.last_accessed_at))
    return strength(float(row.score), float(row.half_life_seconds), now - refreshed)


_Scored = tuple[float, float | None, float, _Row]
"""A candidate's rank, similarity (None for recall), strength and row."""


def _order(scored: _Scored) -> tuple[float, float, float, str, str, int]:
    """Best first, then by entity, attribute and version, which no two active memories
    share, so ties always break the same way."""
    rank, similarity, power, row = scored
    return -rank, -(similarity or 0.0), -power, row.entity_id, row.attribute, int(row.version)


def _best(namespace: str, scored: list[_Scored], limit: int) -> list[Hit]:
    """A ``Hit`` for each of the ``limit`` best candidates only."""
    return [Hit(namespace=namespace, entity_id=row.entity_id, attribute=row.attribute,
                value=row.value, causal_seq=int(row.causal_seq), version=int(row.version),
                memory_type=row.memory_type, tags=tuple(json.loads(row.tags)),
                trust=row.trust, instruction_like=bool(row.instruction_like),
                access_count=int(row.access_count), score=float(row.score), strength=power,
                similarity=similarity, rank=rank)
            for rank, similarity, power, row in heapq.nsmallest(limit, scored, key=_order)]
