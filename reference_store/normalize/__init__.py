"""The normalizer, under the name the reference store's users know it by.

The text folding itself lives in :mod:`invariants.normalize`, at the bottom layer, so
that code below the reference store (the production guard, the audit) canonicalises
exactly as the store does. What stays here is the model memcert ships for the
semantic level, :mod:`reference_store.normalize.minilm`, which needs torch.
"""

from __future__ import annotations

from invariants.normalize import (
    DEFAULT_LEXICON_PATH,
    Embedder,
    Level,
    Lexicon,
    Normalizer,
    load_lexicon,
)

__all__ = [
    "DEFAULT_LEXICON_PATH",
    "Embedder",
    "Level",
    "Lexicon",
    "Normalizer",
    "load_lexicon",
]
