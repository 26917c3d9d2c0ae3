"""docs/scenarios.md describes what the code does: every name, and a working example."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from chaos.faults import FAULTS
from scenarios import COVERAGE, list_scenarios, load_scenario
from scenarios.network_plan import ACTIONS

DOC = (Path(__file__).parents[2] / "docs" / "scenarios.md").read_text(encoding="utf-8")


def test_every_field_fault_condition_and_parameter_is_documented():
    names = [*COVERAGE, *FAULTS, *(p for cls in FAULTS.values() for p in cls.PARAMS),
             "description", "generator", "params", "faults", "requires", "budget_s",
             "scenarios[].name", "scenarios[].share", "scenarios[].scale", "network",
             *ACTIONS, "groups", "timeout_s", "backoff_s", "nemesis", "at", "down_s",
             "toxic", "not_run", "processes", "count", "kill_at", "tag", "service",
             "command", "health_url", "start_timeout_s", "cwd"]
    for scenario in map(load_scenario, list_scenarios()):
        assert f"### `{scenario.name}`" in DOC
        names += list(scenario.params)
    missing = [name for name in names if f"`{name}`" not in DOC]
    assert not missing


def test_the_generator_example_runs(tmp_path, monkeypatch):
    code = re.search(r"## Writing a generator.*?```python\n(.*?)```", DOC, re.S)
    assert code is not None
    module = types.ModuleType("doc_example_generator")
    exec(compile(code.group(1), "docs/scenarios.md", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, "doc_example_generator", module)
    path = tmp_path / "doc_example.toml"
    path.write_text('description = "d"\ngenerator = "doc_example_generator:one_key"\n'
                    "[params]\nwrites = 3\n")
    plan = load_scenario(path).plan(seed=1, workers=2, level="surface", scale=2)
    assert [len(steps) for steps in plan.workers] == [7, 7]
    assert plan.workers[0][-1].kind == "read"
