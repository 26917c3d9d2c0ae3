"""Run the machine under Hypothesis, and turn what it found into runnable programs.

Hypothesis reports a failure by re-running the shortest program it found and attaching
each printed step to the exception as a note (``state = BackendMachine()`` ...
``state.teardown()``). :func:`run_machine` takes those steps, puts in front of them the
lines that build the same machine over the same backend, and so gives back a program
that runs as it stands, from any folder, and raises at the step that shows the
violation. There is one program per checker that found it, and it judges by that
checker alone, so that what it shows and says is about one invariant.

A program echoes as it runs (``machine_for(..., echo=True)``): each step, numbered as
the program's ``# step N`` comments number them, then each operation as the backend
received it, with its history index (the ``op N`` the explanations cite), and the
answer; the failing step prints the explanation before it raises.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import random
import re
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes

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

    ``checkers`` is the one checker that found it at the failing step (a step that
    shows violations of two checkers makes one failure for each); ``explanations`` are
    its violations, rendered; ``program`` is the runnable program, which judges by that
    checker only, and ``steps`` the number of steps in it (the lines between building
    the machine and tearing it down); ``violations``
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
    echo: bool = False,
    max_value_bytes: int = DEFAULT_VALUE_BYTES,
) -> MachineConfig:
    """A validated machine config: each bad argument is named, with the fix."""
    check_max_value_bytes(max_value_bytes, "max_value_bytes")
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
        factory, chosen, judged, restore, concurrency, pool, tally if tally else RunTally(),
        echo, max_value_bytes,
    )


def render_program(
    steps: Sequence[str],
    *,
    backend: str,
    spec: str | None,
    level: str,
    checkers: Sequence[str],
    folder: str | None = None,
    max_value_bytes: int = DEFAULT_VALUE_BYTES,
) -> str:
    """The steps Hypothesis printed, with the lines that build the machine in front.

    ``folder`` goes first on ``sys.path``: the folder the factory's module was imported
    from, so that the program imports it from wherever it is run. Each step is
    numbered in a comment, as the program numbers the steps it prints when run.
    """
    judged = tuple(checkers)
    lines = [
        f"# memcert: the shortest program found that breaks {', '.join(judged)}",
        f"# on {backend}.",
        "# Run it with python, from any folder; as certify does, it empties the store first.",
        "# It prints each step as it runs: the operations sent, as the backend received them,",
        "# and the answers. The step that shows the violation prints the explanation, then raises.",
    ]
    if folder is not None:
        lines += [
            "import sys",
            "",
            f"sys.path.insert(0, {folder!r})  # the folder the factory was imported from",
            "",
        ]
    lines += ["from invariants.stateful import machine_for", ""]
    target = repr(spec)
    if spec is None:
        lines.append("backend_factory = ...  # not importable by name: put the factory here")
        target = "backend_factory"
    lines += [
        "BackendMachine = machine_for(",
        f"    {target},",
        f"    level={level!r},",
        f"    checkers={judged!r},",
        *([f"    max_value_bytes={max_value_bytes!r},"]
          if max_value_bytes != DEFAULT_VALUE_BYTES else []),
        "    echo=True,",
        ")",
        *_numbered(steps),
    ]
    return "\n".join(lines) + "\n"


def _numbered(steps: Sequence[str]) -> Iterator[str]:
    """The lines, each step's first one ending in ``# step N``."""
    number = 0
    for line in steps:
        if _STEP.match(line):
            number += 1
            line = f"{line}  # step {number}"
        yield line


def _factory_folder(backend: ResolvedBackend) -> str | None:
    """The folder on ``sys.path`` that the factory's top-level package was imported
    from; None for a service reached over HTTP, a module with no file, or one installed
    with Python itself (the standard library, site-packages), which any folder imports.

    The module is the spec's when there is one (the factory may be an object made
    elsewhere, as ``chaos.examples`` factories are), else the factory's own.
    """
    spec = backend.spec or ""
    if spec.lower().startswith(("http://", "https://")):
        return None
    module = spec.partition(":")[0] if ":" in spec else getattr(backend.factory, "__module__", "")
    top = sys.modules.get(str(module).partition(".")[0])
    if top is None or top.__name__ == "__main__":
        return None
    if getattr(top, "__path__", None):
        folder = Path(next(iter(top.__path__))).parent
    elif getattr(top, "__file__", None):
        folder = Path(str(top.__file__)).parent
    else:
        return None
    installed = {Path(p).resolve() for key, p in sysconfig.get_paths().items()
                 if key in ("stdlib", "platstdlib", "purelib", "platlib")}
    return None if folder.resolve() in installed else str(folder.resolve())


