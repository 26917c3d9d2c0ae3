"""semantic_normalization: paraphrases of one fact leave one record (violation: duplicate)."""

from __future__ import annotations

import pytest

from invariants.checkers import SemanticNormalization
from invariants.errors import InvalidArgument
from invariants.verdict import Key, Validity
from tests.invariants.histbuild import HistoryBuilder, check, texts


def _paraphrased(level: str = "surface") -> HistoryBuilder:
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, fact="tea").ok()
    h.write(0, "u1", "drink", "Likes Tea!", 2, fact="tea", attribute="Drink", paraphrase=level).ok()
    return h


def test_a_paraphrase_stored_as_a_second_record_is_a_duplicate():
    h = _paraphrased()
    h.read(1, "u1").ok("likes tea", "Likes Tea!")
    result = check(h, "semantic_normalization")
    [v] = result.violations
    assert (v.kind, v.key, v.witnesses, v.magnitude) == (
        "duplicate",
        Key("ns", "u1", "drink"),
        (0, 2, 4),
        2,
    )
    assert texts(result) == [
        'Let W1 = op 0, a write of "likes tea" (fact tea, slot drink, causal_seq 1) to u1 in '
        'namespace ns, acknowledged at index 1, and W2 = op 2, a write of "Likes Tea!" (fact '
        "tea, slot drink, causal_seq 2, surface paraphrase) to u1 in namespace ns, "
        "acknowledged at index 3. Then read op 4 of u1 in namespace ns returned the values of "
        "both W1 and W2, 2 records of fact tea for slot drink, but surface paraphrases of one "
        "fact must leave one record, a contradiction."
    ]
    assert (result.checked, result.rate_numerator, result.rate_denominator, result.rate) == (
        1, 1, 1, 1.0)
    assert result.rate_numerator_name == "reads of a slot serving a fact twice"
    assert result.rate_denominator_name == "reads of a slot with a fact written or served twice"
    assert result.coverage["extra_record_values"] == 1


def test_a_merged_paraphrase_is_valid_whichever_wording_survives():
    h = _paraphrased()
    h.read(1, "u1").ok(("likes tea", 2))
    h.read(1, "u1").ok("Likes Tea!")
    result = check(h, "semantic_normalization")
    assert result.validity is Validity.VALID
    assert result.coverage == {
        "paraphrase_writes_surface": 1,
        "paraphrase_writes_lexical": 0,
        "paraphrase_writes_semantic": 0,
        "repeated_fact_slot_reads": 2,
        "duplicates_beyond_level": 0,
        "extra_record_values": 0,
    }
    assert (result.checked, result.rate_numerator, result.rate_denominator) == (2, 0, 2)


def test_paraphrases_beyond_the_claimed_level_are_not_violations():
    h = _paraphrased("lexical")
    h.read(1, "u1").ok("likes tea", "Likes Tea!")
    surface = check(h, "semantic_normalization", level="surface")
    assert surface.validity is Validity.VALID
    assert surface.coverage["duplicates_beyond_level"] == 1
    assert (surface.rate_numerator, surface.rate_denominator) == (0, 1)
    assert check(h, "semantic_normalization", level="lexical").violation_count == 1


def test_the_same_wording_twice_is_a_duplicate_at_every_level():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, fact="tea", paraphrase="semantic").ok()
    h.read(1, "u1").ok("likes tea", "likes tea")
    result = check(h, "semantic_normalization", level="none")
    assert texts(result) == [
        'Let W1 = op 0, a write of "likes tea" (fact tea, slot drink, causal_seq 1, semantic '
        "paraphrase) to u1 in namespace ns, acknowledged at index 1. Then read op 2 of u1 in "
        "namespace ns returned the value of W1 2 times, 2 records of fact tea for slot drink, "
        "but a fact written twice must leave one record, a contradiction."
    ]
    assert (result.checked, result.rate_numerator, result.rate_denominator) == (1, 1, 1)


def test_two_facts_doubled_in_one_slot_read_are_two_violations_and_one_failed_check():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes tea", 1, fact="tea").ok()
    h.write(0, "u1", "drink", "Likes Tea", 2, fact="tea", paraphrase="surface").ok()
    h.write(0, "u1", "drink", "likes milk", 3, fact="milk").ok()
    h.write(0, "u1", "drink", "Likes Milk", 4, fact="milk", paraphrase="surface").ok()
    h.read(1, "u1").ok("likes tea", "Likes Tea", "likes milk", "Likes Milk")
    result = check(h, "semantic_normalization")
    assert result.violation_count == 2
    assert (result.checked, result.rate_numerator, result.rate_denominator, result.rate) == (
        1, 1, 1, 1.0)


def test_a_negation_is_another_fact_so_two_records_are_a_conflict_not_a_duplicate():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "likes americano", 1, fact="americano").ok()
    h.write(0, "u1", "drink", "does not like americano", 2, fact="not-americano").ok()
    h.read(1, "u1").ok("likes americano", "does not like americano")
    assert check(h, "semantic_normalization").violation_count == 0
    assert check(h, "uniqueness").violation_count == 1


def test_no_repeated_fact_is_unknown():
    h = HistoryBuilder()
    h.write(0, "u1", "drink", "tea", 1).ok()
    h.read(1, "u1").ok("tea")
    result = check(h, "semantic_normalization")
    assert result.validity is Validity.UNKNOWN
    assert result.notes == ("nothing to check: no paraphrase write took effect",)


def test_an_unknown_level_is_refused_with_the_choices():
    with pytest.raises(InvalidArgument) as err:
        SemanticNormalization(level="fuzzy")  # type: ignore[arg-type]
    assert str(err.value) == (
        "level='fuzzy' (type str) is not a paraphrase level; use one of none, surface, "
        "lexical, semantic"
    )
