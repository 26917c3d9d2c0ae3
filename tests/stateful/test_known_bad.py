"""The machine finds every known-bad backend's bug, by the checker KNOWN_BAD names, and
shrinks it to a short program that raises the same violation when run."""

from __future__ import annotations

import pytest

from chaos.examples import KNOWN_BAD
from invariants.stateful import VIOLATED, run_machine

from .support import CONCURRENT_ONLY, HUNT, HUNT_RACES, untimed


@pytest.mark.parametrize(("spec", "checkers"),
                         sorted(KNOWN_BAD.items()))
def test_each_known_bad_backend_fails_its_checkers_with_a_short_program(spec, checkers, capsys):
    hunt = HUNT_RACES if spec in CONCURRENT_ONLY else HUNT
    for checker in checkers:
        run = run_machine(spec, level="lexical", checkers=(checker,), settings=hunt)

        assert run.failed == (checker,)
        (failure,) = run.failures
        assert failure.program.startswith(
            f"# memcert: the shortest program found that breaks {checker}\n# on {spec}.\n"
        )
        assert (f"    {spec!r},\n    level='lexical',\n    checkers={(checker,)!r},\n"
                "    echo=True,\n)\n") in failure.program
        assert failure.program.endswith("state.teardown()\n")
        if spec not in CONCURRENT_ONLY:
            assert failure.steps <= 12, failure.program
        if not failure.concurrent:
            with pytest.raises(VIOLATED[failure.checkers[0]]) as raised:
                exec(compile(failure.program, "<program>", "exec"), {})
            assert untimed(raised.value.explanations) == untimed(failure.explanations)
            assert f"shows a violation of {checker}:\n" in capsys.readouterr().out
