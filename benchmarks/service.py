"""Requests per second and p99 of ``memcert serve`` under Locust, against a ceiling.

Every figure comes from ``memcert load`` (``chaos.load.run_load``): Locust users with no
think time, all started at once, the same client for every run. The ceiling is a bare
Starlette route (``POST /v1/read`` answering ``{"records": []}`` without a store) under the
very uvicorn settings ``memcert serve`` uses, loaded with the ``read-only`` mix: what the
framework, the server and this client reach when the store costs nothing. Each ratio is a
run's requests per second over the ceiling's in the same round, the median over rounds.

Runs per database (SQLite file; PostgreSQL when ``MEMCERT_TEST_PG_URL`` is set, e.g. under
``scripts/throwaway-pg run --``):

- ``read-only``: the read route alone, on keys nobody wrote (the same request as the
  ceiling's, so the gap is the service's own read path);
- ``read-heavy`` and ``write-heavy``: the mixes of ``chaos.load_mix.MIXES``, contract and
  store operations together, every run's history checked (a figure from a run that
  fails its invariants would mean nothing, so the table says the verdict).

Two ratios per run. *req/s ratio*: the run's requests per second over the ceiling's, as
Locust measured them. The Locust client shares the machine with the server (on 2 cores
it takes a good part of one, for the ceiling as for the service), so this ratio says
what a client on the same box sees. *CPU ratio*: the server process's CPU time per
request, the ceiling's over the run's (from ``/proc``): what the service would reach
against the ceiling if the server's CPU were the only limit.

A second table, *in process* (:func:`in_process`), calls the service's ASGI app from
this process, with no network and no client, and gives the CPU per request of each
route and of the read-heavy mix: the steadiest figure on a shared machine, and the one
that says which route costs what. The load average is printed with both, since other
jobs on the machine move every figure.
"""

from __future__ import annotations

import asyncio
import csv
import gc
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.load import LoadOptions, run_load
from chaos.load_mix import HybridClock, Keyspace, UserScript
from reference_store.service.server import EVENT_LOOP

from .timing import median

ROOT = Path(__file__).resolve().parent.parent
PG_URL_ENV = "MEMCERT_TEST_PG_URL"
TARGET = 0.5
"""The target for reads: the read-heavy mix at half the ceiling or better."""
RUNS = ("read-only", "read-heavy", "write-heavy")
_ANNOUNCED = re.compile(r"^memcert: serving (?:the reference store|the ceiling) at (\S+)$")


@dataclass(frozen=True)
class Figure:
    """One Locust run: Locust's own aggregate of every request, and the server's CPU."""

    requests: int
    failures: int
    rps: float
    p50_ms: float
    p99_ms: float
    verdict: str
    server_cpu_us: float
    """CPU time the server process spent per request, user and system."""


IN_PROCESS_ROUTES = ("read", "write", "search", "recall", "touch")
"""The routes whose CPU per request is measured in process."""
IN_PROCESS_KINDS = ("ceiling", *IN_PROCESS_ROUTES, "read-heavy")
"""What the in-process table shows: the bare route, each route, and the read-heavy mix."""
IN_PROCESS_REQUESTS = 1500
IN_PROCESS_ROUNDS = 5


