"""Canonical keys for memory attributes and values, so variants of one fact collide.

Three levels, each including the one before:

* ``surface``: case, width, Unicode form, whitespace, punctuation and separators;
* ``lexical`` (the default): synonyms, reworded templates and slot names from a
  lexicon that users can extend, in Chinese and English;
* ``semantic``: free paraphrase, judged by an embedder the caller supplies.

Negation is never folded away at any level. The package imports no database code.
"""

from __future__ import annotations

from .lexical import DEFAULT_LEXICON_PATH, Lexicon, load_lexicon
from .normalizer import Level, Normalizer
from .semantic import Embedder

__all__ = [
    "DEFAULT_LEXICON_PATH",
    "Embedder",
    "Level",
    "Lexicon",
    "Normalizer",
    "load_lexicon",
]
