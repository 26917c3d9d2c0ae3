"""``memcert certify``: drive a backend through the scenarios, then judge the saved history.

The flow is one way: scenarios make plans, the runner executes them (counting
violations online, for live progress and metrics), the history streams to
``history.jsonl`` (``history.jsonl.zst`` with ``--compress``), and the verdict comes
from reading that file back and checking it with the same checker code. A verdict
therefore never depends on anything the run kept in memory, and ``memcert replay``
reaches the same one later.

A share of the budget then goes to the stateful phase (:mod:`invariants.stateful`):
Hypothesis searches for short programs that break an invariant, with the same
checkers, and shrinks each one it finds. Its findings join the verdict and name the
phase that found them; replay carries them over, since they cannot be re-checked
without the backend.
"""

from __future__ import annotations

import random
import shlex
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invariants.backend import BackendFactory
from invariants.capabilities import restore_supported
from invariants.checkers import CheckerSuite
from invariants.errors import InvalidArgument
from invariants.factory import REFERENCE, ResolvedBackend, probe, resolve_backend
from invariants.history import Entry, HistoryRecorder, Paraphrase, find_history
from invariants.levels import CLAIMABLE_LEVELS
from invariants.verdict import Violation
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes
from scenarios import load_suite
from scenarios.plan import Plan

from .execute import Runnability, run_plan
from .faults import LamportClock
from .judging import judge_file
from .report import INVARIANTS, Report, ScenarioSummary, build_report
from .runner import RunResult

if TYPE_CHECKING:
    from .metrics import Exporter, MetricsOptions

__all__ = ["CertifyOptions", "Progress", "Recording", "certify", "check_skip", "prepare",
           "replay"]

CHECK_RESERVE = 0.15
"""Share of the budget kept for the final reads and for checking the saved history."""
STATEFUL_SHARE_MAX = round(1 - CHECK_RESERVE - 0.05, 9)
"""The largest stateful share: the chaos scenarios keep at least a twentieth of the
budget (rounded, so that the bound is the number a user types)."""
FLUSH_INTERVAL_S = 0.1
"""``history.jsonl`` is written in groups at most this far apart; a crash of memcert
itself loses at most that much of the history, a normal end or an error nothing."""
STATEFUL_SHARE = 0.2
"""Default share of the budget for the stateful phase, after the chaos scenarios."""
_PLAIN = "history.jsonl"
_COMPRESSED = "history.jsonl.zst"