@dataclass(frozen=True)
class _Server:
    url: str
    pid: int

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(users: int = 16, duration_s: float = 10.0, rounds: int = 2) -> dict[str, float]:
    databases: dict[str, str | None] = {"SQLite file": None}
    pg = os.environ.get(PG_URL_ENV)
    if pg:
        databases["PostgreSQL"] = pg
    print("\n## HTTP service under Locust (`memcert serve`, requests/s and p99)")
    print(f"{users} Locust users with no think time, {duration_s:g} s per run, {rounds} "
          "interleaved rounds; the median round is shown, each ratio is the median of the "
          "rounds' ratios to the ceiling measured in the same round. Server and ceiling "
          f"run on the {EVENT_LOOP} event loop.\n")
    if not pg:
        print(f"PostgreSQL: **not measured**, {PG_URL_ENV} is not set (run under "
              "`scripts/throwaway-pg run -- python -m benchmarks service`).\n")
    print("| database | run | req/s | p50 ms | p99 ms | failures | verdict | server CPU µs/req "
          "| req/s ratio | CPU ratio |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|")
    results: dict[str, float] = {}
    loads: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memcert-bench-") as tmp:
        folder = Path(tmp)
        for label, db in databases.items():
            started = _load_average()
            ceilings: list[Figure] = []
            runs: dict[str, list[Figure]] = {name: [] for name in RUNS}
            with _served(db or str(folder / f"{len(results)}.sqlite3")) as served, \
                    _ceiling() as bare:
                for k in range(rounds):
                    ceilings.append(_load(bare, "read-only", users, duration_s,
                                          folder / f"ceiling-{label}-{k}"))
                    for name in RUNS:
                        runs[name].append(_load(served, name, users, duration_s,
                                                folder / f"{name}-{label}-{k}"))
            ceiling = _median(ceilings)
            print(f"| {label} | ceiling: bare Starlette route | {_row(ceiling)} | 1.00 | 1.00 |")
            for name in RUNS:
                pairs = list(zip(runs[name], ceilings, strict=True))
                ratio = median([r.rps / c.rps for r, c in pairs])
                cpu = median([c.server_cpu_us / r.server_cpu_us for r, c in pairs])
                print(f"| {label} | {name} | {_row(_median(runs[name]))} | {ratio:.2f} | "
                      f"{cpu:.2f} |")
                results[f"{label}/{name}"] = ratio
                results[f"{label}/{name}/cpu"] = cpu
            results[f"{label}/ceiling_rps"] = ceiling.rps
            loads.append(f"{label} {started}, then {_load_average()}")
        print(f"\nLoad average (1 min) at the start of each database's runs and at its end: "
              f"{'; '.join(loads)}.\n")
        for label in databases:
            for name in ("read-only", "read-heavy"):
                ratio = results[f"{label}/{name}"]
                print(f"- {name} / ceiling on {label}, req/s = {ratio:.2f} (target for reads "
                      f">= {TARGET}): {'met' if ratio >= TARGET else 'NOT met'}.")
        print("\n### In process (ASGI calls, no network, no client), CPU µs per request\n")
        print(f"16 concurrent callers, {IN_PROCESS_REQUESTS} requests per route and round, "
              f"the median of {IN_PROCESS_ROUNDS} interleaved rounds.\n")
        print(f"| database | {' | '.join(IN_PROCESS_KINDS)} | load average |")
        print(f"|---|{'---:|' * len(IN_PROCESS_KINDS)}---|")
        for label, db in databases.items():
            started = _load_average()
            spent = in_process(db or str(folder / "in-process.sqlite3"))
            print(f"| {label} | {' | '.join(f'{spent[k]:,.0f}' for k in IN_PROCESS_KINDS)} "
                  f"| {started} to {_load_average()} |")
            results.update({f"{label}/in_process/{k}": v for k, v in spent.items()})
    return results


def _load_average() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _row(figure: Figure) -> str:
    return (f"{figure.rps:,.0f} | {figure.p50_ms:g} | {figure.p99_ms:g} | {figure.failures} | "
            f"{figure.verdict} | {figure.server_cpu_us:,.0f}")


def _median(figures: list[Figure]) -> Figure:
    return sorted(figures, key=lambda f: f.rps)[len(figures) // 2]


def _load(server: _Server, mix: str, users: int, duration_s: float, out: Path) -> Figure:
    before = server.cpu_s()
    result = run_load(LoadOptions(users=users, duration_s=duration_s, host=server.url,
                                  mix=mix, out=out, seed=1, echo=False))
    cpu_s = server.cpu_s() - before
    with open(out / "locust_stats.csv", encoding="utf-8") as stats:
        total = next(row for row in csv.DictReader(stats) if row["Name"] == "Aggregated")
    verdict = result.report.verdict if mix != "read-only" else "(nothing to check)"
    requests = int(total["Request Count"])
    return Figure(requests, int(total["Failure Count"]), float(total["Requests/s"]),
                  float(total["50%"]), float(total["99%"]), verdict,
                  cpu_s / max(1, requests) * 1e6)


@contextmanager
def _served(db: str) -> Iterator[_Server]:
    command = [sys.executable, "-m", "chaos.cli", "serve", "--db", db, "--port", "0"]
    with _process(command) as server:
        yield server


@contextmanager
def _ceiling() -> Iterator[_Server]:
    with _process([sys.executable, "-m", "benchmarks.service"]) as server:
        yield server


@contextmanager
def _process(command: list[str]) -> Iterator[_Server]:
    """A server subprocess, until it announces its URL on stderr; stopped afterwards."""
    env = {k: v for k, v in os.environ.items() if k != "MEMCERT_TOKEN"}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: list[str] = []
    announced = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = _ANNOUNCED.match(line.strip())
            if match and not found:
                found.append(match.group(1))
                announced.set()
        announced.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        if not announced.wait(60) or not found:
            raise RuntimeError(f"{' '.join(command)} did not announce a URL")
        yield _Server(found[0], process.pid)
    finally:
        process.terminate()
        process.wait(30)
        reader.join(5)


def serve_ceiling() -> None:
    """The ceiling: one Starlette route, no store, under ``memcert serve``'s uvicorn settings."""
    import uvicorn

    from reference_store.service.server import GRACE_S, KEEP_ALIVE_S

    app = ceiling_app()
    # IPPROTO_TCP as memcert serve's listener has it: asyncio sets TCP_NODELAY only on
    # sockets that say they are TCP, and without it every answer waits ~40 ms on Nagle.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", loop=EVENT_LOOP,
        timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=int(GRACE_S),
        server_header=False))
    print(f"memcert: serving the ceiling at http://127.0.0.1:{listener.getsockname()[1]}",
          file=sys.stderr, flush=True)
    server.run(sockets=[listener])


