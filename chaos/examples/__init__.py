"""Example backends: a correct in-memory one, and known-bad ones memcert must catch.

Each lower-case name here is a backend factory, usable as ``chaos.examples:<name>``
(for instance ``memcert certify chaos.examples:racy_upsert``). Every call of a factory
returns a new handle onto that factory's one store, made on first use; handles share
it across threads of one process, not across processes.

:data:`KNOWN_BAD` maps each known-bad factory to the checkers that must fail on it.
``no_restore`` is not in it: it is correct, and lacks only the restore capability.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .known_bad import (
    AsciiAttributeKeys,
    DropsWrites,
    ExpiringTombstone,
    FoldsNegation,
    LastArrivalWins,
    LeakyNamespaces,
    NoRestore,
    NormalizesValues,
    PhantomRecords,
    RacyUpsert,
    RawAttributeKeys,
    RestoreAcceptsLateWrites,
    RestoreRevives,
    StripsWhitespace,
    SurfaceOnly,
    TruncatesValues,
    UnsortedReads,
)
from .memory import InMemoryBackend, MemoryStore, SharedFactory

__all__ = [
    "KNOWN_BAD",
    "KNOWN_BAD_CAUSES",
    "InMemoryBackend",
    "MemoryStore",
    "SharedFactory",
    "ascii_attribute_keys",
    "drops_writes",
    "expiring_tombstone",
    "folds_negation",
    "in_memory",
    "last_arrival_wins",
    "leaky_namespaces",
    "no_restore",
    "normalizes_values",
    "phantom_records",
    "racy_upsert",
    "raw_attribute_keys",
    "restore_accepts_late_writes",
    "restore_revives",
    "strips_whitespace",
    "surface_only",
    "truncates_values",
    "unsorted_reads",
]

in_memory = SharedFactory(InMemoryBackend)
no_restore = SharedFactory(NoRestore)
racy_upsert = SharedFactory(RacyUpsert)
last_arrival_wins = SharedFactory(LastArrivalWins)
unsorted_reads = SharedFactory(UnsortedReads)
expiring_tombstone = SharedFactory(ExpiringTombstone)
restore_revives = SharedFactory(RestoreRevives)
restore_accepts_late_writes = SharedFactory(RestoreAcceptsLateWrites)
surface_only = SharedFactory(SurfaceOnly)
raw_attribute_keys = SharedFactory(RawAttributeKeys)
drops_writes = SharedFactory(DropsWrites)
leaky_namespaces = SharedFactory(LeakyNamespaces)
phantom_records = SharedFactory(PhantomRecords)
folds_negation = SharedFactory(FoldsNegation)
truncates_values = SharedFactory(TruncatesValues)
normalizes_values = SharedFactory(NormalizesValues)
strips_whitespace = SharedFactory(StripsWhitespace)
ascii_attribute_keys = SharedFactory(AsciiAttributeKeys)

KNOWN_BAD: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "chaos.examples:racy_upsert": ("uniqueness",),
    "chaos.examples:last_arrival_wins": ("causal_monotonicity",),
    "chaos.examples:unsorted_reads": ("causal_monotonicity",),
    "chaos.examples:folds_negation": ("causal_monotonicity",),
    "chaos.examples:expiring_tombstone": ("deletion_monotonicity",),
    "chaos.examples:restore_revives": ("deletion_monotonicity",),
    "chaos.examples:restore_accepts_late_writes": ("deletion_monotonicity",),
    "chaos.examples:surface_only": ("semantic_normalization", "uniqueness"),
    "chaos.examples:raw_attribute_keys": ("uniqueness", "semantic_normalization"),
    "chaos.examples:drops_writes": ("durability",),
    "chaos.examples:leaky_namespaces": ("isolation",),
    "chaos.examples:phantom_records": ("phantom",),
    "chaos.examples:truncates_values": ("phantom", "durability"),
    "chaos.examples:normalizes_values": ("phantom", "durability"),
    "chaos.examples:strips_whitespace": ("phantom", "durability"),
    "chaos.examples:ascii_attribute_keys": ("durability",),
})
"""Known-bad factory -> the checkers (by name) that must fail on it."""

KNOWN_BAD_CAUSES: Mapping[str, Mapping[str, str]] = MappingProxyType({
    "chaos.examples:racy_upsert": {"uniqueness": "race"},
    "chaos.examples:last_arrival_wins": {"causal_monotonicity": "stale_overwrite"},
    "chaos.examples:unsorted_reads": {"causal_monotonicity": "read_order"},
    "chaos.examples:folds_negation": {"causal_monotonicity": "over_merged"},
    "chaos.examples:expiring_tombstone": {"deletion_monotonicity": "tombstone_expired"},
    "chaos.examples:restore_revives": {"deletion_monotonicity": "restore_revived"},
    "chaos.examples:restore_accepts_late_writes": {
        "deletion_monotonicity": "stale_after_restore"},
    "chaos.examples:surface_only": {"semantic_normalization": "duplicate",
                                    "uniqueness": "not_replaced"},
    "chaos.examples:raw_attribute_keys": {"uniqueness": "alias",
                                          "semantic_normalization": "duplicate"},
    "chaos.examples:drops_writes": {"durability": "never_visible"},
    "chaos.examples:leaky_namespaces": {"isolation": "leak"},
    "chaos.examples:phantom_records": {"phantom": "altered_value"},
    "chaos.examples:truncates_values": {"phantom": "altered_value",
                                        "durability": "never_visible"},
    "chaos.examples:normalizes_values": {"phantom": "altered_value",
                                         "durability": "never_visible"},
    "chaos.examples:strips_whitespace": {"phantom": "altered_value",
                                         "durability": "never_visible"},
    "chaos.examples:ascii_attribute_keys": {"durability": "never_visible"},
})
"""Known-bad factory -> checker -> the root cause most of its violations must have: the
bug the backend plants, as ``invariants.causes`` names it."""
