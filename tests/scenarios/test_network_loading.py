"""A scenario's [network] table: read into groups and a nemesis timeline, or refused
with the field and the fix."""

from __future__ import annotations

import pytest

from scenarios import ScenarioError, load_scenario
from scenarios.network_plan import NemesisStep, Network, Toxic

HEAD = 'description = "d"\ngenerator = "scenarios.generators:concurrent_writes"\n'


def test_the_table_becomes_groups_and_a_timeline_the_plan_carries(tmp_path):
    path = tmp_path / "cut.toml"
    path.write_text(HEAD + '[network]\ngroups = ["a", "b"]\ntimeout_s = 1\n'
                    '[[network.nemesis]]\nat = 0.2\ndo = "add_toxic"\ntoxic = "lag"\n'
                    'type = "latency"\ngroups = ["a"]\nattributes = { latency = 5 }\n'
                    '[[network.nemesis]]\nat = 0.5\ndo = "partition"\ngroups = ["b"]\n'
                    '[[network.nemesis]]\nat = 0.7\ndo = "heal"\n')
    plan = load_scenario(path).plan(seed=1, workers=3, level="surface")
    assert plan.network == Network(
        groups=("a", "b"), timeout_s=1.0, timeline=(
            NemesisStep(0.2, "add_toxic", groups=("a",),
                        toxic=Toxic("lag", "latency", "downstream", 1.0, {"latency": 5})),
            NemesisStep(0.5, "partition", groups=("b",)),
            NemesisStep(0.7, "heal")))
    assert [plan.network.group_of(k) for k in range(3)] == ["a", "b", "a"]
    assert plan.network.uses_proxies and not plan.network.crashes


@pytest.mark.parametrize(("table", "field", "message"), [
    ('[[network.nemesis]]\nat = 0.5\ndo = "partiton"\ngroups = ["clients"]\n',
     "network.nemesis[0].do",
     "network.nemesis[0].do='partiton' (type str) is not an action. Did you mean "
     "'partition'? Give one of add_toxic, remove_toxic, partition, heal, crash, pause."),
    ('[[network.nemesis]]\nat = 0.2\ndo = "add_toxic"\ntoxic = "lag"\ntype = "latency"\n'
     'attributes = { latency = 10, jiter = 3 }\n',
     "network.nemesis[0]",
     "network.nemesis[0] does not make a toxic: toxic 'lag' (latency): has no attribute "
     "'jiter'. Did you mean 'jitter'? Its attributes are latency, jitter."),
    ('[[network.nemesis]]\nat = 0.2\ndo = "remove_toxic"\ntoxic = "lag"\n',
     "network.nemesis[0]",
     "network.nemesis[0] removes toxic 'lag', which no earlier step added or which was "
     "removed already. Toxics in force: none."),
    ('[[network.nemesis]]\nat = 0.6\ndo = "partition"\ngroups = ["c"]\n',
     "network.nemesis[0]",
     "network.nemesis[0] groups ['c'] are not client groups. The groups are clients."),
    ('[[network.nemesis]]\nat = 0.6\ndo = "heal"\n[[network.nemesis]]\nat = 0.2\n'
     'do = "heal"\n',
     "network.nemesis[1]",
     "network.nemesis[1] at=0.2 comes before the previous step's 0.6. List the steps in "
     "time order."),
    ('[[network.nemesis]]\nat = 0.6\ndo = "crash"\ngroups = ["clients"]\n',
     "network.nemesis[0].groups",
     "network.nemesis[0].groups=['clients'] (type list) is not a field of a crash step. A "
     "crash step has the fields at, do, down_s."),
    ("timeout = 3\n", "network.timeout",
     "network.timeout=3 (type int) is not a field of a [network] table. Did you mean "
     "'timeout_s'? A [network] table has the fields groups, timeout_s, backoff_s, nemesis."),
])
def test_a_table_that_cannot_run_as_written_is_refused_on_load(tmp_path, table, field, message):
    path = tmp_path / "bad.toml"
    path.write_text(HEAD + "[network]\n" + table)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert caught.value.field == field
    assert str(caught.value) == f"{path}: {message}"
