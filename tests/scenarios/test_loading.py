"""Every shipped scenario and suite loads, and means what its file says."""

from __future__ import annotations

import pytest

import scenarios
from scenarios import COVERAGE, list_scenarios, list_suites, load_scenario, load_suite
from scenarios._scenario import SCENARIO_DIR
from scenarios.plan import FaultSpec

NAMES = ["concurrent_writes", "crash_restart", "crash_worker", "delete_then_write", "mixed",
         "network_faults", "out_of_order_causal", "paraphrase_flood", "partition", "pause",
         "process_writes", "value_diversity"]
NETWORK = ["network_faults", "partition", "crash_restart", "pause"]
PROCESSES = ["process_writes", "crash_worker"]
IN_PROCESS = [name for name in NAMES if name not in NETWORK + PROCESSES]


def test_public_surface_is_small_and_fixed():
    assert sorted(scenarios.__all__) == [
        "COVERAGE", "Scenario", "ScenarioError", "Suite", "SuiteEntry", "list_scenarios",
        "list_suites", "load_scenario", "load_suite",
    ]


def test_the_scenarios_are_listed():
    assert list_scenarios() == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_scenario_loads_by_name_and_by_path(name):
    by_name = load_scenario(name)
    by_path = load_scenario(SCENARIO_DIR / f"{name}.toml")
    assert by_name == by_path
    assert by_name.name == name
    assert by_name.description.strip()
    assert by_name.requires
    assert all(condition in COVERAGE for condition in by_name.requires)
    assert set(by_name.params) == set(by_name.implementation.params)


def test_params_get_defaults_and_faults_become_specs():
    scenario = load_scenario("out_of_order_causal")
    assert scenario.generator == "scenarios.generators:out_of_order_causal"
    assert scenario.params["boundary_writes"] == 101
    assert scenario.params["slots"] == ("city", "coffee_preference")
    assert scenario.faults == (
        FaultSpec("out_of_order", {"p": 0.2, "hold_s": 0.005}),
        FaultSpec("skewed_clock", {"p": 0.1, "max_skew": 5.0}),
    )


def test_a_parameter_left_out_takes_its_default(tmp_path):
    path = tmp_path / "few.toml"
    path.write_text('description = "d"\ngenerator = "scenarios.generators:concurrent_writes"\n'
                    "[params]\nentities = 2\n")
    scenario = load_scenario(path)
    assert scenario.name == "few"
    assert scenario.params["entities"] == 2
    assert scenario.params["steps_per_worker"] == 200
    assert scenario.faults == ()
    assert scenario.requires == ()


def test_a_module_path_names_its_generator_attribute(tmp_path):
    module = tmp_path / "my_generator_module.py"
    module.write_text(
        "from scenarios.generators import generator, GeneratorParam\n"
        "from scenarios.generators._steps import read\n"
        "@generator(keys=GeneratorParam(int, 1, 'how many', minimum=1))\n"
        "def generator(ctx):\n"
        "    return [[read(ctx.scenario, f'k{n}') for n in range(ctx.params['keys'])]\n"
        "            for _ in range(ctx.workers)]\n"
    )
    path = tmp_path / "reads.toml"
    path.write_text('description = "d"\ngenerator = "my_generator_module"\n[params]\nkeys = 2\n')
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        plan = load_scenario(path).plan(seed=0, workers=2, level="lexical")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_generator_module", None)
    assert plan.size == 4
    assert {step.entity_id for step in plan.workers[1]} == {"k0", "k1"}


def test_suites_are_listed_and_the_certify_suite_runs_every_phase_in_60_s():
    assert list_suites() == ["certify", "network", "nightly", "quick"]
    suite = load_suite("certify")
    assert suite.budget_s == 60
    # out_of_order_causal first: with one Lamport clock across the suite, only the first
    # plan's hot key sees the clock pass 9 -> 10 and 99 -> 100.
    assert [entry.scenario.name for entry in suite.entries] == [
        "out_of_order_causal", "value_diversity", "concurrent_writes", "delete_then_write",
        "paraphrase_flood", "mixed", "process_writes", "crash_worker", "crash_restart", "pause",
    ]
    assert load_suite("nightly").entries[0].scenario.name == "out_of_order_causal"
    quick = load_suite("quick")
    assert [e.scenario.name for e in quick.entries] == [e.scenario.name for e in suite.entries]
    assert {e.scale for e in quick.entries} == {0.25}
    assert sum(entry.budget_s(suite.budget_s) for entry in suite.entries) == pytest.approx(60)


def test_the_nightly_suite_is_bigger_in_budget_and_volume():
    nightly, certify = load_suite("nightly"), load_suite("certify")
    assert nightly.budget_s > certify.budget_s
    assert {entry.scenario.name for entry in nightly.entries} == set(IN_PROCESS)
    assert all(entry.scale >= 10 for entry in nightly.entries)
    small = {p.scenario: p.size for p in certify.plans(seed=1, workers=2, level="lexical")}
    large = {p.scenario: p.size for p in nightly.plans(seed=1, workers=2, level="lexical")}
    assert all(large[name] > 4 * small[name] for name in IN_PROCESS)


def test_the_network_suite_runs_the_four_scenarios_that_need_a_service():
    suite = load_suite("network")
    assert [entry.scenario.name for entry in suite.entries] == NETWORK
    networks = [entry.scenario.network for entry in suite.entries]
    assert [(n.uses_proxies, n.crashes, n.signals_service) for n in networks
            if n is not None] == [
        (True, False, False), (True, False, False), (False, True, True), (False, False, True)]
    assert all(load_scenario(name).network is None for name in IN_PROCESS)


def test_a_suite_entry_may_name_a_scenario_file_next_to_it(tmp_path):
    (tmp_path / "local_one.toml").write_text(
        'description = "d"\ngenerator = "scenarios.generators:concurrent_writes"\n')
    suite_path = tmp_path / "mine.toml"
    suite_path.write_text('description = "d"\nbudget_s = 5\n'
                          '[[scenarios]]\nname = "local_one.toml"\nshare = 0.5\nscale = 0.5\n'
                          '[[scenarios]]\nname = "mixed"\nshare = 0.5\n')
    suite = load_suite(suite_path)
    assert [entry.scenario.name for entry in suite.entries] == ["local_one", "mixed"]
    assert [entry.scale for entry in suite.entries] == [0.5, 1.0]


def test_generators_written_against_the_earlier_names_still_load():
    import chaos.plan
    import scenarios.generators
    import scenarios.plan

    assert scenarios.generators.Param is scenarios.generators.GeneratorParam
    for name in ("Step", "StepKind", "FaultSpec", "Plan"):
        assert getattr(chaos.plan, name) is getattr(scenarios.plan, name)
