"""Hypothesis stateful testing of any backend: violations shrunk to runnable programs.

:class:`BackendMachine` is a ``RuleBasedStateMachine`` over a backend factory. Its rules
make entities, attribute names, facts and paraphrases (bundles), and send writes (stale
ones, paraphrases, attribute-name variants), deletes, restores, reads and concurrent
bursts. The history the machine records is checked by the shared checkers after every
step; a violation fails the step, and Hypothesis shrinks the program to the shortest
one it can find, printed so that it runs as it stands, from any folder, one program
per invariant broken::

    import sys

    sys.path.insert(0, '/home/me/store')  # the folder the factory was imported from

    from invariants.stateful import machine_for

    BackendMachine = machine_for(
        'my_store:factory',
        level='lexical',
        checkers=('deletion_monotonicity',),
        echo=True,
    )
    state = BackendMachine()
    attributes_0, attributes_1 = state.init_attributes()  # step 1
    entities_0, entities_1 = state.init_entities()  # step 2
    facts_0, facts_1, facts_2 = state.init_facts(slot='coffee_preference', obj=0)  # step 3
    paraphrases_0, paraphrases_1, paraphrases_2 = facts_0, facts_1, facts_2
    state.write(entity=entities_1, lag=0, wording=paraphrases_2)  # step 4
    state.delete(entity=entities_1, lag=0, reason='user request')  # step 5
    state.restore(entity=entities_1)  # step 6
    state.teardown()

Run, it prints each step, each operation as the backend received it (``op N`` is its
index in the history, as the explanation cites it) and the answer, then the explanation
at the step that shows the violation, and raises there::

    step 4  write to tenant_b/alice (memcert's ground truth: the fact city:beijing, plain)
      op 0: write tenant_b/alice 'city' = "lives in Beijing [b]" causal_seq 1 op_id op-0
         -> Ack(applied=True, version=1)
      op 2: read tenant_a/alice -> 0 records  (the step's read back)
      op 4: read tenant_b/alice -> 1 record  (the step's read back)
         [0] 'city' = "lives in Beijing [b]" causal_seq 1 version 1

:func:`run_machine` runs Hypothesis over the machine once and says what it found;
:func:`run_stateful_phase` is the phase ``memcert certify`` runs within its budget; the
pytest plugin (:mod:`invariants.pytest_plugin`) runs the same machine, one test per
invariant. Settings come from the ``memcert-dev``, ``memcert-ci`` and
``memcert-nightly`` profiles (:mod:`invariants._stateful_settings`).

This module imports Hypothesis; ``import invariants`` does not import it.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import settings as Settings

from invariants.backend import BackendFactory
from invariants.capabilities import restore_supported
from invariants.checkers import CHECKER_NAMES
from invariants.errors import InvalidArgument
from invariants.factory import ResolvedBackend, resolve_backend
from invariants.verdict import Validity
from invariants.wording.values import DEFAULT_VALUE_BYTES

from ._stateful_machine import (
    VIOLATED,
    BackendMachine,
    CausalMonotonicityViolated,
    DeletionMonotonicityViolated,
    DurabilityViolated,
    InvariantViolated,
    IsolationViolated,
    PhantomViolated,
    SemanticNormalizationViolated,
    UniquenessViolated,
)
from ._stateful_run import (
    MachineRun,
    StatefulFailure,
    make_config,
    run_machine,
    shrinking_within,
)
from ._stateful_settings import PROFILES, active_settings, scoped

__all__ = [
    "PROFILES",
    "VIOLATED",
    "BackendMachine",
    "CausalMonotonicityViolated",
    "DeletionMonotonicityViolated",
    "DurabilityViolated",
    "InvariantViolated",
    "IsolationViolated",
    "MachineRun",
    "PhantomViolated",
    "SemanticNormalizationViolated",
    "StatefulFailure",
    "StatefulOutcome",
    "UniquenessViolated",
    "machine_for",
    "restore_supported",
    "run_machine",
    "run_stateful_phase",
]

BATCH = 10
"""The most programs per Hypothesis run of the phase; the budget is checked between runs."""
FIRST_BATCH = 2
"""Programs in the first run, which measures how long a program takes on this backend."""
MIN_SHRINK_S = 5.0
"""Shrinking a failure found near the end of the budget may take this long at least."""


def machine_for(
    backend: BackendFactory | str | ResolvedBackend,
    *,
    level: str = "lexical",
    checkers: tuple[str, ...] = CHECKER_NAMES,
    echo: bool = False,
    max_value_bytes: int = DEFAULT_VALUE_BYTES,
) -> Callable[[], BackendMachine]:
    """A zero-argument maker of machines over ``backend``, as printed programs use it.

    ``backend`` is a factory, its ``package.module:callable`` name, or a backend
    :func:`~invariants.factory.resolve_backend` resolved; ``level`` the
    normalization level it claims; ``checkers`` those whose violations fail a step;
    ``echo`` prints each step as it runs, the operations sent and their answers, and
    the explanation of a violation before it is raised (printed programs turn it on);
    ``max_value_bytes`` bounds the values written.
    Each machine opens its own handles and closes them in ``teardown()``.
    """
    factory = resolve_backend(backend).factory
    return functools.partial(
        BackendMachine, make_config(factory, level=level, checkers=checkers, echo=echo,
                                    max_value_bytes=max_value_bytes))


@dataclass(frozen=True)
class StatefulOutcome:
    """What the stateful phase of a certification concluded.

    - ``failed``: the checkers that found a violation, in the checkers' order; each has
      a shrunk program in ``failures`` (also saved under ``out/stateful/``).
    - ``examples``: programs run, shrinking and replays included.
    - ``budget_exhausted``: the budget ran out before the profile's ``max_examples``
      programs had been generated: the search was shallower than the profile asks.
    - ``checked``: per checker, the opportunities for a violation its programs offered;
      ``undecided``: the checkers that found nothing but cannot be said to have passed,
      with the reason. Use :meth:`validity` for one checker's verdict.
    - ``decisions``: how often each of the contract's decisions was expected of an
      operation sent (``write stale``, ``restore applied``, ...): the cases exercised.
    """

    failures: tuple[StatefulFailure, ...]
    examples: int
    budget_exhausted: bool
    checked: Mapping[str, int]
    undecided: Mapping[str, str]
    restore_supported: bool
    seed: int
    level: str
    saved: Mapping[str, Path] = field(default_factory=dict)
    decisions: Mapping[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> tuple[str, ...]:
        found = {name for f in self.failures for name in f.checkers}
        return tuple(name for name in CHECKER_NAMES if name in found)

    @property
    def program(self) -> str | None:
        """The first failure's program, if any."""
        return self.failures[0].program if self.failures else None

    def validity(self, checker: str) -> Validity:
        """INVALID if it found a violation, UNKNOWN if undecided, else VALID."""
        if checker in self.failed:
            return Validity.INVALID
        if checker in self.undecided:
            return Validity.UNKNOWN
        return Validity.VALID

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``saved`` paths as strings."""
        return {
            "failed": list(self.failed),
            "verdicts": {name: self.validity(name).value for name in CHECKER_NAMES},
            "examples": self.examples,
            "budget_exhausted": self.budget_exhausted,
            "checked": dict(self.checked),
            "undecided": dict(self.undecided),
            "restore_supported": self.restore_supported,
            "decisions": dict(self.decisions),
            "seed": self.seed,
            "level": self.level,
            "failures": [
                {
                    "checkers": list(f.checkers),
                    "explanations": list(f.explanations),
                    "steps": f.steps,
                    "concurrent": f.concurrent,
                    "flaky": f.flaky,
                    "program": f.program,
                    "notes": list(f.notes),
                }
                for f in self.failures
            ],
            "saved": {name: str(path) for name, path in self.saved.items()},
        }


def run_stateful_phase(
    factory: BackendFactory | str | ResolvedBackend,
    *,
    budget_s: float,
    seed: int,
    level: str,
    out: Path,
    max_value_bytes: int = DEFAULT_VALUE_BYTES,
) -> StatefulOutcome:
    """Search for violations with the machine until ``budget_s`` runs out, or until
    every checker has found one.

    Programs are generated in runs of at most :data:`BATCH`, each seeded from ``seed``
    and its position. Each run is sized from how long the programs before it took, so
    a slow backend is not sent a run that cannot finish within what is left; since the
    sizes follow timing, two runs with one seed search largely, not exactly, the same
    programs. When a
    run finds violations, their checkers are judged no more and the search goes on for
    the others. Each shrunk program is written to ``out/stateful/<checker>.py``.
    Shrinking a failure may take what is left of the budget, and at least
    :data:`MIN_SHRINK_S`; the program is then the shortest found by that time, and the
    failure's ``notes`` say so (they are not printed while the phase runs). A
    machine or backend error that is not a violation ends the phase: the checkers not
    yet decided are reported undecided with the error, never as passed, and nothing
    found before is lost. ``max_value_bytes`` bounds the values written, as
    ``--max-value-bytes`` bounds the scenarios'.
    """
    if not budget_s > 0:
        raise InvalidArgument(f"budget_s={budget_s!r} must be a positive number of seconds")
    backend = resolve_backend(factory)
    deadline = time.monotonic() + budget_s
    base = active_settings()
    can_restore = restore_supported(backend.factory)
    judged = CHECKER_NAMES
    failures: list[StatefulFailure] = []
    checked = dict.fromkeys(CHECKER_NAMES, 0)
    idle: dict[str, str] = {}
    crashed: dict[str, str] = {}
    decisions: collections.Counter[str] = collections.Counter()
    examples = generated = batch = 0
    size = FIRST_BATCH
    while judged and size > 0:
        started = time.monotonic()
        scope = f"memcert-phase|{backend.name}|{level}|{','.join(judged)}"
        shrunk: list[str] = []
        try:
            with shrinking_within(max(deadline - started, MIN_SHRINK_S), shrunk):
                run = run_machine(
                    backend, level=level, checkers=judged, restore=can_restore,
                    seed=seed * 7919 + batch, max_value_bytes=max_value_bytes,
                    settings=Settings(scoped(base, scope), max_examples=size,
                                      derandomize=False),
                )
        except Exception as error:
            why = str(error).strip().splitlines()[0] if str(error).strip() else ""
            crashed.update(dict.fromkeys(judged, (
                f"the stateful phase stopped on {type(error).__name__}"
                f"{': ' + why[:200] if why else ''}; its findings before that stand")))
            break
        batch += 1
        generated += size
        examples += run.programs
        decisions.update(run.decisions)
        for checker, count in run.checked.items():
            checked[checker] += count
        for checker, why in run.undecided.items():
            if run.checked[checker]:
                crashed.setdefault(checker, why)
            else:
                idle[checker] = why
        failures += [dataclasses.replace(f, notes=(*f.notes, *shrunk)) for f in run.failures]
        judged = tuple(c for c in judged if c not in run.failed)
        now = time.monotonic()
        per_program = (now - started) / max(run.programs, 1)
        size = min(BATCH, int((deadline - now) / per_program)) if now < deadline else 0
    undecided = {
        c: crashed.get(c) or idle.get(c, "no program ran within the budget")
        for c in judged
        if c in crashed or not checked[c]
    }
    saved = _save(failures, out)
    return StatefulOutcome(
        failures=tuple(failures),
        examples=examples,
        budget_exhausted=bool(judged) and generated < base.max_examples,
        checked=checked,
        undecided=undecided,
        restore_supported=can_restore,
        seed=seed,
        level=level,
        saved=saved,
        decisions=dict(sorted(decisions.items())),
    )


def _save(failures: list[StatefulFailure], out: Path) -> dict[str, Path]:
    """Write one program per failed checker, as ``out/stateful/<checker>.py``: of the
    failures that checker found, the one whose program shows it on every run (it does
    not race and was not flaky), then the shortest. A failure with no steps (a flaky
    one Hypothesis could not replay) has no program to run, and none is written."""
    best: dict[str, StatefulFailure] = {}
    for failure in failures:
        if not failure.steps:
            continue
        for checker in failure.checkers:
            held = best.get(checker)
            if held is None or _rank(failure) < _rank(held):
                best[checker] = failure
    saved: dict[str, Path] = {}
    if not best:
        return saved
    folder = out / "stateful"
    folder.mkdir(parents=True, exist_ok=True)
    for checker in CHECKER_NAMES:
        if checker in best:
            saved[checker] = folder / f"{checker}.py"
            saved[checker].write_text(best[checker].program, encoding="utf-8")
    return saved


def _rank(failure: StatefulFailure) -> tuple[bool, bool, int]:
    return failure.concurrent, failure.flaky, failure.steps
