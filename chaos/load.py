"""``memcert load``: load a memory service with Locust, then judge what its users saw.

memcert's own process never imports Locust (importing it patches the standard library
with gevent). It starts Locust as subprocesses running ``chaos/locustfile.py``: one
local process, or a master and ``processes`` workers on this machine (Locust's
distributed mode), to which workers on other machines may add themselves
(``expect_workers``). Each worker records its own history; when Locust has quit,
:func:`run_load` merges those files by time into ``history.jsonl``, checks it with the
same checkers as ``memcert certify``, and writes the same ``results.json`` and
``junit.xml``. Locust's own statistics go to ``locust_*.csv``; ``load.json`` holds what
the master saw of every worker and every request's timing to the microsecond.

Without a ``host``, the reference store is served for the run (``memcert serve`` on a
SQLite file in a temporary folder, or on ``db``) and stopped afterwards.

The first SIGINT or SIGTERM stops the load early: it is passed to the Locust master,
which stops the users, waits for every worker's last batch and quits; the run is then
judged as usual. A second one abandons the run.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from invariants.adapters.http import HttpFactory
from invariants.errors import InvalidArgument, MemcertError
from invariants.history import HistoryStream, Paraphrase
from invariants.levels import CLAIMABLE_LEVELS

from .judging import judge_file
from .load_merge import merge_into
from .load_mix import DEFAULT_ENTITIES, MIXES
from .report import Report, ScenarioSummary, build_report
from .signals import on_first_signal

if TYPE_CHECKING:
    from .metrics import MetricsOptions

__all__ = ["LOCUSTFILE", "LoadFailed", "LoadOptions", "LoadResult", "describe", "run_load",
           "run_worker"]

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_S = 10
"""How long Locust lets a user finish the request it is on when the run stops."""
START_ALLOWANCE_S = 120.0
"""How long the master waits for its workers to connect, and, again, for Locust to start
and to collect the workers' last batches, before it is stopped."""
SUITE = "load"


class LoadFailed(MemcertError):
    """Locust ended without recording anything, so there is nothing to judge."""


@dataclass(frozen=True)
class LoadOptions:
    """Everything that decides a load run. ``host`` None serves the reference store."""

    users: int = 8
    spawn_rate: float | None = None
    duration_s: float = 60.0
    processes: int = 0
    expect_workers: int = 0
    host: str | None = None
    db: str | None = None
    token: str | None = None
    out: Path = Path("memcert-load")
    mix: str = "balanced"
    entities: int = DEFAULT_ENTITIES
    level: Paraphrase = "lexical"
    seed: int | None = None
    master_bind_host: str = "127.0.0.1"
    master_port: int = 0
    echo: bool = True
    """Locust's output on this process's stdout and stderr; else only in ``locust.log``."""

    def __post_init__(self) -> None:
        for name in ("users", "entities"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name}={value!r} must be an int >= 1.")
        for name in ("processes", "expect_workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name}={value!r} must be an int >= 0.")
        if self.spawn_rate is not None and not (
                math.isfinite(self.spawn_rate) and self.spawn_rate > 0):
            raise InvalidArgument(f"spawn_rate={self.spawn_rate!r} must be a positive number "
                                  "of users per second; leave it out to start every user at "
                                  "once.")
        if not (math.isfinite(self.duration_s) and self.duration_s >= 1):
            raise InvalidArgument(f"duration_s={self.duration_s!r} must be at least 1 second.")
        if self.mix not in MIXES:
            raise InvalidArgument(f"mix={self.mix!r} is not a mix; use one of "
                                  f"{', '.join(MIXES)}.")
        if self.level not in CLAIMABLE_LEVELS:
            raise InvalidArgument(f"level={self.level!r} is not a normalization level; use one "
                                  f"of {', '.join(CLAIMABLE_LEVELS)}.")
        if self.host is not None and self.db is not None:
            raise InvalidArgument("host and db exclude each other: db is for the reference "
                                  "store that memcert load serves when no host is given.")
        if not 0 <= self.master_port <= 65535:
            raise InvalidArgument(f"master_port={self.master_port!r} is not a TCP port; give "
                                  "0 to 65535 (0 picks a free one).")

    @property
    def distributed(self) -> bool:
        """Whether Locust runs as a master with workers, rather than as one process."""
        return self.processes > 0 or self.expect_workers > 0

    @property
    def seconds(self) -> int:
        """The run time Locust is given, in whole seconds."""
        return max(1, round(self.duration_s))