@dataclass(frozen=True)
class CertifyOptions:
    """Everything that decides a certification; the seed decides the operation plan."""

    budget_s: float = 60.0
    seed: int | None = None
    level: Paraphrase = "lexical"
    workers: int = 8
    out: Path = Path("memcert-out")
    suite: str = "certify"
    processes: int | None = None
    """None: workers are threads, and the process phase runs where the store is shared
    across processes; 0: threads only, no process phase; P: every scenario's workers
    spread over P worker processes."""
    stateful_share: float = STATEFUL_SHARE
    skip: tuple[str, ...] = ()
    """Invariants (results.json names) to check and show but leave out of the verdict."""
    fail_fast: bool = False
    """Stop at the first violation the online checkers count (see :func:`certify`)."""
    compress: bool = False
    """Record ``history.jsonl.zst`` rather than ``history.jsonl``: the same lines, in
    zstd frames, a fraction of the size on disk; every reader takes either."""
    max_value_bytes: int = DEFAULT_VALUE_BYTES
    """The longest value the plans write, in bytes of UTF-8 (at most the contract's 64 KiB)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "skip", check_skip(self.skip))
        check_max_value_bytes(self.max_value_bytes, "max_value_bytes")
        if not self.budget_s > 0:
            raise InvalidArgument(f"budget_s={self.budget_s!r} must be a positive number of "
                                  "seconds; the default is 60.")
        if self.level not in CLAIMABLE_LEVELS:
            raise InvalidArgument(f"level={self.level!r} is not a normalization level; use "
                                  f"one of {', '.join(CLAIMABLE_LEVELS)}.")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise InvalidArgument(f"workers={self.workers!r} must be an int >= 1.")
        if self.processes is not None and (
                isinstance(self.processes, bool) or not isinstance(self.processes, int)
                or self.processes < 0):
            raise InvalidArgument(f"processes={self.processes!r} must be None (threads, and "
                                  "the process phase where the store is shared), 0 (threads "
                                  "only) or an int > 0 (every worker in that many processes).")
        if not isinstance(self.fail_fast, bool):
            raise InvalidArgument(f"fail_fast={self.fail_fast!r} must be True or False.")
        if not isinstance(self.compress, bool):
            raise InvalidArgument(f"compress={self.compress!r} must be True or False.")
        if not 0 <= self.stateful_share <= STATEFUL_SHARE_MAX:
            raise InvalidArgument(
                f"stateful_share={self.stateful_share!r} must be between 0 (no stateful "
                f"phase) and {1 - CHECK_RESERVE - 0.05:.2f}, so the chaos scenarios keep "
                f"some budget; the default is {STATEFUL_SHARE}.")


def check_skip(skip: object) -> tuple[str, ...]:
    """``skip`` as a tuple in results.json order; a name that is no invariant, or a skip
    that leaves nothing to certify, is refused before anything runs."""
    if isinstance(skip, str) or not isinstance(skip, Iterable):
        raise InvalidArgument(f"skip={skip!r} must be a list of invariant names, e.g. "
                              "['semantic_normalization'].")
    names = list(skip)
    unknown = [name for name in names if name not in INVARIANTS]
    if unknown:
        raise InvalidArgument(f"skip names {unknown[0]!r}, which is not an invariant; use "
                              f"some of {', '.join(INVARIANTS)}.")
    if set(names) == set(INVARIANTS):
        raise InvalidArgument("skip names every invariant, which leaves nothing to certify; "
                              "skip at most five.")
    return tuple(name for name in INVARIANTS if name in names)


class Progress:
    """What a progress display is told; the default tells no one."""

    def start(self, total_steps: int, budget_s: float) -> None:
        """The run is about to begin."""

    def scenario(self, name: str) -> None:
        """A scenario begins."""

    def step(self, violations: int) -> None:
        """One step finished; ``violations`` is the online count so far."""

    def not_run(self, name: str, steps: int) -> None:
        """Scenario ``name`` could not run (its reason is in the report): the ``steps``
        it planned leave the total, so that a bar still ends at 100 %."""

    def finish(self) -> None:
        """The run is over; checking begins."""


def certify(factory: BackendFactory | str | ResolvedBackend | None = None,
            options: CertifyOptions | None = None, *, progress: Progress | None = None,
            metrics: MetricsOptions | None = None,
            on_violation: Callable[[Violation], None] | None = None) -> Report:
    """Certify a backend: ``factory`` is a callable, a ``package.module:callable`` spec, a
    backend :func:`~invariants.factory.resolve_backend` resolved already, or None for the
    reference store on an embedded SQLite file.

    ``metrics`` serves the run's live metrics while it records, and pushes them once the
    verdict is in; they observe the run and never feed back into it. ``on_violation`` is
    told every violation the check of the saved history finds, kept or not.

    With ``fail_fast``, the first violation the online checkers count (they lag the run
    by a flush interval) ends the run: every worker stops after its step, the entities
    the scenario touched are read back, the scenarios left and the stateful phase do not
    run, and the saved history is judged as usual, by the same checkers, so it fails.
    The scenarios cut short keep their requirements, so an invariant whose conditions
    never came stays unknown instead of passing on what little ran.
    """
    options = options or CertifyOptions()
    progress = progress or Progress()
    backend = resolve_backend(factory)
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    started = time.monotonic()
    can_restore = prepare(backend)

    suite = load_suite(options.suite)
    plans = [(entry, entry.scenario.plan(seed=seed, workers=options.workers,
                                         level=options.level, scale=entry.scale,
                                         max_value_bytes=options.max_value_bytes))
             for entry in suite.entries]
    run_budget = options.budget_s * (1 - CHECK_RESERVE - options.stateful_share)
    runnability = Runnability(backend.factory, factory_spec=backend.name,
                              process_phase=options.processes != 0)
    # A scenario that cannot run here gives its share to those that can.
    runs = [not runnability.reason(entry.scenario) for entry, _ in plans]
    total_share = sum(entry.share for (entry, _), ok in zip(plans, runs, strict=True)
                      if ok) or 1.0
    phases = dict.fromkeys(("setup", "scenarios", "final_reads"), 0.0)
    phases["setup"] = time.monotonic() - started

    summaries: list[ScenarioSummary] = []
    stopped = ""
    with Recording(options.out, backend=backend.name, suite=options.suite,
                   level=options.level, seed=seed, metrics=metrics,
                   compress=options.compress) as recording:
        progress.start(sum(plan.size for _, plan in plans), options.budget_s)
        first_worker = 0
        for position, (entry, plan) in enumerate(plans):
            if stopped:
                summaries.append(ScenarioSummary(plan.scenario, plan.size, 0, 0.0, False,
                                                 requires=tuple(plan.requires), stopped=True))
                continue
            progress.scenario(plan.scenario)
            recording.begin_scenario(plan.scenario)
            budget = run_budget * entry.share / total_share if runs[position] else 0.0
            result = _run_scenario(backend, plan, recording, progress, options, first_worker,
                                   budget, runnability)
            first_worker += len(plan.workers) + 1
            phases["scenarios"] += result.elapsed_s - result.final_reads_s
            phases["final_reads"] += result.final_reads_s
            if result.not_run:
                progress.not_run(plan.scenario, plan.size)
            can_restore &= result.restore_supported
            summaries.append(ScenarioSummary(
                plan.scenario, result.steps_planned, result.steps_done, result.elapsed_s,
                result.budget_exhausted, result.faults_fired, tuple(plan.requires),
                not_run=result.not_run, nemesis=tuple(result.nemesis),
                stopped=result.stopped, budget_s=budget))
            if options.fail_fast and recording.online.violation_count:
                stopped = "a violation the online checkers counted (--fail-fast)"
        recording.close()
        stateful = None
        if options.stateful_share > 0 and not stopped:
            progress.scenario("stateful (Hypothesis)")
            searching = time.monotonic()
            stateful = _stateful_phase(backend, seed, options)
            phases["stateful"] = time.monotonic() - searching
        progress.finish()
        return recording.judge(
            seed=seed, scenarios=summaries, restore_supported=can_restore,
            started=started, stateful=stateful, skip=options.skip, stopped=stopped,
            budget_s=options.budget_s, phases=phases, on_violation=on_violation,
            command=_command(backend.name, seed, options,
                             getattr(backend.factory, "command_args", None)))


def _run_scenario(backend: ResolvedBackend, plan: Plan, recording: Recording, progress: Progress,
                  options: CertifyOptions, first_worker: int, budget_s: float,
                  runnability: Runnability) -> RunResult:
    """Run one scenario's plan; under ``fail_fast``, a violation counted online stops it
    (workers in other processes within a tick of the runner's, 0.1 s, more)."""
    stop = threading.Event()

    def on_step() -> None:
        count = recording.violation_count
        progress.step(count)
        if count and options.fail_fast:
            stop.set()

    return run_plan(backend.factory, plan, recording.recorder, clock=LamportClock(),
                    first_worker=first_worker, budget_s=budget_s,
                    processes=options.processes or 0, factory_spec=backend.name,
                    on_step=on_step, stop=stop, process_phase=options.processes != 0,
                    runnability=runnability)


def prepare(backend: ResolvedBackend) -> bool:
    """Check the factory gives a working handle, empty the store, and say whether the
    backend has restore: asked up front, so a run that never reaches a restore still
    knows."""
    handle = probe(backend.factory, backend.name)
    handle.reset()
    handle.close()
    return restore_supported(backend.factory)


class Recording:
    """The recording side of a run, from the first operation to the written verdict:
    ``history.jsonl`` streaming, the online checkers, and the metrics served while the
    run records and is checked, then pushed with the verdict.

    ``compress`` records ``history.jsonl.zst`` instead. Either way the other form is
    deleted from ``out`` first, so that the folder holds one history, this run's.

    Used as a context manager around the run; :meth:`close` ends the history (the
    stateful phase may follow), :meth:`judge` reads it back and writes the report.
    """

    def __init__(self, out: Path, *, backend: str, suite: str, level: Paraphrase, seed: int,
                 metrics: MetricsOptions | None,
                 observers: Sequence[Callable[[Entry], None]] = (),
                 compress: bool = False) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.history = out / (_COMPRESSED if compress else _PLAIN)
        """The file this run's history streams to."""
        (out / (_PLAIN if compress else _COMPRESSED)).unlink(missing_ok=True)
        self.backend = backend
        self.level = level
        self.online = CheckerSuite(level=level)
        self._count = 0
        self._count_due = 0.0
        self.exporter: Exporter | None = None
        if metrics is not None:
            from .metrics import Exporter

            online = self.online
            self.exporter = Exporter.start(
                metrics, backend=backend, suite=suite, level=level, seed=seed,
                violations=online.violation_counts, rate_terms=online.rate_terms,
                causes=online.cause_counts)
        # The exporter must see each entry as it happens, to count it under the
        # scenario running; the online checkers may run a flush interval behind, on
        # the writer thread, which keeps them off the workers' path.
        watching = [*observers]
        if self.exporter is not None:
            watching.append(self.exporter.observe)
        self.recorder = HistoryRecorder(
            self.history, keep=False, observers=watching,
            deferred_observers=[self.online.observe], flush_interval_s=FLUSH_INTERVAL_S,
            compress=compress)

    @property
    def violation_count(self) -> int:
        """The online checkers' count, summed at most once per flush interval: they are
        fed a batch at a time on the writer thread, so it cannot move more often, and
        the progress bar asks for it at every step, on the workers' path."""
        now = time.monotonic()
        if now >= self._count_due:
            self._count = self.online.violation_count
            self._count_due = now + FLUSH_INTERVAL_S
        return self._count

    def begin_scenario(self, name: str) -> None:
        if self.exporter is not None:
            # The online checkers run a flush interval behind: what the scenario that
            # ended recorded must be counted under it, before the next one begins.
            self.recorder.settle()
            self.exporter.begin_scenario(name)

    def close(self) -> None:
        self.recorder.close()

    def judge(self, *, seed: int, scenarios: Sequence[ScenarioSummary], restore_supported: bool,
              started: float, command: str, stateful: Mapping[str, Any] | None = None,
              skip: Sequence[str] = (), stopped: str = "", budget_s: float | None = None,
              phases: Mapping[str, float] | None = None,
              on_violation: Callable[[Violation], None] | None = None) -> Report:
        """Check the saved history with the same checkers, streaming it (the online
        checkers' index is freed first), write results.json and junit.xml, and push the
        metrics with the verdict. ``phases`` are the seconds the run's phases took so
        far; checking is added to them."""
        self.close()
        self.online.close()
        checking = time.monotonic()
        judged = judge_file(self.history, level=self.level,
                            nemesis=[e for s in scenarios for e in s.nemesis],
                            on_violation=on_violation)
        timed = {**(phases or {}), "checking": time.monotonic() - checking}
        report = build_report(
            backend=self.backend, seed=seed, level=self.level, checks=judged.checks,
            coverage=judged.coverage, scenarios=scenarios, errors=judged.errors,
            restore_supported=restore_supported, history_entries=judged.entries,
            elapsed_s=time.monotonic() - started, command=command, stateful=stateful,
            skip=skip, stopped=stopped, budget_s=budget_s, phases=timed)
        report.write(self.out)
        if self.exporter is not None:
            self.exporter.finish(success=report.verdict == "certified",
                                 duration_s=report.elapsed_s, verdict=report.verdict)
        return report

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.recorder.close()
        finally:
            if self.exporter is not None:
                self.exporter.close()


def _stateful_phase(backend: ResolvedBackend, seed: int,
                    options: CertifyOptions) -> dict[str, Any]:
    """Search for short failing programs; the printed programs import the backend back by
    its spec, when it has one."""
    from invariants.stateful import run_stateful_phase

    shutil.rmtree(options.out / "stateful", ignore_errors=True)
    outcome = run_stateful_phase(backend, budget_s=options.budget_s * options.stateful_share,
                                 seed=seed, level=options.level, out=options.out,
                                 max_value_bytes=options.max_value_bytes)
    return outcome.to_dict()


def replay(out: Path, *, progress: Callable[[int, int], None] | None = None) -> Report:
    """Re-check a saved run from its folder (its ``results.json`` and its history,
    plain or compressed), without the backend, streaming the history. ``progress`` is
    told, now and then, the entries checked so far and the run's total."""
    import json

    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    path = find_history(out)
    if path is None:
        raise FileNotFoundError(f"{out} holds no {_PLAIN} or {_COMPRESSED}; pass the --out "
                                "folder of a memcert certify run.")
    scenarios = [ScenarioSummary(s["name"], s["steps_planned"], s["steps_done"],
                                 s["elapsed_s"], s["budget_exhausted"], s["faults_fired"],
                                 tuple(s["requires"]), not_run=s.get("not_run") or "",
                                 nemesis=tuple(s.get("nemesis", ())),
                                 stopped=bool(s.get("stopped")), budget_s=s.get("budget_s"))
                 for s in saved["scenarios"]]
    total = int(saved.get("history_entries") or 0)
    judged = judge_file(path, level=saved["level"],
                        nemesis=[e for s in scenarios for e in s.nemesis],
                        progress=None if progress is None else lambda n: progress(n, total))
    return build_report(
        backend=saved["backend"], seed=saved["seed"], level=saved["level"],
        checks=judged.checks, coverage=judged.coverage, errors=judged.errors,
        scenarios=scenarios, restore_supported=saved["restore_supported"],
        history_entries=judged.entries, elapsed_s=0.0, command=saved["reproduce"],
        stateful=saved.get("stateful"), skip=check_skip(saved.get("skip", ())),
        stopped=saved.get("stopped") or "")


def _command(spec: str, seed: int, options: CertifyOptions,
             backend_args: Sequence[str] | None = None) -> str:
    """The command that reruns the plans; ``backend_args`` name a backend that has no
    spec of its own (``--serve``: a service memcert runs)."""
    parts = ["memcert", "certify"]
    if backend_args is not None:
        parts += backend_args
    elif spec != REFERENCE:
        parts.append(spec)
    parts += ["--seed", str(seed), "--level", options.level, "--budget", f"{options.budget_s:g}",
              "--workers", str(options.workers)]
    if options.processes is not None:
        parts += ["--processes", str(options.processes)]
    if options.suite != CertifyOptions.suite:
        parts += ["--suite", options.suite]
    if options.stateful_share != STATEFUL_SHARE:
        parts += ["--stateful-share", f"{options.stateful_share:g}"]
    if options.max_value_bytes != DEFAULT_VALUE_BYTES:
        parts += ["--max-value-bytes", str(options.max_value_bytes)]
    for name in options.skip:
        parts += ["--skip", name]
    if options.fail_fast:
        parts.append("--fail-fast")
    if options.compress:
        parts.append("--compress")
    return shlex.join(parts)
