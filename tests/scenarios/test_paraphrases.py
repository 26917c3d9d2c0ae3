"""The scenarios' paraphrase tables agree with the reference store's normalizer.

The tables are the ground truth and are written independently of the lexicon; these
tests check that every variant labelled lexical is folded by the lexicon (and is not
already a mere spelling variant), that every semantic variant is beyond it, and that
facts which must stay apart do.
"""

from __future__ import annotations

import itertools
import random

import pytest

from reference_store.normalize import Normalizer
from scenarios.generators import PLAIN
from scenarios.paraphrases import (
    SLOTS,
    attribute_surface_variant,
    phrasing,
    surface_variant,
)

from .plans import CJK, LEVELS, NAMES, facts_by_key, plan, writes

SURFACE = Normalizer("surface")
LEXICAL = Normalizer("lexical")
RANK = {"none": 0, "surface": 1, "lexical": 2, "semantic": 3}


def every_fact(tag: str = "t1"):
    for slot, table in SLOTS.items():
        for positive, obj in itertools.product((True, False), table.objects):
            yield slot, positive, obj, {lang: phrasing(slot, positive, obj, tag, lang)
                                        for lang in ("en", "zh")}


def value_level(value: str, canonical: str) -> str:
    if value == canonical:
        return "none"
    if SURFACE.value_key(value) == SURFACE.value_key(canonical):
        return "surface"
    if LEXICAL.value_key(value) == LEXICAL.value_key(canonical):
        return "lexical"
    return "semantic"


def attribute_level(attribute: str, slot: str) -> str:
    if attribute == slot:
        return "none"
    if SURFACE.attribute_key(attribute) == SURFACE.attribute_key(slot):
        return "surface"
    assert LEXICAL.attribute_key(attribute) == LEXICAL.attribute_key(slot), attribute
    return "lexical"


def test_every_lexical_variant_folds_at_the_lexical_level_only():
    checked = 0
    for *_, by_lang in every_fact():
        for words in by_lang.values():
            key = LEXICAL.value_key(words.canonical)
            for variant in words.lexical:
                assert LEXICAL.value_key(variant) == key, (variant, words.canonical)
                assert value_level(variant, words.canonical) == "lexical", variant
                checked += 1
            assert any(CJK.search(v) for v in words.lexical)
            assert any(not CJK.search(v) for v in words.lexical)
    assert checked > 1000


def test_every_semantic_variant_is_beyond_the_lexicon_with_the_same_negation():
    negations = LEXICAL.lexicon.negations
    for *_, by_lang in every_fact():
        for words in by_lang.values():
            key = LEXICAL.value_key(words.canonical)
            assert words.semantic
            for variant in words.semantic:
                assert LEXICAL.value_key(variant) != key, variant
                assert negations(LEXICAL.value_key(variant)) == negations(key), variant


def test_both_canonical_languages_state_one_fact():
    for *_, by_lang in every_fact():
        assert LEXICAL.value_key(by_lang["en"].canonical) == LEXICAL.value_key(
            by_lang["zh"].canonical)
        assert CJK.search(by_lang["zh"].canonical) and not CJK.search(by_lang["en"].canonical)


def test_must_not_merge_pairs_stay_apart():
    """Negations and different objects under one tag: the tag alone does not separate them."""
    negations = LEXICAL.lexicon.negations
    for slot, table in SLOTS.items():
        facts = [(positive, obj, phrasing(slot, positive, obj, "t1", "en").canonical)
                 for positive in (True, False) for obj in table.objects]
        keys = [LEXICAL.value_key(text) for *_, text in facts]
        assert len(set(keys)) == len(keys), slot
        for (pos_a, obj_a, a), (pos_b, obj_b, b) in itertools.combinations(facts, 2):
            if obj_a == obj_b and pos_a != pos_b:
                assert negations(LEXICAL.value_key(a)) != negations(LEXICAL.value_key(b))
                assert not LEXICAL.same_fact(a, b)


def test_spelled_out_pairs_from_the_brief():
    key = LEXICAL.value_key
    assert key("喜欢美式 [t]") == key("偏好美式咖啡 [t]") == key("常喝美式 [t]") == key(
        "likes americano [t]") == key("prefers americano [t]")
    assert key("likes americano [t]") != key("does not like americano [t]")
    assert key("喜欢美式 [t]") != key("不喜欢美式 [t]")
    assert key("likes americano [t]") != key("likes latte [t]")
    attribute = LEXICAL.attribute_key
    assert attribute("coffee_preference") == attribute("Coffee Preference") == attribute(
        "coffee-preference") == attribute("favorite_coffee")


def test_attribute_variants_fold_to_their_slot_and_slots_stay_apart():
    keys_of_slot = {}
    for slot, table in SLOTS.items():
        for name in table.attribute_variants:
            assert attribute_level(name, slot) == "lexical", name
        keys_of_slot[slot] = {LEXICAL.attribute_key(n) for n in (slot, *table.attribute_variants)}
        assert len(keys_of_slot[slot]) == 1
    for slot in PLAIN:
        keys_of_slot.setdefault(slot, {LEXICAL.attribute_key(slot)})
    for a, b in itertools.combinations(keys_of_slot, 2):
        assert not keys_of_slot[a] & keys_of_slot[b], (a, b)
        assert SURFACE.attribute_key(a) != SURFACE.attribute_key(b)


def test_surface_variants_change_the_text_but_not_its_surface_form():
    rng = random.Random(0)
    texts = [words.canonical for *_, by_lang in every_fact() for words in by_lang.values()]
    for text in texts:
        for _ in range(5):
            variant = surface_variant(text, rng)
            assert variant != text
            assert SURFACE.value_key(variant) == SURFACE.value_key(text), (variant, text)
    for slot in (*SLOTS, *PLAIN):
        for _ in range(30):
            variant = attribute_surface_variant(slot, rng)
            assert variant != slot
            assert SURFACE.attribute_key(variant) == SURFACE.attribute_key(slot), variant


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("level", LEVELS)
def test_each_write_is_labelled_with_the_level_it_needs(name, level):
    for facts in facts_by_key(plan(name, level=level)).values():
        for steps in facts.values():
            canonical = next(s.value for s in steps if s.meta["paraphrase"] == "none")
            for step in steps:
                needed = max(value_level(step.value, canonical),
                             attribute_level(step.attribute, step.meta["slot"]), key=RANK.get)
                assert step.meta["paraphrase"] == needed, step


@pytest.mark.parametrize("name", NAMES)
def test_different_facts_on_one_slot_never_share_a_lexical_key(name):
    p = plan(name)
    owner: dict[tuple[str, str, str, str], str] = {}
    for step in writes(p):
        slot_key = (step.namespace, step.entity_id, step.meta["slot"],
                    LEXICAL.value_key(step.value))
        assert owner.setdefault(slot_key, step.meta["fact"]) == step.meta["fact"], step
