"""The machine over single backends: what a failure looks like, what a pass needs, and
the errors it gives for bad arguments."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.database import InMemoryExampleDatabase

from chaos.examples import InMemoryBackend, SharedFactory
from chaos.examples import in_memory as correct_backend
from chaos.examples import no_restore as backend_without_restore
from invariants._stateful_settings import active_settings, scoped
from invariants.checkers import CHECKER_NAMES
from invariants.errors import FactoryError, InvalidArgument
from invariants.stateful import (
    PROFILES,
    IsolationViolated,
    machine_for,
    restore_supported,
    run_machine,
)
from reference_store import ReferenceStore

from .support import HUNT, QUICK, isolated_env, untimed

REPO = str(Path(__file__).resolve().parents[2])
"""The folder ``chaos.examples`` is imported from, which programs put on sys.path."""

LEAK_PROGRAM = f"""\
# memcert: the shortest program found that breaks isolation
# on chaos.examples:leaky_namespaces.
# Run it with python, from any folder; as certify does, it empties the store first.
# It prints each step as it runs: the operations sent, as the backend received them,
# and the answers. The step that shows the violation prints the explanation, then raises.
import sys

sys.path.insert(0, {REPO!r})  # the folder the factory was imported from

from invariants.stateful import machine_for

BackendMachine = machine_for(
    'chaos.examples:leaky_namespaces',
    level='lexical',
    checkers=('isolation',),
    echo=True,
)
state = BackendMachine()
attributes_0, attributes_1 = state.init_attributes()  # step 1
entities_0, entities_1 = state.init_entities()  # step 2
facts_0, facts_1, facts_2 = state.init_facts(slot='coffee_preference', obj=0)  # step 3
paraphrases_0, paraphrases_1, paraphrases_2 = facts_0, facts_1, facts_2
state.burst(entity=entities_1, ops=[facts_2, facts_2], threads=1)  # step 4
state.teardown()
"""

LEAK_VIEW = """\
W op 0: write tenant_b/alice 'city' = "lives in Beijing [b]" causal_seq 1 op_id op-0
   -> Ack(applied=True, version=1)  t=…
R op 4: read tenant_a/alice -> 1 record  t=…
   [0] 'city' = "lives in Beijing [b]" causal_seq 2 version 1"""

LEAK = (
    f"isolation: {LEAK_VIEW}\n"
    'memcert\'s reading (ground truth): Let W = op 0, a write of "lives in Beijing [b]" (fact '
    "city:beijing, slot city, causal_seq 1) to alice in namespace tenant_b, acknowledged at "
    "index 1. Then read op 4 of alice in namespace tenant_a returned W's value, but no write of "
    "that value was made in tenant_a, and namespaces never share records, a contradiction."
)
"""The explanation, its times left out (:func:`untimed`)."""

LEAK_ECHO = f"""\
step 1  init_attributes: the attribute names 'coffee_preference', 'city'
step 2  init_entities: tenant_a/alice, tenant_b/alice
step 3  init_facts: the facts coffee_preference:americano, coffee_preference:not americano,
        city:beijing