def ceiling_app() -> Any:
    """The ceiling's ASGI app: one Starlette route answering a read of nothing, no store."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def read(request: Request) -> Response:
        await request.body()
        return JSONResponse({"records": []})

    return Starlette(routes=[Route("/v1/read", read, methods=["POST"])])


def in_process(db: str, *, requests: int = IN_PROCESS_REQUESTS, concurrency: int = 16,
               rounds: int = IN_PROCESS_ROUNDS) -> dict[str, float]:
    """CPU µs per request of each route, the service's app called in this process.

    No network, no HTTP parsing and no client: ``concurrency`` tasks send ASGI calls to
    the very app ``memcert serve`` runs, over the pool it builds, and the process's CPU
    time (every thread's) is divided by the requests. What is left is the route, the
    middleware, the thread hop and the store, and it moves far less with other jobs on
    the machine than a Locust run does. The store first takes writes from the load's own
    users (``chaos.load_mix``), so search and recall rank what a load run has.
    """
    from prometheus_client import CollectorRegistry

    from reference_store import ReferenceStore
    from reference_store.engine import is_memory_url, normalize_url
    from reference_store.service.app import build_app
    from reference_store.service.metrics import ServiceMetrics
    from reference_store.service.options import ServiceOptions
    from reference_store.service.pool import HandlePool

    url = normalize_url(db)
    options = ServiceOptions(db_url=db)
    registry = CollectorRegistry()
    pool = HandlePool(lambda: ReferenceStore(url, metrics=metrics.store), options.handles_for(url),
                      in_process=url.get_backend_name() == "sqlite" and not is_memory_url(url))
    metrics = ServiceMetrics(registry, handles=lambda: pool.opened)
    pool.warm()
    try:
        scripts = _scripts(concurrency)
        with ReferenceStore(url) as store:
            for n in range(600):
                store.write(scripts[n % concurrency].write()[0])
        app = build_app(pool, options, metrics)
        bare = ceiling_app()
        kinds = IN_PROCESS_KINDS
        spent: dict[str, list[float]] = {kind: [] for kind in kinds}

        async def measure() -> None:
            # one loop for every round, as the server has one
            for _ in range(rounds):
                for kind in kinds:
                    calls = [_call(script, kind) for script in scripts
                             for _ in range(requests // concurrency)]
                    target = bare if kind == "ceiling" else app
                    spent[kind].append(await _cpu_per_call(target, calls, concurrency))

        # What this process holds already (the Locust runs' results) would otherwise
        # slow every garbage collection, and so every request, as it never does a server.
        gc.collect()
        gc.freeze()
        try:
            with asyncio.Runner(loop_factory=_server_loop()) as runner:
                runner.run(measure())
        finally:
            gc.unfreeze()
    finally:
        pool.close()
    return {kind: median(values) for kind, values in spent.items()}


def _server_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop ``memcert serve`` runs on, so that in process measures the same."""
    if EVENT_LOOP != "uvloop":
        return None
    import uvloop

    return uvloop.new_event_loop


def _scripts(count: int) -> list[UserScript]:
    keys = Keyspace("inproc")
    clock = HybridClock(0)
    return [UserScript(keys, mix="read-heavy", level="lexical", seed=1, worker_index=0,
                       user=n, clock=clock) for n in range(count)]


def _call(script: UserScript, kind: str) -> tuple[str, bytes]:
    """One request of ``kind`` (a route, ``ceiling``, or a draw from the read-heavy mix)."""
    if kind == "ceiling":
        kind = "read"
    if kind == "read-heavy":
        kind = script.choose()
    if kind in ("write", "delete", "restore"):
        op = getattr(script, kind)()
        op = op[0] if isinstance(op, tuple) else op
        body = {name: getattr(op, name) for name in op.__dataclass_fields__
                if getattr(op, name) is not None}
    elif kind == "read":
        namespace, entity_id = script.read()
        body = {"namespace": namespace, "entity_id": entity_id}
    else:
        body = getattr(script, kind)()
    return f"/v1/{kind}", json.dumps(body).encode()


async def _cpu_per_call(app: Any, calls: list[tuple[str, bytes]], concurrency: int) -> float:
    queue = iter(calls)
    statuses: list[int] = []

    async def client() -> None:
        for path, body in queue:
            statuses.append(await _asgi(app, path, body))

    started = time.process_time()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    used = time.process_time() - started
    if any(status != 200 for status in statuses):
        raise RuntimeError(f"in-process calls answered {sorted(set(statuses))}")
    return used / len(calls) * 1e6


async def _asgi(app: Any, path: str, body: bytes) -> int:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", 80),
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    delivered = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])

    await app(scope, receive, send)
    return status


if __name__ == "__main__":
    serve_ceiling()
