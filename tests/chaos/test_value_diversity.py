"""Value and attribute diversity: the values the plans write, the known-bad backends that
mangle them and are caught for it, the phantom's nearest value, the coverage that proves
each class was read back, and the reference store keeping every class verbatim."""

from __future__ import annotations

import json
import random
import re
import unicodedata
from pathlib import Path

import pytest

from chaos.certify import CertifyOptions, certify
from chaos.cli import main
from chaos.examples import InMemoryBackend
from chaos.examples.known_bad import AsciiAttributeKeys
from chaos.report import render_table
from invariants.backend import MAX_VALUE_BYTES, Write
from invariants.causes import value_difference
from invariants.errors import InvalidArgument
from invariants.wording.values import (
    DEFAULT_VALUE_BYTES,
    TEXT_CLASSES,
    WHITESPACE,
    text_classes,
    with_payload,
)
from reference_store import ReferenceStore
from scenarios import load_scenario, load_suite
from scenarios.conditions import CONDITIONS, VALUE_CONDITIONS
from scenarios.generators import LONG_ATTRIBUTES, NON_ASCII_SLOTS

SEED = 20261202
SUITE = Path(__file__).parent / "value_diversity_suite.toml"
VALUE_READ_BACK = [*VALUE_CONDITIONS.values(), "non_ascii_attribute_read_back"]


def options(tmp_path: Path, **overrides) -> CertifyOptions:
    return CertifyOptions(**{"budget_s": 12.0, "seed": SEED, "out": tmp_path / "out",
                             "stateful_share": 0.0, "suite": str(SUITE), **overrides})


def writes(plan):
    return [step for steps in plan.workers for step in steps if step.kind == "write"]


# -- the values the plans write -------------------------------------------------------


@pytest.mark.parametrize("name", ["concurrent_writes", "mixed", "value_diversity"])
def test_plain_values_are_diverse_unique_within_bounds_and_seeded(name):
    scenario = load_scenario(name)
    plan = scenario.plan(seed=SEED, workers=4, level="lexical")
    assert plan == scenario.plan(seed=SEED, workers=4, level="lexical")
    assert plan != scenario.plan(seed=SEED + 1, workers=4, level="lexical")
    plain = [step.value for step in writes(plan) if step.meta["paraphrase"] == "none"]
    facts = {step.meta["fact"] for step in writes(plan) if step.meta["paraphrase"] == "none"}
    assert len(set(plain)) == len(facts)  # one text per fact, one fact per text
    for value in plain:
        assert "\x00" not in value
        assert len(value.encode("utf-8")) <= DEFAULT_VALUE_BYTES  # no lone surrogate either
    shown = set().union(*map(text_classes, plain))
    assert set(TEXT_CLASSES) <= shown
    assert "long" in shown


def test_lengths_are_log_uniform_up_to_the_maximum():
    rng = random.Random(SEED)
    lengths = [len(with_payload("t", rng, rng.choice(TEXT_CLASSES), max_bytes=MAX_VALUE_BYTES))
               for _ in range(3000)]
    # Log-uniform over 1..65536: about a quarter of the values in each of 1-16, 16-256,
    # 256-4096 and 4096-65536 characters (a value is never shorter than its text).
    quarters = [sum(1 for n in lengths if low <= n < high)
                for low, high in ((0, 16), (16, 256), (256, 4096), (4096, 10**6))]
    assert all(500 < count < 1000 for count in quarters), quarters
    assert max(len(with_payload("t", rng, "emoji", max_bytes=200).encode()) for _ in range(200)
               ) <= 200


def test_normalization_facts_come_in_pairs_that_differ_only_in_normalization_form():
    plan = load_scenario("value_diversity").plan(seed=SEED, workers=8, level="lexical")
    fact_of = {}
    for step in writes(plan):
        payload = re.split(r"-vd\d+ ", step.value, maxsplit=1)[1]
        fact_of[payload] = step.meta["fact"]
    pairs = [(payload, composed) for payload in fact_of
             if (composed := unicodedata.normalize("NFC", payload)) != payload
             and composed in fact_of]
    # Every ninth write is of the normalization class, and they pair up in turn.
    assert len(pairs) >= len(fact_of) // 9 // 2 - 1 > 5
    assert all(fact_of[nfd] != fact_of[nfc] for nfd, nfc in pairs)


def test_the_attribute_slots_differ_only_where_an_ascii_canonicalizer_cannot_see():
    assert [len(name) for name in LONG_ATTRIBUTES] == [256, 256]
    ascii_only = AsciiAttributeKeys()
    reference = InMemoryBackend()
    keys = [reference._slot(name) for name in NON_ASCII_SLOTS]
    assert len(set(keys)) == len(NON_ASCII_SLOTS)
    assert len({ascii_only._slot(name) for name in NON_ASCII_SLOTS}) == 3


