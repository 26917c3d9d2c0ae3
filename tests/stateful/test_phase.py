"""The stateful phase ``memcert certify`` runs: a budget, verdicts per checker, and the
shrunk programs saved in the report folder."""

from __future__ import annotations

import json

import pytest

from chaos.examples import InMemoryBackend, SharedFactory
from invariants._stateful_run import shrinking_within
from invariants.checkers import CHECKER_NAMES
from invariants.errors import InvalidArgument
from invariants.stateful import run_stateful_phase
from invariants.verdict import Validity


def test_a_broken_backend_fails_its_checker_and_the_program_is_saved(tmp_path):
    outcome = run_stateful_phase("chaos.examples:leaky_namespaces", budget_s=3, seed=11,
                                 level="lexical", out=tmp_path)

    assert outcome.failed == ("isolation",)
    assert outcome.validity("isolation") is Validity.INVALID
    assert {name: outcome.validity(name) for name in CHECKER_NAMES if name != "isolation"} == (
        dict.fromkeys([n for n in CHECKER_NAMES if n != "isolation"], Validity.VALID))
    saved = tmp_path / "stateful" / "isolation.py"
    assert outcome.saved == {"isolation": saved}
    assert saved.read_text(encoding="utf-8") == outcome.program
    assert outcome.program is not None
    assert "# on chaos.examples:leaky_namespaces.\n" in outcome.program
    assert outcome.examples > 0
    assert (outcome.seed, outcome.level, outcome.restore_supported) == (11, "lexical", True)
    data = json.loads(json.dumps(outcome.to_dict()))
    assert data["failed"] == ["isolation"]
    assert data["verdicts"]["isolation"] == "invalid"
    assert data["saved"] == {"isolation": str(saved)}
    assert data["failures"][0]["program"] == outcome.program


def test_a_correct_backend_spends_the_budget_and_every_checker_is_valid(tmp_path):
    outcome = run_stateful_phase("chaos.examples:no_restore", budget_s=3, seed=5,
                                 level="lexical", out=tmp_path)

    assert outcome.failures == ()
    assert outcome.undecided == {}
    assert all(outcome.validity(name) is Validity.VALID for name in CHECKER_NAMES)
    assert outcome.restore_supported is False
    assert outcome.saved == {}
    assert not (tmp_path / "stateful").exists()


def test_the_budget_must_be_positive(tmp_path):
    with pytest.raises(InvalidArgument) as raised:
        run_stateful_phase("chaos.examples:in_memory", budget_s=0, seed=1, level="lexical",
                           out=tmp_path)
    assert str(raised.value) == "budget_s=0 must be a positive number of seconds"


class _ReadsGarbage(InMemoryBackend):
    """Breaks the contract's types: a read returns tuples, not records."""

    def read(self, namespace, entity_id):
        return [("not", "a record")]


_garbage = SharedFactory(_ReadsGarbage)


def test_a_backend_that_breaks_the_machine_leaves_every_checker_undecided(tmp_path):
    outcome = run_stateful_phase(_garbage, budget_s=3, seed=2, level="lexical", out=tmp_path)

    assert outcome.failures == ()
    assert set(outcome.undecided) == set(CHECKER_NAMES)
    reason = outcome.undecided["uniqueness"]
    assert reason.startswith("the stateful phase stopped on ")
    assert reason.endswith("; its findings before that stand")
    assert all(outcome.validity(name) is Validity.UNKNOWN for name in CHECKER_NAMES)


def test_shrinking_is_bounded_while_the_phase_runs_and_restored_after():
    from hypothesis.internal.conjecture import engine

    before = engine.MAX_SHRINKING_SECONDS
    with shrinking_within(7.2):
        assert engine.MAX_SHRINKING_SECONDS == 8
    assert before == engine.MAX_SHRINKING_SECONDS


def test_giving_up_on_shrinking_names_the_limit_that_really_applied(capsys):
    import time

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(database=None, deadline=None, max_examples=20)
    @given(st.lists(st.integers(1, 10**6), min_size=40, max_size=40))
    def slow_to_shrink(values: list[int]) -> None:
        time.sleep(0.005)
        assert sum(values) < 40

    with shrinking_within(0.5), pytest.raises(AssertionError):
        slow_to_shrink()
    out = capsys.readouterr().out
    assert "five minutes" not in out
    assert ("memcert: stopped shrinking this failure after the 1 s the stateful phase could "
            "give it; the program shown is the shortest found by then") in out


def test_a_note_about_shrinking_can_be_kept_for_its_failure_instead_of_printed(capsys):
    import time

    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(database=None, deadline=None, max_examples=20)
    @given(st.lists(st.integers(1, 10**6), min_size=40, max_size=40))
    def slow_to_shrink(values: list[int]) -> None:
        time.sleep(0.005)
        assert sum(values) < 40

    notes: list[str] = []
    with shrinking_within(0.5, notes), pytest.raises(AssertionError):
        slow_to_shrink()
    assert "stopped shrinking" not in capsys.readouterr().out
    assert notes == [
        "memcert: stopped shrinking this failure after the 1 s the stateful phase could give "
        "it; the program shown is the shortest found by then, and a re-run with the same "
        "example database goes on shrinking from it."]
