"""The paraphrase levels, defined once.

Two questions use the same words and must not be confused:

- which level a *backend claims* to normalize at (``memcert certify --level``, the
  stateful machine's ``level``, the reference store's ``StoreConfig.level``): one of
  :data:`CLAIMABLE_LEVELS`;
- how far a *written value* is paraphrased from its fact's canonical wording (a
  history entry's ``paraphrase``, a generator's step): one of
  :data:`PARAPHRASE_LEVELS`, which adds ``none`` (the canonical wording itself).

Each tuple is ordered from the weakest to the strongest, so ``index`` compares them: a
backend that claims ``lexical`` must fold every paraphrase up to and including
``lexical``.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias, get_args

__all__ = ["CLAIMABLE_LEVELS", "PARAPHRASE_LEVELS", "ClaimableLevel", "Paraphrase"]

ClaimableLevel: TypeAlias = Literal["surface", "lexical", "semantic"]
"""A level a backend can claim to normalize at."""

Paraphrase: TypeAlias = Literal["none", "surface", "lexical", "semantic"]
"""How far a written value is paraphrased from its fact's canonical wording."""

CLAIMABLE_LEVELS: Final[tuple[ClaimableLevel, ...]] = get_args(ClaimableLevel)
"""The levels a backend can claim, weakest first."""

PARAPHRASE_LEVELS: Final[tuple[Paraphrase, ...]] = get_args(Paraphrase)
"""The paraphrase levels, ``none`` first."""
