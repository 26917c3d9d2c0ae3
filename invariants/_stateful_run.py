"""Run the machine under Hypothesis, and turn what it found into runnable programs.

Hypothesis reports a failure by re-running the shortest program it found and attaching
each printed step to the exception as a note (``state = BackendMachine()`` ...
``state.teardown()``). :func:`run_machine` takes those steps, puts in front of them the
two lines that build the same machine over the same backend, and so gives back a
program that runs as it stands and raises at the step that shows the violation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from hypothesis import seed as use_seed
from hypothesis import settings as Settings
from hypothesis.errors import FlakyFailure
from hypothesis.stateful import run_state_machine_as_test

from invariants.backend import BackendFactory
from invariants.checkers import CHECKER_NAMES
from invariants.errors import InvalidArgument
from invariants.factory import ResolvedBackend, resolve_backend
from invariants.levels import CLAIMABLE_LEVELS
from invariants.verdict import Violation

from ._stateful_machine import (
    BackendMachine,
    HandlePool,
    InvariantViolated,
    MachineConfig,
    RunTally,
)
from ._stateful_settings import scoped

__all__ = [
    "MachineRun",
    "StatefulFailure",
    "make_config",
    "render_program",
    "run_machine",
]

_FIRST = "state = "
_LAST = "state.teardown()"
_STEP = re.compile(r"(\w+(, \w+)* = )*state\.(?!teardown\(\))\w+\(")
"""The first line of a step: a rule called, its results maybe assigned."""
_RESTORE = re.compile(r"state\.restore\(")


@dataclass(frozen=True)
class StatefulFailure:
    """One violation the machine found, shrunk.

    ``checkers`` found it at the failing step; ``explanations`` are their violations,
    rendered; ``program`` is the runnable program and ``steps`` the number of steps in
    it (the lines between building the machine and tearing it down); ``violations``
    are the violations as data, in the order of ``explanations``. ``concurrent``
    says that operations of the program race, so a run may interleave them otherwise
    and show the violation differently, or not at all; ``flaky``, that the last replay
    did not show it again. ``notes`` are whatever else Hypothesis said (the
    ``@reproduce_failure`` blob, under the ci profile).
    """

    checkers: tuple[str, ...]
    explanations: tuple[str, ...]
    program: str
    steps: int
    concurrent: bool = False
    flaky: bool = False
    notes: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = ()

    @property
    def restores(self) -> int:
        """The restore steps of the program."""
        return sum(1 for line in self.program.splitlines() if _RESTORE.match(line))


@dataclass(frozen=True)
class MachineRun:
    """What one Hypothesis run of the machine concluded.

    ``undecided`` maps each judged checker that found nothing but could not have (it
    never had anything to check, or it crashed) to the reason; such a checker has not
    passed. ``programs`` counts the programs run, shrinking included; ``decisions``,
    the contract's decisions the oracle expected of the operations sent.
    """

    failures: tuple[StatefulFailure, ...]
    programs: int
    checked: Mapping[str, int]
    undecided: Mapping[str, str] = field(default_factory=dict)
    restore_supported: bool = True
    decisions: Mapping[str, int] = field(default_factory=dict)

    @property
    def failed(self) -> tuple[str, ...]:
        """Checkers that found a violation, in the checkers' order."""
        found = {name for f in self.failures for name in f.checkers}
        return tuple(name for name in CHECKER_NAMES if name in found)


def make_config(
    factory: BackendFactory,
    *,
    level: str,
    checkers: Sequence[str],
    restore: bool = True,
    concurrency: bool = True,
    pool: HandlePool | None = None,
    tally: RunTally | None = None,
) -> MachineConfig:
    """A validated machine config: each bad argument is named, with the fix."""
    if level not in CLAIMABLE_LEVELS:
        raise InvalidArgument(
            f"level={level!r} is not a normalization level; use one of "
            f"{', '.join(CLAIMABLE_LEVELS)}"
        )
    judged = tuple(checkers)
    unknown = [name for name in judged if name not in CHECKER_NAMES]
    if unknown or not judged:
        raise InvalidArgument(
            f"checkers={judged!r} must name one or more of {', '.join(CHECKER_NAMES)}"
        )
    chosen = CLAIMABLE_LEVELS[CLAIMABLE_LEVELS.index(level)]
    return MachineConfig(
        factory, chosen, judged, restore, concurrency, pool, tally if tally else RunTally()
    )


