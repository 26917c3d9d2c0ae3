"""``memcert chaos``: keep a backend under chaos, round after round, until told to stop.

``certify`` answers a question within a budget. ``chaos`` is what a platform team leaves
running while it watches the dashboards: it runs the chosen scenarios in rounds, each
round with a fresh seed derived from ``--seed``, until ``--duration`` runs out or the
process gets SIGINT or SIGTERM. Then it judges the saved history exactly as certify
does, and writes the same ``results.json`` and ``junit.xml``. The history is
``history.jsonl.zst`` (as certify's ``--compress`` writes), since a run of hours makes
millions of operations; ``compress=False`` keeps it plain.

How rounds stay sound on one store that is never reset between them:

- Round 0 runs the plans ``memcert certify --seed SEED`` would; round k >= 1 appends
  ``-rk`` to every namespace its plans touch. A scenario's fact ids and texts repeat
  from seed to seed, and the checkers trace a record to its write by namespace, entity
  and text, so each round needs keys of its own.
- Each scenario run draws causal seqs from a fresh Lamport clock, as in certify; with
  keys of its own, a round never competes with an earlier round's seqs.
- A round's time is the suite's ``budget_s`` (or what is left of ``--duration``), and
  each scenario gets its suite share of what is left of the round when it starts.

How a stop stays graceful: a stop is noticed by each worker thread after the step it
is on has completed, so every operation invoked is recorded with its completion; the
faults heal, every entity the interrupted plan touched is read once more, and the
verdict is computed and written as after a normal end. Worker processes
(``processes`` > 0) cannot be told mid-plan: a stop then waits for the scenario that is
running, at most its share of the round. A terminal's Ctrl-C reaches them as well; the
interrupt they send back is taken as the same stop, since their threads finish and are
recorded before the pool shuts down. (A supervisor that sends SIGTERM to every process
of the group, as systemd's default ``KillMode=control-group`` does, kills them mid-step:
send it to memcert's own process only.)

Besides certify's files, ``--out`` gets ``rounds.jsonl``: one line per scenario run
with its round, seed and the range of history indices it wrote, so a violation's
witnesses lead to the seed that produced them.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import shlex
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from invariants.backend import BackendFactory
from invariants.errors import InvalidArgument
from invariants.factory import REFERENCE, ResolvedBackend, resolve_backend
from invariants.history import Entry, Paraphrase
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes
from scenarios import SuiteEntry, load_scenario, load_suite
from scenarios.plan import Plan

from .certify import CertifyOptions, Progress, Recording, prepare
from .execute import Runnability, run_plan
from .faults import LamportClock
from .report import Report, ScenarioSummary
from .runner import RunResult
from .signals import on_first_signal

if TYPE_CHECKING:
    from .metrics import MetricsOptions

__all__ = ["ChaosOptions", "round_seed", "run_chaos", "stop_on_signals"]

ROUND_S = 60.0
"""A round's time when scenarios are named one by one: certify's default budget."""
LAST_ROUND_MIN_S = 1.0
"""A round after the first starts only with this much of ``--duration`` left."""
FIRST_ROUND_MIN_S = 0.25
"""Each scenario's least time in the first round, even past ``--duration``. In the first
round a scenario is also given at least its share of the round as planned when the round
began: on a slow or busy machine the scenarios before it may overrun their shares (their
final reads come after their budget), and a short run must still exercise every scenario
as a certify of the same budget would."""


@dataclass(frozen=True)
class ChaosOptions:
    """What a chaos run does. ``duration_s`` None runs until stopped; ``scenarios``,
    when given, replace the suite (each gets an equal share of a round)."""

    duration_s: float | None = None
    suite: str = "certify"
    scenarios: tuple[str, ...] = ()
    seed: int | None = None
    level: Paraphrase = "lexical"
    workers: int = 8
    processes: int | None = None
    """As :attr:`chaos.certify.CertifyOptions.processes`."""
    out: Path = Path("memcert-chaos")
    compress: bool = True
    """Record ``history.jsonl.zst`` (the default) rather than ``history.jsonl``."""
    max_value_bytes: int = DEFAULT_VALUE_BYTES
    """The longest value the plans write, in bytes of UTF-8 (at most the contract's 64 KiB)."""

    def __post_init__(self) -> None:
        check_max_value_bytes(self.max_value_bytes, "max_value_bytes")
        if self.duration_s is not None and not (
                isinstance(self.duration_s, int | float) and math.isfinite(self.duration_s)
                and self.duration_s > 0):
            raise InvalidArgument(f"duration_s={self.duration_s!r} must be a positive number "
                                  "of seconds, or None to run until stopped.")
        if isinstance(self.scenarios, str):
            raise InvalidArgument(f"scenarios={self.scenarios!r} is a string; pass a tuple of "
                                  f"names, e.g. ({self.scenarios!r},).")
        if len(set(self.scenarios)) != len(self.scenarios):
            raise InvalidArgument(f"scenarios={self.scenarios!r} names a scenario twice; "
                                  "name each once.")
        # certify's own options check the settings the two commands share, so both
        # reject a bad value in the same words.
        CertifyOptions(seed=self.seed, level=self.level, workers=self.workers, out=self.out,
                       suite=self.suite, processes=self.processes, stateful_share=0.0,
                       compress=self.compress)


def round_seed(seed: int, number: int) -> int:
    """Round ``number``'s seed: round 0 uses ``seed`` itself, so it runs the plans
    ``memcert certify --seed SEED`` would; later rounds hash the pair."""
    if number == 0:
        return seed
    return random.Random(f"memcert chaos {seed} {number}").randrange(2**31)


def run_chaos(factory: BackendFactory | str | ResolvedBackend | None = None,
              options: ChaosOptions | None = None, *, progress: Progress | None = None,
              metrics: MetricsOptions | None = None,
              stop: threading.Event | None = None) -> Report:
    """Run chaos rounds against ``factory`` (as for certify) until ``options.duration_s``
    has passed or ``stop`` is set, then judge the saved history.

    ``stop`` may be set from any thread or a signal handler (:func:`stop_on_signals`).
    """
    options = options or ChaosOptions()
    progress = progress or Progress()
    stop = stop or threading.Event()
    backend = resolve_backend(factory)
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    started = time.monotonic()
    entries, round_s, suite_label = _entries(options)
    can_restore = prepare(backend)

    run = _Rounds(backend, options, seed, progress, stop)
    with Recording(options.out, backend=backend.name, suite=suite_label, level=options.level,
                   seed=seed, metrics=metrics, observers=[run.observe],
                   compress=options.compress) as recording, \
            open(options.out / "rounds.jsonl", "w", encoding="utf-8") as rounds:
        progress.start(sys.maxsize, options.duration_s or math.inf)
        chaos_s = run.until_done(entries, round_s, recording, rounds)
        progress.finish()
        return recording.judge(
            seed=seed, scenarios=run.summaries(),
            restore_supported=can_restore and run.restore_supported, started=started,
            command=_command(backend.name, seed, options,
                             None if run.stopped else options.duration_s, chaos_s))


def stop_on_signals(stop: threading.Event,
                    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
                    ) -> AbstractContextManager[None]:
    """Turn the first of ``signals`` into ``stop.set()``, with a word on stderr; the
    handlers found are back from then on, so a second Ctrl-C abandons the check.

    Only the main thread may install signal handlers; they are restored on exit.
    """
    return on_first_signal(stop.set, "stopping after the operations in flight, then "
                           "checking what was recorded; send it again to abandon the check",
                           signals)


@dataclass
class _Tally:
    """One scenario's runs added up, for results.json's per-scenario summary."""

    planned: int = 0
    done: int = 0
    elapsed_s: float = 0.0
    budget_s: float = 0.0
    exhausted: bool = False
    fired: dict[str, int] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    not_run: str = ""
    nemesis: list[Mapping[str, Any]] = field(default_factory=list)


class _Rounds:
    """The rounds of one chaos run, and what they did."""

    def __init__(self, backend: ResolvedBackend, options: ChaosOptions, seed: int,
                 progress: Progress, stop: threading.Event) -> None:
        self.factory = backend.factory
        self.spec = backend.name
        self.options = options
        self.seed = seed
        self.progress = progress
        self.stop = stop
        self.restore_supported = True
        self.stopped = False
        self._tallies: dict[str, _Tally] = {}
        self._first_worker = 0
        self._plan_workers = range(0)
        self._steps_done = 0
        self.runnability = Runnability(backend.factory, factory_spec=backend.name,
                                       process_phase=options.processes != 0)

    def until_done(self, entries: Sequence[SuiteEntry], round_s: float,
                   recording: Recording, rounds: IO[str]) -> float:
        """Run rounds until the duration is over or a stop is asked; returns the seconds
        spent."""
        runs = [not self.runnability.reason(entry.scenario) for entry in entries]
        runnable_shares = math.fsum(e.share for e, ok in zip(entries, runs, strict=True)
                                    if ok) or 1.0
        started = time.monotonic()
        duration = self.options.duration_s
        deadline = math.inf if duration is None else started + duration
        for number in itertools.count():
            left = deadline - time.monotonic()
            if self.stop.is_set() or left <= 0 or (number > 0 and left < LAST_ROUND_MIN_S):
                break
            this_round = min(round_s, left)
            round_end = time.monotonic() + this_round
            seed = round_seed(self.seed, number)
            for position, entry in enumerate(entries):
                if self.stop.is_set():
                    break
                plan = _in_round(entry.scenario.plan(
                    seed=seed, workers=self.options.workers, level=self.options.level,
                    scale=entry.scale, max_value_bytes=self.options.max_value_bytes), number)
                # Each scenario gets its share of what is left of the round, so time
                # spent building plans and reading back does not starve the last ones;
                # the scenarios that cannot run here take no share.
                if runs[position]:
                    shares_left = math.fsum(e.share for e, ok in zip(
                        entries[position:], runs[position:], strict=True) if ok)
                    budget = (round_end - time.monotonic()) * entry.share / shares_left
                    if number == 0:
                        budget = max(budget, FIRST_ROUND_MIN_S,
                                     this_round * entry.share / runnable_shares)
                    elif budget <= 0:
                        break
                else:
                    budget = 0.0
                line = self._run(plan, number, budget, recording)
                rounds.write(json.dumps(line) + "\n")
                rounds.flush()
        self.stopped = self.stop.is_set()
        return time.monotonic() - started

    def _run(self, plan: Plan, number: int, budget_s: float,
             recording: Recording) -> dict[str, Any]:
        self.progress.scenario(f"{plan.scenario} (round {number})")
        recording.begin_scenario(plan.scenario)
        recorder = recording.recorder
        first_entry = len(recorder)
        self._plan_workers = range(self._first_worker, self._first_worker + len(plan.workers))
        self._steps_done = 0

        def on_step() -> None:
            self.progress.step(recording.violation_count)

        started = time.monotonic()
        try:
            result = run_plan(self.factory, plan, recorder, clock=LamportClock(),
                              first_worker=self._first_worker, budget_s=budget_s,
                              processes=self.options.processes or 0, factory_spec=self.spec,
                              on_step=on_step, stop=self.stop,
                              process_phase=self.options.processes != 0,
                              runnability=self.runnability)
            stopped = result.stopped
        except KeyboardInterrupt:
            # A terminal's Ctrl-C reaches worker processes too, and their interrupt comes
            # back here; their threads still finish, and are recorded, before the pool
            # shuts down. Any other KeyboardInterrupt is a second Ctrl-C: abandon.
            if not (self.options.processes and self.stop.is_set()):
                raise
            stopped = True
            # A zero budget runs no step: it only reads back every entity the plan
            # touched, the final reads the interrupted call never reached.
            run_plan(self.factory, plan, recorder, first_worker=self._first_worker,
                     budget_s=0.0)
            result = RunResult(plan.scenario, plan.size, steps_done=self._steps_done)
        elapsed = time.monotonic() - started
        self._first_worker += len(plan.workers) + 1
        self.restore_supported &= result.restore_supported
        tally = self._tallies.setdefault(plan.scenario, _Tally(requires=plan.requires))
        tally.planned += plan.size
        tally.done += result.steps_done
        tally.elapsed_s += elapsed
        tally.budget_s += budget_s
        tally.exhausted |= result.budget_exhausted
        tally.not_run = result.not_run
        tally.nemesis.extend(result.nemesis)
        for name, count in result.faults_fired.items():
            tally.fired[name] = tally.fired.get(name, 0) + count
        return {"round": number, "seed": plan.seed, "scenario": plan.scenario,
                "namespace_suffix": _suffix(number), "first_entry": first_entry,
                "end_entry": len(recorder), "steps_planned": plan.size,
                "steps_done": result.steps_done, "elapsed_s": round(elapsed, 3),
                "budget_exhausted": result.budget_exhausted, "stopped": stopped,
                "faults_fired": result.faults_fired}

    def observe(self, entry: Entry) -> None:
        """A recorder observer counting the running plan's completed steps, which the
        runner's own count is lost with when a Ctrl-C interrupts worker processes."""
        if entry.type != "invoke" and entry.worker in self._plan_workers:
            self._steps_done += 1

    def summaries(self) -> list[ScenarioSummary]:
        return [ScenarioSummary(name, t.planned, t.done, t.elapsed_s, t.exhausted, t.fired,
                                t.requires, not_run=t.not_run, nemesis=tuple(t.nemesis),
                                budget_s=t.budget_s)
                for name, t in self._tallies.items()]


def _entries(options: ChaosOptions) -> tuple[tuple[SuiteEntry, ...], float, str]:
    """The scenarios of a round with their shares, a round's time, and the ``suite``
    label of the metrics and the push."""
    if not options.scenarios:
        suite = load_suite(options.suite)
        return suite.entries, suite.budget_s, options.suite
    share = 1.0 / len(options.scenarios)
    entries = tuple(SuiteEntry(load_scenario(name), share=share, scale=1.0)
                    for name in options.scenarios)
    return entries, ROUND_S, "+".join(entry.scenario.name for entry in entries)


def _suffix(number: int) -> str:
    return "" if number == 0 else f"-r{number}"


def _in_round(plan: Plan, number: int) -> Plan:
    """The plan with round ``number``'s own namespaces."""
    suffix = _suffix(number)
    if not suffix:
        return plan
    return replace(plan, workers=tuple(
        tuple(replace(step, namespace=step.namespace + suffix) for step in steps)
        for steps in plan.workers))


def _command(spec: str, seed: int, options: ChaosOptions, duration_s: float | None,
             chaos_s: float) -> str:
    """The command that reruns the same rounds' plans: the seed, and the duration given,
    or for a run that was stopped, the time it ran."""
    parts = ["memcert", "chaos"]
    if spec != REFERENCE:
        parts.append(spec)
    duration = f"{duration_s:g}" if duration_s is not None else str(math.ceil(chaos_s))
    parts += ["--seed", str(seed), "--duration", duration,
              "--level", options.level, "--workers", str(options.workers)]
    if options.processes is not None:
        parts += ["--processes", str(options.processes)]
    if options.scenarios:
        parts += ["--scenario", *options.scenarios]
    elif options.suite != ChaosOptions.suite:
        parts += ["--suite", options.suite]
    return shlex.join(parts)

