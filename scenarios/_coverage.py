"""The coverage conditions as a scenario file's ``requires`` names them.

Whether a condition really occurred is decided from the history after the run
(``chaos.coverage`` counts them), never assumed from the plan: an invariant whose
required condition never occurred is ``unknown``, not ``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .conditions import CONDITIONS

__all__ = ["COVERAGE", "PARAPHRASE_CONDITIONS"]

#: Condition name -> its definition on a history (declared in scenarios.conditions). A
#: write's *key* is (namespace, entity_id, meta.slot).
COVERAGE: Mapping[str, str] = MappingProxyType(
    {name: condition.definition for name, condition in CONDITIONS.items()}
)

#: The paraphrase condition of each level; a plan drops those above its level.
PARAPHRASE_CONDITIONS: Mapping[str, str] = MappingProxyType(
    {
        "paraphrase_writes_surface": "surface",
        "paraphrase_writes_lexical": "lexical",
        "paraphrase_writes_semantic": "semantic",
    }
)