@dataclass(frozen=True)
class LoadResult:
    """A load run's verdict, Locust's exit code, and what the master saw (``load.json``)."""

    report: Report
    locust_exit: int
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(n for _, _, n in self.summary.get("requests", {}).get("counts", []))

    @property
    def requests_per_second(self) -> float:
        elapsed = float(self.summary.get("elapsed_s") or 0)
        return self.requests / elapsed if elapsed > 0 else 0.0


def run_load(options: LoadOptions, *, metrics: MetricsOptions | None = None) -> LoadResult:
    """Load the service, then merge, check and report; see the module's docstring.

    ``metrics.port`` is served by the Locust master while the load runs (its users'
    requests, timed to the microsecond, and the online invariant counters);
    ``metrics.pushgateway`` gets the final figures once the verdict is in, and
    ``metrics.registry``, if given, holds them too.
    """
    if importlib.util.find_spec("locust") is None:
        raise InvalidArgument("memcert load needs Locust: pip install 'locust>=2.20'")
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    run_id = f"{seed:x}-{os.getpid():x}{time.time_ns() % 10**6:x}"
    out = _cleared(options.out.resolve())
    started = time.monotonic()
    with ExitStack() as stack:
        served_args: tuple[str, ...] = ()
        if options.host is None:
            from .service import managed_service

            served = stack.enter_context(managed_service(options.db, token=options.token))
            host, served_args = served.url, served.command_args
            dialect = "postgresql" if (options.db or "").startswith("postgres") else "sqlite"
            backend = f"memcert serve ({dialect})"
        else:
            host = backend = options.host
            _check_reachable(host, options.token)
        command = _locust_args(options, host, backend, seed, run_id, out, metrics)
        log = None if options.echo else stack.enter_context(open(out / "locust.log", "wb"))
        code = _run_locust(options, command, _environment(options.token), log)
    history, defects = _merge(out, code)
    report = _judge(history, defects, options, backend, seed, time.monotonic() - started,
                    _command(options, seed, served_args))
    report.write(out)
    summary = _summary(out)
    if metrics is not None and (metrics.pushgateway or metrics.registry is not None):
        _final_metrics(metrics, history, report, backend, seed, options.level, summary)
    return LoadResult(report, code, summary)


def _cleared(out: Path) -> Path:
    """``out``, without what an earlier run there left: a stale worker history would be
    merged into this run's."""
    for stale in ("workers", "history.jsonl", "history.jsonl.zst", "load.json", "results.json",
                  "junit.xml", "locust.log"):
        path = out / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_worker(master_host: str, master_port: int, token: str | None = None) -> int:
    """Run one Locust worker for a master elsewhere, until the master tells it to quit.

    Everything about the run comes from the master; the worker writes its history under
    the master's ``--out`` path on this machine, and streams it to the master.
    """
    if importlib.util.find_spec("locust") is None:
        raise InvalidArgument("memcert load needs Locust: pip install 'locust>=2.20'")
    command = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
               "--master-host", master_host, "--master-port", str(master_port)]
    return subprocess.run(command, env=_environment(token), check=False).returncode


# -- the service ---------------------------------------------------------------------------


def _check_reachable(host: str, token: str | None) -> None:
    """Fail as a usage error before Locust starts if the service does not answer."""
    HttpFactory(host, token=token).check()


# -- Locust ----------------------------------------------------------------------------------