def render_program(
    steps: Sequence[str], *, backend: str, spec: str | None, level: str, checkers: Sequence[str]
) -> str:
    """The steps Hypothesis printed, with the lines that build the machine in front."""
    judged = tuple(checkers)
    lines = [
        f"# memcert: the shortest program found that breaks {', '.join(judged)}",
        f"# on {backend}.",
        "# Run it with python: the step that shows the violation raises the error.",
        "from invariants.stateful import machine_for",
        "",
    ]
    target = repr(spec)
    if spec is None:
        lines.append("backend_factory = ...  # not importable by name: put the factory here")
        target = "backend_factory"
    lines += [
        "BackendMachine = machine_for(",
        f"    {target}, level={level!r}, checkers={judged!r}",
        ")",
        *steps,
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def shrinking_within(seconds: float) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking one failure to ``seconds``.

    Hypothesis stops shrinking after a fixed five minutes, read from a module constant
    of its engine each time shrinking starts; on a slow backend that alone would
    overrun a certification's budget many times over. The constant is private, so a
    Hypothesis without it leaves shrinking unbounded rather than failing. Hypothesis's
    warning when it gives up still says "five minutes", so it is reworded with the
    limit that really applied.
    """
    from hypothesis.internal.conjecture import engine
    from hypothesis.reporting import current_reporter, with_reporter

    if not hasattr(engine, "MAX_SHRINKING_SECONDS"):
        yield
        return
    limit = max(1, math.ceil(seconds))
    outer = current_reporter()

    def report(value: object) -> None:
        if isinstance(value, str) and value.startswith(_SLOW_SHRINK):
            value = (
                f"memcert: stopped shrinking this failure after the {limit} s the stateful "
                "phase could give it; the program shown is the shortest found by then, and "
                "a re-run with the same example database goes on shrinking from it."
            )
        outer(value)

    saved = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = limit
    try:
        with with_reporter(report):
            yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


_SLOW_SHRINK = "WARNING: Hypothesis has spent more than five minutes working to shrink"

FIRST_BATCH = 2
"""Programs in the first batch of a time-bounded run, which measures how long a program
takes on the backend; it runs whatever the time left, so that something is checked."""
BATCH = 10
"""The most programs per batch of a time-bounded run; the time is checked between them."""


def run_machine(
    backend: BackendFactory | str | ResolvedBackend,
    *,
    level: str,
    checkers: Sequence[str],
    settings: Settings,
    restore: bool = True,
    concurrency: bool = True,
    seed: int | None = None,
    within: float | None = None,
    grace: float = 0.0,
) -> MachineRun:
    """Run Hypothesis over the machine on ``backend`` and collect what it found.

    ``checkers`` are the ones judged (a program fails when one of them finds a
    violation); all of them run. Handles are opened once for the whole run and closed
    at its end. An error that is not a violation (the machine, or the backend breaking
    the contract's types) is raised as it is.

    A violation found by a program whose operations raced is searched for again
    without races: if the bug shows without them, the program reported is the one
    that does not race, which shrinks further and shows the violation on every run.

    ``within`` bounds the run to that many seconds: the settings' ``max_examples``
    programs are then run in batches (the first of :data:`FIRST_BATCH`, the others
    sized from how long the programs before them took, one at least while time is
    left), until they have all run, a violation is found, or the time is up; while a
    judged checker has had nothing to check, ``grace`` seconds more may follow, since
    a search that ends then decides nothing. Shrinking takes what is left, and at
    least a second. Each batch is seeded from ``seed`` (or, without one, from a random
    seed, fixed when the settings derandomize) and its position.
    """
    for argument, value in (("within", within), ("grace", grace)):
        if value is not None and not value >= 0:
            raise InvalidArgument(
                f"{argument}={value!r} must be a number of seconds, 0 or more")
    resolved = resolve_backend(backend)
    factory, name, spec = resolved.factory, resolved.name, resolved.spec
    tally = RunTally()
    pool = HandlePool(factory)
    try:
        config = make_config(factory, level=level, checkers=checkers, restore=restore,
                             concurrency=concurrency, pool=pool, tally=tally)
        if within is None:
            failures = _find(config, name, spec, settings, seed)
        else:
            failures = _find_within(within, grace, config, name, spec, settings, seed)
    finally:
        pool.close()
    return MachineRun(
        failures=failures,
        programs=tally.programs,
        checked=dict(tally.checked),
        undecided={} if failures else tally.undecided(config.checkers),
        restore_supported=tally.restore_supported,
        decisions=dict(sorted(tally.decisions.items())),
    )


def _find_within(
    seconds: float,
    grace: float,
    config: MachineConfig,
    name: str,
    spec: str | None,
    settings: Settings,
    seed: int | None,
) -> tuple[StatefulFailure, ...]:
    """:func:`_find` in batches, until ``seconds`` are up; see :func:`run_machine`."""
    deadline = time.monotonic() + seconds

    def end() -> float:
        """The deadline, put off by ``grace`` while a judged checker is idle."""
        idle = any(not config.tally.checked[checker] for checker in config.checkers)
        return deadline + grace if idle else deadline

    if seed is None:
        seed = 0 if settings.derandomize else random.getrandbits(32)
    left = settings.max_examples
    size = min(FIRST_BATCH, left)
    batch = 0
    while size > 0:
        started = time.monotonic()
        programs = config.tally.programs
        with shrinking_within(max(end() - started, 1.0)):
            failures = _find(config, name, spec, Settings(settings, max_examples=size),
                             seed * 7919 + batch)
        if failures:
            return failures
        batch += 1
        left -= size
        now, until = time.monotonic(), end()
        per_program = (now - started) / max(config.tally.programs - programs, 1)
        fits = int((until - now) / per_program)
        size = min(BATCH, left, max(1, fits)) if now < until else 0
    return ()


def _find(
    config: MachineConfig, name: str, spec: str | None, settings: Settings, seed: int | None
) -> tuple[StatefulFailure, ...]:
    """Search; a violation found only by racing programs is searched for again without
    races, and the calm program reported instead when one shows it."""
    failures = _search(config, name, spec, settings, seed)
    raced = tuple(name for f in failures if f.concurrent for name in f.checkers)
    if not raced:
        return failures
    calm = _search(dataclasses.replace(config, checkers=raced, concurrency=False),
                   name, spec, scoped(settings, "without races"), seed)
    found = {name for f in calm for name in f.checkers}
    return calm + tuple(f for f in failures if not (f.concurrent and set(f.checkers) <= found))


def _search(
    config: MachineConfig, name: str, spec: str | None, settings: Settings, seed: int | None
) -> tuple[StatefulFailure, ...]:
    make: Callable[[], BackendMachine] = functools.partial(BackendMachine, config)
    if seed is not None:
        make = use_seed(seed)(make)
    try:
        # Documented to take "anything which returns an instance of
        # RuleBasedStateMachine when called with no arguments"; typed as a class only.
        run_state_machine_as_test(make, settings=settings)  # type: ignore[arg-type]
    except Exception as error:
        return _failures(error, name, spec, config)
    return ()


def _failures(
    error: Exception, backend: str, spec: str | None, config: MachineConfig
) -> tuple[StatefulFailure, ...]:
    found: list[StatefulFailure] = []
    others: list[BaseException] = []
    _collect(error, (), False, found, others, backend, spec, config)
    if others or not found:
        raise error
    return tuple(found)


def _collect(
    error: BaseException,
    inherited: tuple[str, ...],
    flaky: bool,
    found: list[StatefulFailure],
    others: list[BaseException],
    backend: str,
    spec: str | None,
    config: MachineConfig,
) -> None:
    """Walk an exception (groups included) for violations, each with its program notes."""
    notes = tuple(getattr(error, "__notes__", ()))
    if not any(n.startswith(_FIRST) for n in notes):
        notes = inherited + notes
    if isinstance(error, BaseExceptionGroup):
        flaky = flaky or isinstance(error, FlakyFailure)
        for inner in error.exceptions:
            _collect(inner, notes, flaky, found, others, backend, spec, config)
        return
    if not isinstance(error, InvariantViolated):
        others.append(error)
        return
    steps, extra = _split(notes)
    found.append(StatefulFailure(
        checkers=error.checkers,
        explanations=error.explanations,
        program=render_program(steps, backend=backend, spec=spec, level=config.level,
                               checkers=config.checkers),
        steps=sum(1 for line in steps if _STEP.match(line)),
        concurrent=error.concurrent,
        flaky=flaky,
        notes=extra,
        violations=error.violations,
    ))


def _split(notes: tuple[str, ...]) -> tuple[list[str], tuple[str, ...]]:
    """The program's lines (one note may hold several), and the other notes."""
    steps: list[str] = []
    extra: list[str] = []
    inside = False
    for note in notes:
        if note.startswith(_FIRST):
            inside = True
            steps = []
        if inside:
            steps.extend(note.split("\n"))
            if note == _LAST:
                inside = False
        elif note.strip() and not note.startswith("Failing test case:"):
            extra.append(note.strip())
    return steps, tuple(extra)
