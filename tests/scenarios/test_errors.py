"""Every way a scenario or suite file can be wrong gets a message that says how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.faults import FAULTS, validate_specs
from invariants.errors import InvalidArgument, InvalidInput
from scenarios import ScenarioError, load_scenario, load_suite
from scenarios.generators import PLAIN
from scenarios.plan import FaultSpec

GOOD = 'description = "d"\ngenerator = "scenarios.generators:concurrent_writes"\n'


def scenario_file(tmp_path: Path, text: str, name: str = "broken") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value


def test_errors_are_invalid_input_and_value_errors(tmp_path):
    error = load_error(scenario_file(tmp_path, GOOD + "descriptoin = 'x'\n"))
    assert isinstance(error, InvalidInput)
    assert isinstance(error, ValueError)
    assert error.field == "descriptoin"
    assert error.path == tmp_path / "broken.toml"


def test_unknown_field_suggests_the_close_one(tmp_path):
    path = scenario_file(tmp_path, GOOD + "requirs = []\n")
    assert str(load_error(path)) == (
        f"{path}: requirs=[] (type list) is not a field of a scenario. Did you mean "
        "'requires'? A scenario has the fields description, generator, params, faults, "
        "requires, network, processes, tag, service."
    )


def test_name_is_the_file_stem_not_a_field(tmp_path):
    path = scenario_file(tmp_path, GOOD + 'name = "other"\n')
    assert str(load_error(path)) == (
        f"{path}: name='other' (type str) is not a field of a scenario. A scenario is named "
        "by its file's stem ('broken'); remove the field."
    )


def test_missing_and_mistyped_fields(tmp_path):
    path = scenario_file(tmp_path, 'generator = "scenarios.generators:mixed"\n')
    assert str(load_error(path)) == (
        f'{path}: description is missing. Add it, e.g. description = "What it does.".'
    )
    path = scenario_file(tmp_path, 'description = 5\ngenerator = "scenarios.generators:mixed"\n')
    assert str(load_error(path)) == (
        f'{path}: description=5 (type int) is not a non-empty string. Give a string, e.g. '
        'description = "What it does.".'
    )


def test_bad_toml_names_the_file(tmp_path):
    path = scenario_file(tmp_path, "description = \n")
    message = str(load_error(path))
    assert message.startswith(f"{path}: the file is not valid TOML (")
    assert message.endswith("). Fix the syntax; docs/scenarios.md shows a complete example.")


def test_unknown_scenario_name_suggests_the_close_one():
    with pytest.raises(ScenarioError) as info:
        load_scenario("concurent_writes")
    assert str(info.value) == (
        "scenario='concurent_writes' (type str) is not a known scenario. Did you mean "
        "'concurrent_writes'? Known scenarios: concurrent_writes, crash_restart, "
        "crash_worker, delete_then_write, mixed, network_faults, out_of_order_causal, "
        "paraphrase_flood, partition, pause, process_writes, value_diversity; or give the "
        "path of a .toml file."
    )
    assert info.value.path is None


def test_missing_file_and_bad_file_name(tmp_path):
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "nowhere.toml")
    assert str(info.value) == (
        f"{tmp_path / 'nowhere.toml'}: there is no such file. Give the path of an existing "
        ".toml file, or a scenario name."
    )
    path = scenario_file(tmp_path, GOOD, name="Bad-Name")
    assert str(load_error(path)) == (
        f"{path}: name='Bad-Name' (type str) is not a scenario name. A scenario is named by "
        "its file: rename the file with lowercase letters, digits and underscores, starting "
        "with a letter (e.g. my_scenario.toml)."
    )


def test_a_name_of_the_wrong_type_is_an_invalid_argument():
    with pytest.raises(InvalidArgument) as info:
        load_scenario(3)  # type: ignore[arg-type]
    assert str(info.value) == (
        "scenario=3 (type int) is neither a name nor a path. Pass a scenario name such as "
        "'mixed', or the path of a .toml file."
    )


def test_generator_that_cannot_be_found(tmp_path):
    path = scenario_file(tmp_path, 'description = "d"\ngenerator = "scenarios.generators:mixd"\n')
    assert str(load_error(path)) == (
        f"{path}: generator='scenarios.generators:mixd' (type str) names no attribute 'mixd' "
        "of scenarios.generators. Did you mean 'mixed'? Generators there: concurrent_writes, "
        "delete_then_write, mixed, out_of_order_causal, paraphrase_flood, value_diversity."
    )
    path = scenario_file(tmp_path, 'description = "d"\ngenerator = "no_such_module:x"\n')
    assert str(load_error(path)) == (
        f"{path}: generator='no_such_module:x' (type str) names a module that cannot be "
        "imported (No module named 'no_such_module'). Give 'package.module:attribute', e.g. "
        "'scenarios.generators:mixed'."
    )
    path = scenario_file(tmp_path, 'description = "d"\ngenerator = "scenarios.generators:PLAIN"\n')
    assert load_error(path).problem.startswith("names {'city': 'lives in city-{tag}'")


def test_unknown_param_wrong_type_and_out_of_range(tmp_path):
    path = scenario_file(tmp_path, GOOD + "[params]\nentites = 3\n")
    assert str(load_error(path)) == (
        f"{path}: params.entites=3 (type int) is not a parameter of this generator. Did you "
        "mean 'entities'? It takes entities, slots, steps_per_worker, write_ratio, "
        "max_pause_s."
    )
    path = scenario_file(tmp_path, GOOD + '[params]\nentities = "3"\n')
    assert str(load_error(path)) == (
        f"{path}: params.entities='3' (type str) is not an integer. Give an integer in "
        "[1, 1000]: how many entities every worker writes."
    )
    path = scenario_file(tmp_path, GOOD + "[params]\nwrite_ratio = 1.5\n")
    assert str(load_error(path)) == (
        f"{path}: params.write_ratio=1.5 (type float) is out of range. Give a number in "
        "[0, 1]: the share of steps that write."
    )
    path = scenario_file(tmp_path, GOOD + '[params]\nslots = ["city", "jbo"]\n')
    assert str(load_error(path)) == (
        f"{path}: params.slots[1]='jbo' (type str) is not allowed. Did you mean 'job'? Give a "
        "list of strings of at least 1 item(s) from city, job, coffee_preference, "
        f"drink_preference, language, {', '.join(list(PLAIN)[5:])}: the slots written."
    )


def test_fault_errors(tmp_path):
    path = scenario_file(tmp_path, GOOD + '[[faults]]\nname = "lost_akc"\np = 0.1\n')
    assert str(load_error(path)) == (
        f"{path}: faults[0].name='lost_akc' (type str) is not a fault. Did you mean "
        "'lost_ack'? Faults: delay, out_of_order, lost_ack, fail_before_apply, "
        "duplicate_delivery, skewed_clock."
    )
    path = scenario_file(tmp_path, GOOD + '[[faults]]\nname = "delay"\nmean = 0.1\n')
    assert str(load_error(path)) == (
        f"{path}: faults[0].mean=0.1 (type float) is not a parameter of the delay fault. "
        "Did you mean 'mean_s'? delay takes mean_s and jitter_s."
    )
    path = scenario_file(tmp_path, GOOD + '[[faults]]\nname = "lost_ack"\np = true\n')
    assert str(load_error(path)) == (
        f"{path}: faults[0].p=True (type bool) is not a number. Give a probability in [0, 1]."
    )
    path = scenario_file(tmp_path, GOOD + '[[faults]]\nname = "out_of_order"\np = 0.1\n')
    assert str(load_error(path)) == (
        f"{path}: faults[0].hold_s is missing. The out_of_order fault takes p and hold_s; "
        "give each of them."
    )
    path = scenario_file(tmp_path, GOOD + '[[faults]]\np = 0.1\n')
    assert str(load_error(path)) == (
        f"{path}: faults[0].name is missing. Name the fault: one of delay, out_of_order, "
        "lost_ack, fail_before_apply, duplicate_delivery, skewed_clock."
    )


@pytest.mark.parametrize("name", list(FAULTS))
def test_a_fault_table_takes_what_the_injector_takes(tmp_path, name):
    accepted = FAULTS[name].PARAMS
    for end in ("low", "high"):
        values = {param: getattr(allowed, end) for param, allowed in accepted.items()}
        lines = "".join(f"{param} = {value!r}\n" for param, value in values.items())
        path = scenario_file(tmp_path, f'{GOOD}[[faults]]\nname = "{name}"\n{lines}')
        (spec,) = load_scenario(path).faults
        assert spec == FaultSpec(name, values)
        validate_specs([spec])
    for param, allowed in accepted.items():
        values = {other: other_allowed.low for other, other_allowed in accepted.items()}
        values[param] = allowed.high * 2
        lines = "".join(f"{key} = {value!r}\n" for key, value in values.items())
        path = scenario_file(tmp_path, f'{GOOD}[[faults]]\nname = "{name}"\n{lines}')
        error = load_error(path)
        assert (error.field, error.problem, error.fix) == (
            f"faults[0].{param}", "is out of range", f"Give {allowed.meaning}.")


def test_unknown_coverage_condition(tmp_path):
    path = scenario_file(tmp_path, GOOD + 'requires = ["read_after_delte"]\n')
    message = str(load_error(path))
    assert message.startswith(
        f"{path}: requires[0]='read_after_delte' (type str) is not a coverage condition. "
        "Did you mean 'read_after_delete'? Conditions: overlapping_same_key_writes, "
    )


def test_plan_arguments_are_checked():
    scenario = load_scenario("concurrent_writes")
    cases = {
        "seed": ({"seed": "1", "workers": 2, "level": "lexical"},
                 "seed='1' (type str) is not an integer. Pass e.g. seed=0."),
        "workers": ({"seed": 1, "workers": 0, "level": "lexical"},
                    "workers=0 (type int) is not a positive integer. Pass e.g. workers=4."),
        "level": ({"seed": 1, "workers": 2, "level": "lexicl"},
                  "level='lexicl' (type str) is not a paraphrase level. Pass one of surface, "
                  "lexical, semantic."),
        "scale": ({"seed": 1, "workers": 2, "level": "lexical", "scale": 0},
                  "scale=0 (type int) is not a positive number. Pass e.g. scale=1.0."),
    }
    for arguments, message in cases.values():
        with pytest.raises(InvalidArgument) as info:
            scenario.plan(**arguments)
        assert str(info.value) == message


def test_a_generator_that_breaks_the_ground_truth_is_refused(tmp_path, monkeypatch):
    module = tmp_path / "liar_module.py"
    module.write_text(
        "from scenarios.plan import Step\n"
        "from scenarios.generators import generator\n"
        "@generator()\n"
        "def generator(ctx):\n"
        "    def w(fact):\n"
        "        return Step('write', 'ns', 'e', 'city', 'same text',\n"
        "                    {'fact': fact, 'slot': 'city', 'paraphrase': 'none'})\n"
        "    return [[w('f1'), w('f2')] for _ in range(ctx.workers)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = scenario_file(tmp_path, 'description = "d"\ngenerator = "liar_module"\n')
    with pytest.raises(ScenarioError) as info:
        load_scenario(path).plan(seed=0, workers=1, level="lexical")
    assert str(info.value) == (
        f"{path}: generator='liar_module' (type str) broke the ground-truth rules: worker 0, "
        "step 1 writes 'same text' for fact 'f2', but fact 'f1' also wrote it. Give each "
        "fact texts no other fact uses."
    )


SUITE_HEAD = 'description = "d"\nbudget_s = 10\n'


def suite_error(tmp_path: Path, text: str) -> tuple[Path, str]:
    path = scenario_file(tmp_path, SUITE_HEAD + text, name="suite")
    with pytest.raises(ScenarioError) as info:
        load_suite(path)
    return path, str(info.value)


def test_suite_errors(tmp_path):
    path, message = suite_error(tmp_path, '[[scenarios]]\nname = "mixd"\nshare = 1.0\n')
    assert message == (
        f"{path}: scenarios[0].name='mixd' (type str) is not a known scenario. Did you mean "
        "'mixed'? Known scenarios: concurrent_writes, crash_restart, crash_worker, "
        "delete_then_write, mixed, network_faults, out_of_order_causal, paraphrase_flood, "
        "partition, pause, process_writes, value_diversity; or give a .toml path relative "
        "to the suite."
    )
    path, message = suite_error(tmp_path, '[[scenarios]]\nname = "mixed"\nshare = 0.5\n')
    assert message == (
        f"{path}: scenarios have shares that sum to 0.5, not 1. Make the shares of the "
        "scenarios add up to 1."
    )
    path, message = suite_error(
        tmp_path, '[[scenarios]]\nname = "mixed"\nshare = 0.5\n'
                  '[[scenarios]]\nname = "mixed"\nshare = 0.5\n')
    assert message == (
        f"{path}: scenarios[1].name='mixed' (type str) is listed twice. List each scenario "
        "once; a larger scale gives it more volume."
    )
    path, message = suite_error(tmp_path, '[[scenarios]]\nname = "mixed"\nshare = 1\nscal = 2\n')
    assert message == (
        f"{path}: scenarios[0].scal=2 (type int) is not a field of a suite's scenario. Did "
        "you mean 'scale'? A suite's scenario has the fields name, share, scale."
    )
    path, message = suite_error(tmp_path, '[[scenarios]]\nname = "mixed"\nshare = 1\nscale = -1\n')
    assert message == (
        f"{path}: scenarios[0].scale=-1 (type int) is out of range. Give a positive "
        "multiplier of the scenario's volume, e.g. scale = 1.0."
    )
    with pytest.raises(ScenarioError) as info:
        load_suite("nightyl")
    assert str(info.value) == (
        "suite='nightyl' (type str) is not a known suite. Did you mean 'nightly'? Known "
        "suites: certify, network, nightly, quick; or give the path of a .toml file."
    )


def test_suite_refuses_two_scenarios_whose_values_would_share_tags(tmp_path):
    (tmp_path / "cold_wave.toml").write_text(GOOD)
    path, message = suite_error(
        tmp_path, '[[scenarios]]\nname = "concurrent_writes"\nshare = 0.5\n'
                  '[[scenarios]]\nname = "cold_wave.toml"\nshare = 0.5\n')
    assert message == (
        f"{path}: scenarios[1].name='cold_wave' (type str) tags its values 'cw' like "
        "'concurrent_writes', so values could repeat across the two. Rename one of the "
        "scenario files so their initials differ, or give one a tag field of its own "
        '(tag = "cwk").'
    )
