"""The coverage conditions a scenario can require, declared as data.

A scenario lists in ``requires`` the conditions its plan is built to produce, and each
condition serves one invariant: one that never occurred leaves its invariant
``unknown``, not ``pass``. This is the only declaration of the conditions' names,
definitions and invariants; :mod:`chaos.coverage` counts each of them on a recorded
history (and its tests check that it counts exactly these). It lives below
:mod:`chaos` so that loading a scenario can check its ``requires`` without the
measurement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from invariants.wording.values import LONG_VALUE_CHARS, TEXT_CLASSES

__all__ = ["CONDITIONS", "CONDITION_INVARIANT", "VALUE_CONDITIONS", "Condition"]


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition a scenario can require: what it is, and which invariant it serves."""

    invariant: str
    definition: str


CONDITIONS: Mapping[str, Condition] = MappingProxyType(
    {
        "overlapping_same_key_writes": Condition(
            "uniqueness",
            "a write to a key invoked while another write to that key was still running",
        ),
        "attribute_variant_facts": Condition(
            "uniqueness",
            "a key that received acknowledged writes of two or more facts under two or more "
            "attribute spellings",
        ),
        "delete_raced_write": Condition(
            "deletion_monotonicity",
            "a write and a delete of one entity whose invocation-to-completion intervals overlap",
        ),
        "read_after_delete": Condition(
            "deletion_monotonicity",
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a delete",
        ),
        "read_after_restore": Condition(
            "deletion_monotonicity",
            "a read of an entity invoked when the last acknowledged delete or restore of "
            "it was a restore",
        ),
        "stale_write_after_restore": Condition(
            "deletion_monotonicity",
            "a write invoked when the last acknowledged delete or restore of its entity "
            "was a restore, with a causal_seq at or below the highest of the entity's "
            "acknowledged deletes",
        ),
        "out_of_order_arrival": Condition(
            "causal_monotonicity",
            "a write that completed (ok or fail) after a write with a higher causal_seq "
            "to the same key had completed",
        ),
        "seq_digit_boundaries": Condition(
            "causal_monotonicity",
            "for each of 10 and 100, one key received a write with causal_seq below it "
            "and one with causal_seq at or above it",
        ),
        "second_namespace": Condition(
            "isolation",
            "an entity_id used in two or more namespaces",
        ),
        "paraphrase_writes_surface": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is surface",
        ),
        "paraphrase_writes_lexical": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is lexical",
        ),
        "paraphrase_writes_semantic": Condition(
            "semantic_normalization",
            "a completed write whose meta.paraphrase is semantic",
        ),
        "network_fault_during_ops": Condition(
            "durability",
            "an operation of a client group that got no answer, completing while a toxic "
            "was in force on that group's proxy",
        ),
        "partition_cut_ops": Condition(
            "durability",
            "an operation of a cut-off client group that got no answer, completing while "
            "the group was partitioned",
        ),
        "crash_lost_in_flight": Condition(
            "durability",
            "an operation invoked before the service was killed that got no answer, "
            "completing after the kill began",
        ),
        "writes_acked_before_crash": Condition(
            "durability",
            "an acknowledged write that completed before the service was killed, to an "
            "entity that a read invoked after the restart read successfully",
        ),
        "answered_across_pause": Condition(
            "durability",
            "an operation in flight while the service was frozen (SIGSTOP): invoked "
            "before it went on (SIGCONT), and answered after",
        ),
        **{
            f"{name}_value_read_back": Condition(
                "durability",
                f"an ok read that served the value of the latest applied write to a key of "
                f"its entity, a value of the {name} class ({definition})",
            )
            for name, definition in (
                ("long", f"more than {LONG_VALUE_CHARS} characters"),
                ("emoji", "an emoji, a ZWJ sequence or a skin-tone modifier"),
                ("combining", "a combining mark"),
                ("full_width", "a full-width form"),
                ("rtl", "right-to-left text"),
                ("whitespace", "whitespace at an end, or of a kind other than the space"),
                ("normalization", "text that NFC changes"),
                ("sql", "a quote, a backtick, a percent sign or ;--"),
                ("json", "a JSON escape sequence or a control character"),
                ("backslash", "a backslash"),
            )
        },
        "non_ascii_attribute_read_back": Condition(
            "durability",
            "an ok read that served the value of the latest applied write to a key of its "
            "entity, a write under an attribute name with a character outside ASCII",
        ),
    }
)
"""Every coverage condition; a write's *key* is (namespace, entity_id, meta.slot)."""

VALUE_CONDITIONS: Mapping[str, str] = MappingProxyType(
    {"long": "long_value_read_back"}
    | {name: f"{name}_value_read_back" for name in TEXT_CLASSES}
)
"""Each value class of :func:`invariants.wording.values.text_classes`, and the condition
that proves it was written and read back."""

CONDITION_INVARIANT: Mapping[str, str] = MappingProxyType(
    {name: condition.invariant for name, condition in CONDITIONS.items()}
)
"""Each coverage condition, and the invariant left unproven when it never occurs."""