def _locust_args(options: LoadOptions, host: str, backend: str, seed: int, run_id: str,
                 out: Path, metrics: MetricsOptions | None) -> list[str]:
    port = -1 if metrics is None or metrics.port is None else metrics.port
    return [
        "--headless", "--only-summary", "--users", str(options.users),
        "--spawn-rate", f"{options.spawn_rate or options.users:g}",
        "--run-time", f"{options.seconds}s", "--host", host,
        "--stop-timeout", str(STOP_TIMEOUT_S), "--csv", str(out / "locust"),
        "--memcert-out", str(out), "--memcert-run", run_id, "--memcert-seed", str(seed),
        "--memcert-level", options.level, "--memcert-mix", options.mix,
        "--memcert-entities", str(options.entities), "--memcert-backend", backend,
        "--memcert-metrics-port", str(port),
    ]


def _run_locust(options: LoadOptions, arguments: list[str], env: dict[str, str],
                log: IO[bytes] | None) -> int:
    """Run Locust to the end, passing the first SIGINT or SIGTERM on to its master.

    ``log`` takes every Locust process's output instead of this process's streams."""
    base = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE)]
    workers: list[subprocess.Popen[bytes]] = []
    if options.distributed:
        port = options.master_port or _free_port(options.master_bind_host)
        master_command = [*base, "--master", "--master-bind-host", options.master_bind_host,
                          "--master-bind-port", str(port), "--expect-workers",
                          str(options.processes + options.expect_workers),
                          "--expect-workers-max-wait", f"{START_ALLOWANCE_S:g}", *arguments]
        connect = "127.0.0.1" if options.master_bind_host in ("0.0.0.0", "*", "") \
            else options.master_bind_host
        worker_command = [*base, "--worker", "--master-host", connect, "--master-port",
                          str(port)]
    else:
        master_command = [*base, *arguments]
    # Sessions of their own: a Ctrl-C in the terminal reaches memcert alone, which stops
    # the master; the workers stop when the master tells them to.
    master = subprocess.Popen(master_command, env=env, cwd=ROOT, start_new_session=True,
                              stdout=log, stderr=log)
    try:
        if options.distributed:
            workers = [subprocess.Popen(worker_command, env=env, cwd=ROOT,
                                        start_new_session=True, stdout=log, stderr=log)
                       for _ in range(options.processes)]
        deadline = options.seconds + STOP_TIMEOUT_S + 2 * START_ALLOWANCE_S
        with _forward_stop(master):
            code = _wait(master, deadline)
        for worker in workers:
            _wait(worker, STOP_TIMEOUT_S + 30)
        return code
    finally:
        for process in (master, *workers):
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """The exit code; a process still running after ``timeout_s`` is stopped."""
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        print(f"memcert: Locust (pid {process.pid}) is still running after {timeout_s:.0f} s; "
              "stopping it", file=sys.stderr)
        process.terminate()
        try:
            return process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


@contextmanager
def _forward_stop(master: subprocess.Popen[bytes]) -> Iterator[None]:
    """The first SIGINT or SIGTERM stops Locust's master gracefully; the next one is the
    default again (Ctrl-C raises KeyboardInterrupt). Main thread only; a no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop() -> None:
        if master.poll() is None:
            master.send_signal(signal.SIGTERM)

    with on_first_signal(stop, "stopping the load; the histories recorded so far will be "
                         "judged; send it again to abandon the run"):
        yield


def _environment(token: str | None) -> dict[str, str]:
    """The subprocesses' environment: memcert importable, the token out of the process
    list, and Locust's gevent patching on (a test runner may have turned it off)."""
    env = {name: value for name, value in os.environ.items()
           if name != "LOCUST_SKIP_MONKEY_PATCH"}
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(ROOT), env.get("PYTHONPATH", "")) if part)
    if token:
        env["MEMCERT_TOKEN"] = token
    return env


def _free_port(host: str) -> int:
    bind = "127.0.0.1" if host in ("*", "") else host
    with socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET) as probe:
        probe.bind((bind.strip("[]"), 0))
        port: int = probe.getsockname()[1]
        return port


# -- the verdict -----------------------------------------------------------------------------


def _merge(out: Path, code: int) -> tuple[Path, tuple[str, ...]]:
    """The workers' histories merged into ``history.jsonl``: its path, and what was cut
    off the workers' files (a worker killed while writing its last line)."""
    paths = sorted((out / "workers").glob("worker-*.jsonl"),
                   key=lambda p: int(p.stem.split("-")[1]))
    if not paths:
        raise LoadFailed(f"Locust exited with code {code} before any worker recorded an "
                         "operation; see its output above")
    merged = merge_into(paths, out / "history.jsonl")
    return out / "history.jsonl", merged.defects


