"""The coverage conditions a scenario can require, each defined on a recorded history.

A scenario lists in ``requires`` the conditions its plan is built to produce. Whether
one really occurred is decided from the history after the run (``chaos.coverage``
counts them), never assumed from the plan: an invariant whose required condition never
occurred is ``unknown``, not ``pass``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["COVERAGE", "PARAPHRASE_CONDITIONS"]

#: Condition name -> its definition on a history. A write's *key* is its
#: (namespace, entity_id, meta.slot); an entity is a (namespace, entity_id).
COVERAGE: Mapping[str, str] = MappingProxyType(
    {
        "overlapping_same_key_writes": (
            "a write to a key invoked while another write to that key was still running"
        ),
        "delete_raced_write": (
            "a write and a delete of one entity whose invocation-to-completion intervals "
            "overlap"
        ),
        "read_after_delete": (
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a delete"
        ),
        "read_after_restore": (
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a restore"
        ),
        "stale_write_after_restore": (
            "a write invoked when the last acknowledged delete or restore of its entity "
            "was a restore, with a causal_seq at or below the highest of the entity's "
            "acknowledged deletes"
        ),
        "out_of_order_arrival": (
            "a write that completed (ok or fail) after a write with a higher causal_seq "
            "to the same key had completed"
        ),
        "seq_digit_boundaries": (
            "for each of 10 and 100, one key received a write with causal_seq below it "
            "and one with causal_seq at or above it"
        ),
        "second_namespace": "an entity_id used in two or more namespaces",
        "paraphrase_writes_surface": "a completed write whose meta.paraphrase is surface",
        "paraphrase_writes_lexical": "a completed write whose meta.paraphrase is lexical",
        "paraphrase_writes_semantic": "a completed write whose meta.paraphrase is semantic",
    }
)

#: The paraphrase condition of each level; a plan drops those above its level.
PARAPHRASE_CONDITIONS: Mapping[str, str] = MappingProxyType(
    {
        "paraphrase_writes_surface": "surface",
        "paraphrase_writes_lexical": "lexical",
        "paraphrase_writes_semantic": "semantic",
    }
)
