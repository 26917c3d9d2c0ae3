"""The coverage conditions a scenario can require, each defined on a recorded history.

A scenario lists in ``requires`` the conditions its plan is built to produce. Whether
one really occurred is decided from the history after the run (``chaos.coverage``
counts them), never assumed from the plan: an invariant whose required condition never
occurred is ``unknown``, not ``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from chaos.coverage import CONDITIONS

__all__ = ["COVERAGE", "PARAPHRASE_CONDITIONS"]

#: Condition name -> its definition on a history (defined with the measurement, in
#: chaos.coverage). A write's *key* is (namespace, entity_id, meta.slot).
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