@contextlib.contextmanager
def shrinking_within(seconds: float, notes: list[str] | None = None) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking one failure to ``seconds``.

    Hypothesis stops shrinking after a fixed five minutes, read from a module constant
    of its engine each time shrinking starts; on a slow backend that alone would
    overrun a certification's budget many times over. The constant is private, so a
    Hypothesis without it leaves shrinking unbounded rather than failing. Hypothesis's
    warning when it gives up still says "five minutes", so it is reworded with the
    limit that really applied; given ``notes``, it is added there instead of printed,
    for the caller to show beside the failures it concerns.
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
            if notes is not None:
                notes.append(value)
                return
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
    max_value_bytes: int = DEFAULT_VALUE_BYTES,
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
    a search that ends then decides nothing. ``max_value_bytes`` bounds the values
    written, for a backend with a documented smaller limit. Shrinking takes what is left, and at
    least a second. Each batch is seeded from ``seed`` (or, without one, from a random
    seed, fixed when the settings derandomize) and its position.
    """
    for argument, value in (("within", within), ("grace", grace)):
        if value is not None and not value >= 0:
            raise InvalidArgument(
                f"{argument}={value!r} must be a number of seconds, 0 or more")
    resolved = resolve_backend(backend)
    target = _Target(resolved.name, resolved.spec, _factory_folder(resolved))
    tally = RunTally()
    pool = HandlePool(resolved.factory)
    try:
        config = make_config(resolved.factory, level=level, checkers=checkers,
                             restore=restore, concurrency=concurrency, pool=pool, tally=tally,
                             max_value_bytes=max_value_bytes)
        if within is None:
            failures = _find(config, target, settings, seed)
        else:
            failures = _find_within(within, grace, config, target, settings, seed)
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


@dataclass(frozen=True)
class _Target:
    """The backend as its programs name it: ``name`` in the header, ``spec`` to import
    it back (None: the program asks for the factory), ``folder`` to put on sys.path."""

    name: str
    spec: str | None
    folder: str | None


def _find_within(
    seconds: float,
    grace: float,
    config: MachineConfig,
    target: _Target,
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
            failures = _find(config, target, Settings(settings, max_examples=size),
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
    config: MachineConfig, target: _Target, settings: Settings, seed: int | None
) -> tuple[StatefulFailure, ...]:
    """Search; a violation found only by racing programs is searched for again without
    races, and the calm program reported instead when one shows it."""
    failures = _search(config, target, settings, seed)
    raced = tuple(dict.fromkeys(name for f in failures if f.concurrent for name in f.checkers))
    if not raced:
        return failures
    calm = _search(dataclasses.replace(config, checkers=raced, concurrency=False),
                   target, scoped(settings, "without races"), seed)
    found = {name for f in calm for name in f.checkers}
    return calm + tuple(f for f in failures if not (f.concurrent and set(f.checkers) <= found))


def _search(
    config: MachineConfig, target: _Target, settings: Settings, seed: int | None
) -> tuple[StatefulFailure, ...]:
    make: Callable[[], BackendMachine] = functools.partial(BackendMachine, config)
    if seed is not None:
        make = use_seed(seed)(make)
    try:
        # Documented to take "anything which returns an instance of
        # RuleBasedStateMachine when called with no arguments"; typed as a class only.
        run_state_machine_as_test(make, settings=settings)  # type: ignore[arg-type]
    except Exception as error:
        return _failures(error, target, config)
    return ()


def _failures(
    error: Exception, target: _Target, config: MachineConfig
) -> tuple[StatefulFailure, ...]:
    found: list[StatefulFailure] = []
    others: list[BaseException] = []
    _collect(error, (), False, found, others, target, config)
    if others or not found:
        raise error
    return tuple(found)


def _collect(
    error: BaseException,
    inherited: tuple[str, ...],
    flaky: bool,
    found: list[StatefulFailure],
    others: list[BaseException],
    target: _Target,
    config: MachineConfig,
) -> None:
    """Walk an exception (groups included) for violations, each with its program notes;
    a violation of several checkers gives one failure per checker."""
    notes = tuple(getattr(error, "__notes__", ()))
    if not any(n.startswith(_FIRST) for n in notes):
        notes = inherited + notes
    if isinstance(error, BaseExceptionGroup):
        flaky = flaky or isinstance(error, FlakyFailure)
        for inner in error.exceptions:
            _collect(inner, notes, flaky, found, others, target, config)
        return
    if not isinstance(error, InvariantViolated):
        others.append(error)
        return
    steps, extra = _split(notes)
    for checker in error.checkers:
        mine = [n for n, (name, _) in enumerate(error.found) if name == checker]
        found.append(StatefulFailure(
            checkers=(checker,),
            explanations=tuple(error.explanations[n] for n in mine),
            program=render_program(steps, backend=target.name, spec=target.spec,
                                   level=config.level, checkers=(checker,),
                                   folder=target.folder,
                                   max_value_bytes=config.max_value_bytes),
            steps=sum(1 for line in steps if _STEP.match(line)),
            concurrent=error.concurrent,
            flaky=flaky,
            notes=extra,
            violations=tuple(error.violations[n] for n in mine),
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
