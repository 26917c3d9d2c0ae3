"""The machine's values and attribute names go past short English phrases, as the
scenarios' do: payloads of every text class up to the value limit, and twin slots whose
names differ from their base only in characters an ASCII-only key drops."""

from __future__ import annotations

import itertools
import re

import pytest

from invariants._stateful_words import (
    LONG_NAME,
    MACHINE_SLOTS,
    OBJECTS,
    PAYLOAD_SIZES,
    TWINS,
    Attribute,
    FactWording,
    Payload,
    attribute_variant,
    fact,
    twin,
)
from invariants.errors import InvalidArgument
from invariants.stateful import run_machine
from invariants.wording.values import TEXT_CLASSES, text_classes

from .support import HUNT, QUICK

BASES = [Attribute(slot, slot, "none") for slot in MACHINE_SLOTS]
ATTRIBUTES = BASES + [twin(base, suffix) for base in BASES for suffix in TWINS]


def _wordings() -> list[FactWording]:
    made = []
    for attribute, obj, negated in itertools.product(ATTRIBUTES, range(OBJECTS), (False, True)):
        made.append(FactWording(fact(attribute, obj, negated), attribute, "none"))
        made += [FactWording(fact(attribute, obj, negated, Payload(cls, 2**size)), attribute,
                             "none")
                 for cls in TEXT_CLASSES for size in (0, 8, PAYLOAD_SIZES - 1)]
    return made


def test_every_fact_has_its_own_id_and_its_own_text_for_each_entity():
    wordings = _wordings()
    assert len({w.fact.id for w in wordings}) == len(wordings)
    for tag in ("a", "b"):
        assert len({w.value(tag) for w in wordings}) == len(wordings)
    assert not {w.value("a") for w in wordings} & {w.value("b") for w in wordings}


def test_payloads_show_their_class_and_reach_the_value_limit():
    for cls in TEXT_CLASSES:
        base = BASES[0]
        long = FactWording(fact(base, 0, False, Payload(cls, 2 ** (PAYLOAD_SIZES - 1))), base,
                           "none").value("a")
        assert cls in text_classes(long), cls
        assert "long" in text_classes(long)
        assert len(long.encode()) <= 16 * 1024
        short = FactWording(fact(base, 0, False, Payload(cls, 1)), base, "none").value("a")
        assert len(short) < 100


def test_a_payload_respects_a_smaller_value_limit():
    base = BASES[1]
    for cls in TEXT_CLASSES:
        wording = FactWording(fact(base, 1, True, Payload(cls, 2**14)), base, "none")
        assert len(wording.value("b", 300).encode()) <= 300


def test_twins_are_slots_of_their_own_that_only_an_ascii_key_folds_into_their_base():
    for base in BASES:
        twins = [twin(base, suffix) for suffix in TWINS]
        assert len({t.slot for t in twins} | {base.slot}) == len(TWINS) + 1
        for made in twins:
            assert made.table == base.slot
            assert re.sub(r"[^a-z0-9]", "", made.name) == re.sub(r"[^a-z0-9]", "", base.name)
        assert len(twins[-1].name) == LONG_NAME
        assert twin(twins[0], TWINS[1]) == twins[0]  # a twin of a twin is itself


def test_a_twin_is_respelt_at_the_surface_and_never_reworded_to_a_name_no_lexicon_knows():
    made = twin(BASES[0], TWINS[0])
    surface = attribute_variant(made, "surface", 3)
    assert (surface.slot, surface.table, surface.level) == (made.slot, made.table, "surface")
    assert attribute_variant(made, "lexical", 3) == made


def test_a_backend_with_a_documented_value_limit_is_judged_within_it():
    """TruncatesValues keeps 255 characters: the machine finds that by default, and
    writes nothing it would cut when told the limit is 255 bytes."""
    spec = "chaos.examples:truncates_values"
    within = run_machine(spec, level="lexical", checkers=("durability", "phantom"),
                         settings=QUICK, max_value_bytes=255)
    assert within.failed == ()
    assert within.checked["durability"] > 0

    wider = run_machine(spec, level="lexical", checkers=("durability",), settings=HUNT,
                        max_value_bytes=1024)
    (failure,) = wider.failures
    assert "    max_value_bytes=1024,\n" in failure.program


def test_a_value_limit_outside_the_contract_is_named():
    with pytest.raises(InvalidArgument, match="max_value_bytes"):
        run_machine("chaos.examples:in_memory", level="lexical", checkers=("durability",),
                    settings=HUNT, max_value_bytes=10**6)
