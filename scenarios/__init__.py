"""memcert's named chaos scenarios: declarative files that a seed turns into a plan.

A scenario is a TOML file in this folder, named by its stem; it names a generator,
the generator's parameters, the faults to inject and the coverage conditions it must
produce. ``Scenario.plan`` turns it, with a seed, a worker count, a paraphrase level
and a scale, into a :class:`scenarios.plan.Plan`; the same arguments give an equal
plan. A suite (``suites/*.toml``) runs several scenarios, each with a share of the budget.

Every write a plan holds carries the generator's ground truth in ``meta``: the fact it
states, the slot it is about, and how far its wording departs from the fact's plain
form. docs/scenarios.md describes the file format.
"""

from __future__ import annotations

from ._coverage import COVERAGE
from ._errors import ScenarioError
from ._scenario import Scenario, list_scenarios, load_scenario
from ._suite import Suite, SuiteEntry, list_suites, load_suite

__all__ = [
    "COVERAGE",
    "Scenario",
    "ScenarioError",
    "Suite",
    "SuiteEntry",
    "list_scenarios",
    "list_suites",
    "load_scenario",
    "load_suite",
]