def _judge(history: Path, defects: tuple[str, ...], options: LoadOptions, backend: str,
           seed: int, elapsed_s: float, command: str) -> Report:
    """The verdict on the merged history, streamed once (a worker killed mid-operation
    leaves it incomplete: its open operations count as unknown outcomes)."""
    judged = judge_file(history, level=options.level, allow_incomplete=True, defects=defects)
    summary = ScenarioSummary(SUITE, judged.invocations, judged.entries - judged.invocations,
                              elapsed_s, False)
    return build_report(
        backend=backend, seed=seed, level=options.level, checks=judged.checks,
        coverage=judged.coverage, scenarios=[summary], errors=judged.errors,
        restore_supported=not judged.restore_unsupported, history_entries=judged.entries,
        elapsed_s=elapsed_s, command=command)


def _summary(out: Path) -> dict[str, Any]:
    path = out / "load.json"
    if not path.is_file():
        return {}
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _final_metrics(metrics: MetricsOptions, history: Path, report: Report, backend: str,
                   seed: int, level: str, summary: dict[str, Any]) -> None:
    """The run's metrics as the verdict has them, pushed and/or left in the registry.

    The operations and their timings are counted again from the saved history, and the
    violation counters, each invariant's checks and failed checks and the violations per
    cause are the verdict's own, so a push says exactly what results.json says; the
    requests' timings come from the master's ``load.json``.
    """
    from prometheus_client import CollectorRegistry

    from .metrics import Exporter, LoadMetrics
    from .metrics import MetricsOptions as Options

    registry = metrics.registry if metrics.registry is not None else CollectorRegistry()
    counts: dict[str, int] = {}
    terms: dict[str, tuple[int, int]] = {}
    causes: dict[str, dict[str, int]] = {}
    exporter = Exporter.start(Options(pushgateway=metrics.pushgateway, job=metrics.job,
                                      registry=registry),
                              backend=backend, suite=SUITE, level=level, seed=seed,
                              violations=lambda: counts, rate_terms=lambda: terms,
                              causes=lambda: causes)
    exporter.begin_scenario(SUITE)
    for entry in HistoryStream(history, allow_incomplete=True):
        exporter.observe(entry)
    for name, check in report.checks.items():
        counts[name] = check.violation_count
        terms[name] = (check.rate_numerator, check.rate_denominator)
        causes[name] = dict(check.causes)
    requests = LoadMetrics(backend=backend)
    if summary.get("requests"):
        requests.merge(summary["requests"])
    registry.register(requests)
    exporter.finish(success=report.verdict == "certified", duration_s=report.elapsed_s,
                    verdict=report.verdict)


def _command(options: LoadOptions, seed: int, served_args: Sequence[str]) -> str:
    """The command that runs this load again; a database password is hidden."""
    parts = ["memcert", "load", "--users", str(options.users), "--duration",
             str(options.seconds), "--seed", str(seed), "--mix", options.mix, "--level",
             options.level, "--entities", str(options.entities)]
    if options.spawn_rate is not None:
        parts += ["--spawn-rate", f"{options.spawn_rate:g}"]
    if options.processes:
        parts += ["--processes", str(options.processes)]
    if options.host is not None:
        parts += ["--host", options.host]
    return shlex.join([*parts, *served_args])


def describe(result: LoadResult) -> Sequence[str]:
    """What a person reads between Locust's summary and the verdict table."""
    lines = [f"memcert load: {result.requests} requests in "
             f"{result.summary.get('elapsed_s', 0):.1f} s ({result.requests_per_second:,.0f}/s) "
             f"by {len(result.summary.get('workers', []))} worker process(es); history "
             f"{result.report.history_entries} entries"]
    if result.locust_exit not in (0, 1):
        lines.append(f"memcert load: Locust exited with code {result.locust_exit}; the "
                     "histories it left were judged")
    return lines