def test_max_value_bytes_is_checked_against_the_contract_naming_the_flag(tmp_path, capsys):
    with pytest.raises(InvalidArgument, match=r"max_value_bytes=70000 is outside 64\.\.65536"):
        CertifyOptions(max_value_bytes=70_000)
    with pytest.raises(InvalidArgument, match="max_value_bytes=True must be an integer"):
        load_scenario("mixed").plan(seed=1, workers=1, level="surface", max_value_bytes=True)
    assert main(["certify", "--max-value-bytes", "65537", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--max-value-bytes must be a whole number of bytes from 64 to 65536" in err
    assert not any(tmp_path.iterdir())
    small = load_suite("certify").plans(seed=SEED, workers=2, level="lexical",
                                        max_value_bytes=300)
    assert max(len(s.value.encode()) for plan in small for s in writes(plan)) <= 300


# -- the phantom's nearest value and its difference ---------------------------------------


@pytest.mark.parametrize(("written", "served", "said"), [
    ("x" * 300, "x" * 255, "cut after 255 characters (of 300)"),
    ("Cafe\u0301 [t]", "Caf\u00e9 [t]", "normalization form changed (NFC applied)"),
    ("\uff21BC [t]", "ABC [t]", "normalization form changed (NFKC applied)"),
    ("\u3000 note [t]\n", "note [t]", "whitespace changed (stripped from the ends)"),
    (" a \t b ", "a b", "whitespace changed (stripped and collapsed to single spaces)"),
    ("a\u2028b", "a\nb", "whitespace changed"),
    ("dev \U0001f469\u200d\U0001f4bb [t]", "dev \U0001f469\U0001f4bb [t]",
     "characters replaced at character 5: '\\u200d' became ''"),
])
def test_value_difference_names_the_alteration(written, served, said):
    assert value_difference(written, served) == said


@pytest.mark.parametrize(("backend", "said"), [
    ("truncates_values", "cut after 255 characters"),
    ("normalizes_values", "normalization form changed (NFC applied)"),
    ("strips_whitespace", "whitespace changed (stripped from the ends)"),
])
def test_a_backend_that_mangles_values_is_caught_as_a_phantom_with_the_difference(
        tmp_path, backend, said):
    report = certify(f"chaos.examples:{backend}", options(tmp_path))
    assert report.invariants["durability"].verdict == "fail"
    phantom = report.checks["phantom"]
    assert phantom.violation_count > 0
    assert max(phantom.causes, key=phantom.causes.__getitem__) == "altered_value"
    assert report.checks["durability"].causes["never_visible"] > 0
    for invariant in ("uniqueness", "causal_monotonicity"):
        assert report.invariants[invariant].verdict == "pass"
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    kept = saved["checks"]["phantom"]["violations"]
    assert kept and all(v["explanation"]["difference"].startswith(said) for v in kept)
    nearest = kept[0]["explanation"]["nearest"]
    assert nearest["attribute"] == kept[0]["explanation"]["record"]["attribute"]
    assert said in " ".join(render_table(report).split())  # wrapped at 100 columns


def test_an_ascii_only_attribute_key_loses_writes_to_the_non_ascii_slots(tmp_path):
    report = certify("chaos.examples:ascii_attribute_keys", options(tmp_path))
    assert report.invariants["durability"].verdict == "fail"
    lost = report.checks["durability"]
    assert max(lost.causes, key=lost.causes.__getitem__) == "never_visible"
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    slots = {v["explanation"]["slot"] for v in saved["checks"]["durability"]["violations"]}
    assert slots and slots <= set(NON_ASCII_SLOTS)
    assert report.checks["phantom"].violation_count == 0


# -- coverage ---------------------------------------------------------------------------


def test_a_correct_backend_passes_and_reads_every_class_back(tmp_path):
    report = certify("chaos.examples:in_memory", options(tmp_path))
    assert report.invariants["durability"].verdict == "pass"
    assert report.invariants["uniqueness"].verdict == "pass"
    assert all(report.coverage[name] > 0 for name in VALUE_READ_BACK), report.coverage
    assert all(CONDITIONS[name].invariant == "durability" for name in VALUE_READ_BACK)


def test_without_long_values_durability_is_unknown(tmp_path):
    report = certify("chaos.examples:in_memory", options(tmp_path, max_value_bytes=600))
    assert report.coverage["long_value_read_back"] == 0
    assert report.coverage["emoji_value_read_back"] > 0
    assert report.invariants["durability"].verdict == "unknown"
    assert "long_value_read_back" in render_table(report)


# -- the reference store ----------------------------------------------------------------


def test_the_reference_store_keeps_every_class_verbatim_at_16_kib(db_url):
    store = ReferenceStore(db_url)
    rng = random.Random(SEED)
    try:
        for n, text_class in enumerate(TEXT_CLASSES):
            value = with_payload(f"note-{n}", rng, text_class, length=DEFAULT_VALUE_BYTES)
            assert len(value.encode()) <= DEFAULT_VALUE_BYTES
            slot = NON_ASCII_SLOTS[n % len(NON_ASCII_SLOTS)]
            assert store.write(Write("vd", f"e{n}", slot, value, 1, f"op-{n}")).applied
            [record] = store.read("vd", f"e{n}")
            assert (record.attribute, record.value) == (slot, value)
        edges = with_payload("ends", rng, "whitespace", length=80)
        assert edges[0] in WHITESPACE and edges[-1] in WHITESPACE
        assert store.write(Write("vd", "edges", "笔记", edges, 1, "op-edges")).applied
        assert [r.value for r in store.read("vd", "edges")] == [edges]
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize("db", ["sqlite_url", "fresh_pg_url"])
def test_the_reference_store_is_certified_with_the_new_values(tmp_path, monkeypatch, request,
                                                              db):
    monkeypatch.setenv("MEMCERT_DB_URL", request.getfixturevalue(db))
    report = certify("reference_store:factory", options(tmp_path, budget_s=20.0))
    assert report.invariants["durability"].verdict == "pass", render_table(report)
    assert report.invariants["uniqueness"].verdict == "pass"
    assert sum(c.violation_count for c in report.checks.values()) == 0
    assert all(report.coverage[name] > 0 for name in VALUE_READ_BACK)
