"""Generated plans: deterministic, true to their ground truth, and shaped as promised."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from scenarios import load_scenario
from scenarios.plan import Step

from .plans import CJK, LEVELS, NAMES, facts_by_key, plan, writes

_DIGEST = (
    "import hashlib, sys\n"
    "from scenarios import load_scenario\n"
    "plans = [load_scenario(n).plan(seed=11, workers=3, level='semantic') for n in sys.argv[1:]]\n"
    "print(hashlib.sha256(repr(plans).encode()).hexdigest())\n"
)


@pytest.mark.parametrize("name", NAMES)
def test_same_arguments_give_an_equal_plan_and_another_seed_another(name):
    scenario = load_scenario(name)
    first = scenario.plan(seed=5, workers=3, level="semantic")
    assert first == load_scenario(name).plan(seed=5, workers=3, level="semantic")
    assert first != scenario.plan(seed=6, workers=3, level="semantic")
    assert first.scenario == name and first.seed == 5 and len(first.workers) == 3
    assert first.faults == scenario.faults


def test_plans_are_the_same_in_every_process_whatever_the_hash_seed():
    expected = hashlib.sha256(repr(
        [load_scenario(n).plan(seed=11, workers=3, level="semantic") for n in NAMES]
    ).encode()).hexdigest()
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", _DIGEST, *NAMES], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert out.stdout.strip() == expected


@pytest.mark.parametrize("name", NAMES)
def test_every_write_carries_ground_truth_and_texts_trace_to_one_fact(name):
    p = plan(name)
    fact_of_value: dict[str, str] = {}
    key_of_fact: dict[str, tuple[str, str, str]] = {}
    count = 0
    for step in writes(p):
        count += 1
        assert set(step.meta) == {"fact", "slot", "paraphrase"}
        assert step.attribute and step.value
        assert fact_of_value.setdefault(step.value, step.meta["fact"]) == step.meta["fact"]
        key = (step.namespace, step.entity_id, step.meta["slot"])
        assert key_of_fact.setdefault(step.meta["fact"], key) == key
        if step.meta["paraphrase"] == "none":
            assert step.attribute == step.meta["slot"]
    assert count > 100
    for steps in p.workers:
        for step in steps:
            if step.kind != "write":
                assert step.meta == {} and step.attribute is None and step.value is None


def test_values_are_unique_across_the_scenarios_of_a_suite():
    owner: dict[str, str] = {}
    for name in NAMES:
        for step in writes(plan(name)):
            assert owner.setdefault(step.value, name) == name


@pytest.mark.parametrize("name", NAMES)
def test_every_entity_a_worker_touched_is_read_last(name):
    for steps in plan(name).workers:
        last: dict[tuple[str, str], str] = {}
        for step in steps:
            last[step.namespace, step.entity_id] = step.kind
        assert set(last.values()) == {"read"}


@pytest.mark.parametrize("name", NAMES)
def test_plan_size_follows_scale(name):
    small, base, large = (plan(name, scale=s).size for s in (0.3, 1.0, 3.0))
    assert small < base
    assert large >= 2 * base


@pytest.mark.parametrize("level", LEVELS)
def test_levels_beyond_the_requested_one_are_not_generated(level):
    allowed = {"none", *LEVELS[: LEVELS.index(level) + 1]}
    for name in ("paraphrase_flood", "mixed"):
        p = plan(name, level=level)
        seen = Counter(step.meta["paraphrase"] for step in writes(p))
        assert set(seen) == allowed, name
        conditions = {c for c in p.requires if c.startswith("paraphrase_writes_")}
        assert conditions == {f"paraphrase_writes_{lv}" for lv in allowed - {"none"}}


@pytest.mark.parametrize("level", LEVELS)
def test_the_flood_writes_chinese_english_and_attribute_variants_at_each_level(level):
    p = plan("paraphrase_flood", level=level)
    by_level = defaultdict(list)
    for step in writes(p):
        by_level[step.meta["paraphrase"]].append(step)
    for paraphrase, steps in by_level.items():
        assert any(CJK.search(s.value) for s in steps), paraphrase
        assert any(not CJK.search(s.value) for s in steps), paraphrase
        if paraphrase in ("surface", "lexical"):
            assert any(s.attribute != s.meta["slot"] for s in steps), paraphrase
    # Variants of one fact come from several workers, so they race.
    writers = defaultdict(set)
    for worker, steps in enumerate(p.workers):
        for step in steps:
            if step.kind == "write":
                writers[step.meta["fact"]].add(worker)
    assert all(len(ws) == len(p.workers) for ws in writers.values())


def test_concurrent_writes_puts_every_worker_on_every_key():
    p = plan("concurrent_writes")
    writers = defaultdict(set)
    for worker, steps in enumerate(p.workers):
        for step in steps:
            if step.kind == "write":
                writers[step.entity_id, step.meta["slot"]].add(worker)
    assert len(writers) == 6
    assert all(len(ws) == 3 for ws in writers.values())
    kinds = Counter(step.kind for steps in p.workers for step in steps)
    assert kinds["read"] > 0.3 * kinds["write"]
    assert all(step.pause_s <= 0.002 for steps in p.workers for step in steps)


def test_delete_then_write_reads_after_every_delete_and_restore_and_sends_stale_writes():
    p = plan("delete_then_write")
    deletes = restores = stale = late = 0
    for steps in p.workers:
        for index, step in enumerate(steps):
            if step.kind in ("delete", "restore"):
                after = steps[index + 1]
                assert (after.kind, after.entity_id) == ("read", step.entity_id)
            if step.kind == "delete":
                deletes += 1
                late_write = steps[index + 2]
                assert late_write.kind == "write" and late_write.entity_id == step.entity_id
                assert late_write.pause_s == 0.15
                late += 1
            if step.kind == "restore":
                restores += 1
                stale_write = steps[index + 2]
                assert stale_write.kind == "write" and stale_write.entity_id == step.entity_id
                assert stale_write.seq_offset == -1_000_000_000
                assert steps[index + 4].seq_offset < 0
                stale += 1
    assert deletes == restores == stale == late == 12
    # The other workers write to the entity of each round while it is deleted.
    deleted = {s.entity_id for steps in p.workers for s in steps if s.kind == "delete"}
    for entity in deleted:
        assert sum(1 for steps in p.workers if any(
            s.kind == "write" and s.entity_id == entity for s in steps)) == 3


def test_out_of_order_causal_opens_with_the_hot_key_and_lags_seqs():
    p = plan("out_of_order_causal")
    for steps in p.workers:
        hot = [s for s in steps[:111]]
        assert all(s.entity_id == "hot-1" for s in hot)
        assert sum(1 for s in hot if s.kind == "write") == 101
        assert steps[111].entity_id != "hot-1"
    offsets = [s.seq_offset for s in writes(p)]
    assert min(offsets) >= -12
    assert 0.2 < sum(1 for o in offsets if o < 0) / len(offsets) < 0.5
    assert {f.name for f in p.faults} == {"out_of_order", "skewed_clock"}


def test_mixed_uses_two_namespaces_with_the_same_entities_and_every_fault():
    p = plan("mixed")
    entities = defaultdict(set)
    for steps in p.workers:
        for step in steps:
            entities[step.namespace].add(step.entity_id)
    assert set(entities) == {"mixed", "mixed-twin"}
    assert entities["mixed"] == entities["mixed-twin"] == {"user-1", "user-2", "user-3"}
    kinds = Counter(step.kind for steps in p.workers for step in steps)
    assert kinds["delete"] and kinds["restore"] and kinds["read"] > kinds["write"] / 3
    assert any(s.seq_offset < 0 for s in writes(p))
    assert {f.name for f in p.faults} >= {
        "lost_ack", "fail_before_apply", "duplicate_delivery", "delay"}
    assert "second_namespace" in p.requires


def test_a_key_holds_must_not_merge_pairs_in_turn():
    negated = 0
    for key, facts in facts_by_key(plan("paraphrase_flood")).items():
        canonical = {f: next(s.value for s in ws if s.meta["paraphrase"] == "none")
                     for f, ws in facts.items()}
        texts = sorted(canonical.values())
        negated += sum(1 for t in texts if t.startswith(("does not", "不")))
        assert len(set(texts)) == len(texts), key
    assert negated > 0


def test_paraphrase_flood_gives_a_key_two_facts_under_two_spellings_early_in_every_plan():
    """The rounds run as a wavefront, so a run its budget cuts short still has a key
    with two facts written under two attribute spellings (what uniqueness's
    attribute_variant_facts condition waits for)."""
    def first(steps: list[Step]) -> int:
        seen: dict[tuple[str, str], tuple[set[str], set[str]]] = defaultdict(
            lambda: (set(), set()))
        for position, step in enumerate(steps):
            if step.kind == "write":
                facts, spellings = seen[step.entity_id, step.meta["slot"]]
                facts.add(step.meta["fact"])
                spellings.add(step.attribute)
                if len(facts) >= 2 and len(spellings) >= 2:
                    return position
        return len(steps)

    p = plan("paraphrase_flood", level="lexical", workers=8, seed=3)
    for steps in p.workers:
        assert first(list(steps)) < len(steps) // 10, len(steps)


def _simulated_seqs(p, rng_seed: int) -> list[tuple[tuple[str, str, str], int]]:
    """Run a plan's clock as the runner does, under one random interleaving of workers:
    every write, delete and restore ticks the shared clock, plus its seq_offset, at 0 or
    above. Returns (key, seq) of each write in arrival order."""
    import random

    from scenarios.generators._steps import interleave

    clock = 0
    arrived = []
    for step in interleave(random.Random(rng_seed), p.workers):
        if step.kind == "read":
            continue
        clock += 1
        if step.kind == "write":
            key = (step.namespace, step.entity_id, step.meta["slot"])
            arrived.append((key, max(0, clock + step.seq_offset)))
    return arrived


@pytest.mark.parametrize("schedule", range(5))
def test_out_of_order_causal_crosses_digit_boundaries_on_one_key_under_any_schedule(schedule):
    arrived = _simulated_seqs(plan("out_of_order_causal", workers=4), schedule)
    seqs = defaultdict(list)
    inversions = 0
    for key, seq in arrived:
        if seqs[key] and seq < max(seqs[key]):
            inversions += 1
        seqs[key].append(seq)
    hot = seqs["out_of_order_causal", "hot-1", "city"]
    for boundary in (10, 100):
        assert min(hot) < boundary <= max(hot)
    # Pairs that text comparison gets wrong: "9" > "10"..."89", "99" > "100"..."989".
    for low, high in (((1, 9), (10, 89)), ((90, 99), (100, 989))):
        assert any(low[0] <= s <= low[1] for s in hot)
        assert any(high[0] <= s <= high[1] for s in hot)
    assert inversions > 50


def test_every_condition_chaos_measures_can_be_required():
    from chaos.coverage import measure
    from invariants.history import HistoryRecorder
    from scenarios import COVERAGE

    assert set(measure(HistoryRecorder().history())) <= set(COVERAGE)
