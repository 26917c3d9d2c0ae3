"""Semantic normalization: paraphrases of one fact leave one record. A violation is a
*duplicate*."""

from __future__ import annotations

from invariants.errors import InvalidArgument
from invariants.levels import PARAPHRASE_LEVELS, Paraphrase
from invariants.verdict import DuplicateExplanation, Key, Violation

from ._base import Checker
from ._trace import Trace
from ._view import ReadView, Traced

__all__ = ["SemanticNormalization"]

_RANK: dict[str, int] = {level: rank for rank, level in enumerate(PARAPHRASE_LEVELS)}


class SemanticNormalization(Checker):
    """Flags an ok read that returns two or more records of one fact in one slot.

    ``level`` is the normalization level the backend claims. Copies whose paraphrases
    go beyond it (a lexical rewording, for a backend that claims ``surface``) are not
    violations; they are counted in coverage as ``duplicates_beyond_level``. A fact
    served twice under the very same wording is a violation at every level.

    Unit of ``checked``: a read × a slot of the read's entity that, when the read
    completed, had some fact with two or more writes that had not failed, or that the
    read served one write's value twice in. The rate counts such slot reads that served
    a duplicate, once however many facts they doubled, so it stays at most 1; the
    violations count every fact doubled. Coverage keeps ``extra_record_values``: the
    distinct values ever served as an extra copy of a fact.
    """

    name = "semantic_normalization"
    kind = "duplicate"
    numerator_name = "reads of a slot serving a fact twice"
    denominator_name = "reads of a slot with a fact written or served twice"

    def __init__(
        self, *, level: Paraphrase = "semantic", trace: Trace | None = None, keep: int = 20
    ) -> None:
        if level not in _RANK:
            raise InvalidArgument(
                f"level={level!r} (type {type(level).__name__}) is not a paraphrase level; "
                f"use one of {', '.join(PARAPHRASE_LEVELS)}"
            )
        super().__init__(trace=trace, keep=keep)
        self.level = level
        self._rank = _RANK[level]
        self._extra_values: set[tuple[str, str, str]] = set()
        self._beyond = 0
        self._failed = 0

    def _on_read(self, view: ReadView) -> None:
        ent = view.entity
        if ent is None:
            return
        self.checked += ent.repeated
        if not view.stacked:
            return
        for slot, group in view.by_slot.items():
            if len(group) < 2:
                continue
            per_fact: dict[str, list[Traced]] = {}
            for t in group:
                per_fact.setdefault(t.write.fact, []).append(t)
            found = self._count
            for fact, copies in per_fact.items():
                if len(copies) >= 2:
                    self._duplicate(view, slot, fact, copies)
            if self._count > found:
                self._failed += 1
                if not ent.keys[slot].repeated_facts:
                    # One write's value served twice: a check ent.repeated did not count.
                    self.checked += 1

    def _duplicate(self, view: ReadView, slot: str, fact: str, copies: list[Traced]) -> None:
        values = {t.record.value for t in copies}
        # The same wording twice needs no normalization at all to be merged.
        rank = (
            0
            if len(values) < len(copies)
            else max(_RANK.get(p.paraphrase, 0) for t in copies for p in t.producers)
        )
        if rank > self._rank:
            self._beyond += 1
            return
        # The copy from the oldest write is the record the others should have merged into.
        by_age = sorted(copies, key=lambda t: min(p.seq for p in t.producers))
        for t in by_age[1:]:
            self._extra_values.add((view.namespace, view.entity_id, t.record.value))
        writes = tuple(t.sender() for t in copies)
        self._add(
            Violation(
                kind="duplicate",
                key=Key(view.namespace, view.entity_id, slot),
                witnesses=tuple(sorted({w.index for w in writes} | {view.invoke})),
                explanation=DuplicateExplanation(
                    read=view.ref(),
                    slot=slot,
                    fact=fact,
                    level=PARAPHRASE_LEVELS[rank],
                    writes=tuple(w.ref(view.t0) for w in writes),
                ),
                magnitude=len(copies),
            )
        )

    def _failed_checks(self) -> int:
        return self._failed

    def _coverage(self) -> dict[str, int]:
        written = self._trace.paraphrase_writes
        coverage = {f"paraphrase_writes_{level}": written[level] for level in PARAPHRASE_LEVELS[1:]}
        coverage["repeated_fact_slot_reads"] = self.checked
        coverage["duplicates_beyond_level"] = self._beyond
        coverage["extra_record_values"] = len(self._extra_values)
        return coverage

    def _nothing_checked(self) -> str:
        if not any(self._trace.paraphrase_writes[level] for level in PARAPHRASE_LEVELS[1:]):
            return "no paraphrase write took effect"
        return "no read of a slot where one fact had 2 or more writes"