step 4  burst: 2 operations on tenant_b/alice, in order
  op 0: write tenant_b/alice 'city' = "lives in Beijing [b]" causal_seq 1 op_id op-0
     -> Ack(applied=True, version=1)
  op 2: write tenant_b/alice 'city' = "lives in Beijing [b]" causal_seq 2 op_id op-1
     -> Ack(applied=True, version=1, reason='merged')
  op 4: read tenant_a/alice -> 1 record  (the step's read back)
     [0] 'city' = "lives in Beijing [b]" causal_seq 2 version 1
  op 6: read tenant_b/alice -> 1 record  (the step's read back)
     [0] 'city' = "lives in Beijing [b]" causal_seq 2 version 1
step 4 shows a violation of isolation:
{LEAK_VIEW}
memcert's reading (ground truth): Let W = op 0, a write of "lives in Beijing [b]" (fact
city:beijing, slot city, causal_seq 1) to alice in namespace tenant_b, acknowledged at index 1. Then
read op 4 of alice in namespace tenant_a returned W's value, but no write of that value was made in
tenant_a, and namespaces never share records, a contradiction.
"""
"""What the program prints as it runs, times left out."""


def test_a_failure_is_a_program_that_runs_as_printed_from_any_folder(tmp_path):
    run = run_machine("chaos.examples:leaky_namespaces", level="lexical",
                      checkers=("isolation",), settings=HUNT)

    (failure,) = run.failures
    assert failure.program == LEAK_PROGRAM
    assert (failure.checkers, untimed(failure.explanations), failure.steps) == (
        ("isolation",), (LEAK,), 4)
    assert not failure.concurrent
    program = tmp_path / "saved" / "leak.py"
    program.parent.mkdir()
    program.write_text(failure.program, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran = subprocess.run([sys.executable, str(program)], capture_output=True, text=True,
                         cwd=elsewhere, check=False, env=isolated_env())
    assert ran.returncode == 1, ran.stderr
    assert untimed(ran.stdout) == LEAK_ECHO
    assert max(len(line) for line in ran.stdout.splitlines()) <= 100
    last = ran.stderr[ran.stderr.index("invariants.stateful.IsolationViolated: "):].rstrip("\n")
    assert untimed(last) == f"invariants.stateful.IsolationViolated: {LEAK}"
    assert "    state.burst(entity=entities_1, ops=[facts_2, facts_2], threads=1)  # step 4" in (
        ran.stderr)


def test_the_printed_program_replays_in_process_too(capsys):
    namespace: dict[str, object] = {}
    with pytest.raises(IsolationViolated) as raised:
        exec(compile(LEAK_PROGRAM, "<program>", "exec"), namespace)
    assert untimed(str(raised.value)) == LEAK
    assert raised.value.checkers == ("isolation",)
    assert [v.kind for v in raised.value.violations] == ["leak"]
    assert untimed(capsys.readouterr().out) == LEAK_ECHO


def test_a_machine_echoes_nothing_unless_asked(capsys):
    program = LEAK_PROGRAM.replace("    echo=True,\n", "")
    with pytest.raises(IsolationViolated):
        exec(compile(program, "<program>", "exec"), {})
    assert capsys.readouterr().out == ""


def test_a_correct_backend_passes_with_every_checker_having_checked_something():
    run = run_machine(correct_backend, level="lexical", checkers=CHECKER_NAMES, settings=QUICK)

    assert run.failures == ()
    assert run.undecided == {}
    assert all(run.checked[name] > 0 for name in CHECKER_NAMES), run.checked
    assert run.programs >= QUICK.max_examples


def test_the_reference_store_passes_every_checker(db_url):
    run = run_machine(lambda: ReferenceStore(db_url), level="lexical",
                      checkers=CHECKER_NAMES, settings=QUICK)

    assert run.failures == ()
    assert run.undecided == {}


class ReadsFail(InMemoryBackend):
    """Takes every write, then refuses every read: nothing can be checked."""

    def read(self, namespace: str, entity_id: str) -> list:
        raise ConnectionError("read refused")


def test_a_backend_that_serves_no_read_is_undecided_never_passed():
    run = run_machine(SharedFactory(ReadsFail), level="lexical", checkers=CHECKER_NAMES,
                      settings=QUICK)

    assert run.failures == ()
    assert set(run.undecided) == set(CHECKER_NAMES)
    assert run.undecided["phantom"] == "nothing to check: no read returned a record"


def test_restore_is_detected_and_a_missing_one_is_recorded_as_unsupported():
    assert restore_supported(correct_backend) is True
    assert restore_supported(backend_without_restore) is False

    run = run_machine(backend_without_restore, level="lexical", checkers=CHECKER_NAMES,
                      settings=QUICK, restore=True)
    assert run.failures == ()
    assert run.restore_supported is False


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"level": "fuzzy"}, InvalidArgument,
     "level='fuzzy' is not a normalization level; use one of surface, lexical, semantic"),
    ({"checkers": ("uniqueness", "unicity")}, InvalidArgument,
     "checkers=('uniqueness', 'unicity') must name one or more of uniqueness, "
     "causal_monotonicity, deletion_monotonicity, semantic_normalization, durability, "
     "isolation, phantom"),
    ({"backend": 42}, InvalidArgument,
     "backend=42 (type int) is not a backend factory; pass a zero-argument callable or its "
     "'package.module:callable' name"),
    ({"backend": "in_memory"}, FactoryError,
     "backend 'in_memory' is not of the form package.module:callable; for example "
     "reference_store:factory"),
])
def test_a_bad_argument_is_named_with_the_fix(kwargs, error, message):
    arguments = {"backend": "chaos.examples:in_memory", **kwargs}
    with pytest.raises(error) as raised:
        machine_for(arguments.pop("backend"), **arguments)
    assert str(raised.value) == message


def test_the_ci_profile_is_used_when_ci_is_set_and_a_loaded_memcert_profile_wins(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert active_settings() is settings.get_profile("memcert-ci")
    monkeypatch.setenv("CI", "false")
    assert active_settings() is settings.get_profile("memcert-dev")
    before = settings.get_current_profile_name()
    settings.load_profile("memcert-nightly")
    try:
        assert active_settings() is settings.get_profile("memcert-nightly")
    finally:
        settings.load_profile(before)


def test_the_profiles_say_what_they_are_for():
    dev, ci, nightly = (PROFILES[f"memcert-{name}"] for name in ("dev", "ci", "nightly"))
    assert (ci.derandomize, ci.print_blob, ci.database) == (True, True, None)
    assert not dev.derandomize
    assert nightly.max_examples > ci.max_examples > dev.max_examples
    assert nightly.stateful_step_count > ci.stateful_step_count


def test_saved_failures_are_kept_apart_per_backend():
    shared = settings(database=InMemoryExampleDatabase())
    racy, correct = scoped(shared, "racy_upsert"), scoped(shared, "in_memory")
    assert racy.database is not None and correct.database is not None

    racy.database.save(b"machine", b"failing program")

    assert list(correct.database.fetch(b"machine")) == []
    assert list(racy.database.fetch(b"machine")) == [b"failing program"]


def test_the_plugin_imports_nothing_heavy_and_the_machine_no_database():
    def loaded(module: str) -> list[str]:
        code = (f"import sys, {module}; print(sorted(m for m in ('hypothesis', "
                "'invariants.stateful', 'invariants.certification_suite', 'sqlalchemy', "
                "'reference_store', 'chaos', 'scenarios') if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
        return eval(out.stdout)

    assert loaded("invariants.pytest_plugin") == []
    assert loaded("invariants.stateful") == ["hypothesis", "invariants.stateful"]


def test_a_factory_without_an_importable_name_leaves_a_placeholder_in_the_program():
    from chaos.examples import leaky_namespaces

    run = run_machine(lambda: leaky_namespaces(), level="lexical", checkers=("isolation",),
                      settings=HUNT)

    (failure,) = run.failures
    head = failure.program.split("state = BackendMachine()")[0]
    assert head.endswith(
        f"sys.path.insert(0, {REPO!r})  # the folder the factory was imported from\n"
        "\n"
        "from invariants.stateful import machine_for\n\n"
        "backend_factory = ...  # not importable by name: put the factory here\n"
        "BackendMachine = machine_for(\n"
        "    backend_factory,\n"
        "    level='lexical',\n"
        "    checkers=('isolation',),\n"
        "    echo=True,\n"
        ")\n"
    )
    assert "# on tests.stateful.test_machine:" in head


def test_a_run_within_seconds_stops_when_they_are_up_having_checked_something():
    endless = settings(QUICK, max_examples=100_000)
    started = time.monotonic()
    run = run_machine(correct_backend, level="lexical", checkers=CHECKER_NAMES,
                      settings=endless, within=1.0)

    assert time.monotonic() - started < 4.0
    assert 0 < run.programs < endless.max_examples
    assert run.failures == ()
    assert all(run.checked[name] > 0 for name in CHECKER_NAMES), run.checked


def test_a_run_within_seconds_still_finds_and_shrinks_a_violation():
    run = run_machine("chaos.examples:leaky_namespaces", level="lexical",
                      checkers=("isolation",), settings=HUNT, within=30.0)

    (failure,) = run.failures
    assert failure.program == LEAK_PROGRAM


def test_a_negative_time_bound_is_named_with_the_fix():
    with pytest.raises(InvalidArgument) as raised:
        run_machine(correct_backend, level="lexical", checkers=CHECKER_NAMES, settings=QUICK,
                    within=-1.0)
    assert str(raised.value) == "within=-1.0 must be a number of seconds, 0 or more"


def test_a_run_within_seconds_goes_on_into_its_grace_while_a_checker_has_nothing_to_check():
    endless = settings(QUICK, max_examples=100_000)
    started = time.monotonic()
    run = run_machine(SharedFactory(ReadsFail), level="lexical", checkers=("phantom",),
                      settings=endless, within=0.0, grace=1.0)

    assert 1.0 <= time.monotonic() - started < 4.0
    assert run.undecided == {"phantom": "nothing to check: no read returned a record"}
