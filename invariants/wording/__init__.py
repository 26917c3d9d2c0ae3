"""The ground truth about wording: which texts state one fact, and how far each departs
from the fact's plain form.

The scenarios' generators and the stateful machine both word their facts from these
tables, so they sit here, in the bottom layer, and a second table never drifts from
them.

A fact is a slot, a polarity and an object ("coffee_preference", likes, americano),
written under a *tag* ("[pf17]") that keeps its texts apart from every other fact of the
run. Its texts come at three paraphrase levels, each judged against the fact's
canonical text:

- ``surface``: the canonical text itself, re-spelt by :func:`surface_variant` (case,
  full width, spacing, punctuation, separators);
- ``lexical``: another template or another name of the object, in Chinese or English
  ("偏好美式咖啡", "prefers an Americano");
- ``semantic``: free paraphrase that no lexicon folds ("americano is my go-to order").

Attribute names come at the first two levels ("Coffee Preference", "favorite_coffee").

Two facts on one slot are never one fact: a negation ("does not like americano") and a
different object ("likes latte") are what a normalizer must keep apart.

These tables are independent of any backend's normalizer, on purpose: the checkers
trust them as the truth. The tests check that the reference store's lexicon folds every
lexical variant listed here and keeps every must-not-merge pair apart.
"""

from __future__ import annotations

from .tables import LANGS, SLOTS, Lang, Phrasing, SlotWording, Templates, phrasing
from .variants import attribute_surface_variant, surface_variant

__all__ = [
    "LANGS",
    "SLOTS",
    "Lang",
    "Phrasing",
    "SlotWording",
    "Templates",
    "attribute_surface_variant",
    "phrasing",
    "surface_variant",
]
