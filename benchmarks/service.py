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

The load average is printed too, since other jobs on the machine move every figure.
"""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.load import LoadOptions, run_load
from reference_store.service.server import EVENT_LOOP

from .timing import median

ROOT = Path(__file__).resolve().parent.parent
PG_URL_ENV = "MEMCERT_TEST_PG_URL"
TARGET = 0.5
"""The target: the read route on a SQLite file at half the ceiling's requests per second
or better. The mixes, and PostgreSQL, are measured for the record and have no target."""
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
        ratio = results["SQLite file/read-only"]
        print(f"- read-only / ceiling on SQLite file, req/s = {ratio:.2f} (target >= {TARGET}): "
              f"{'met' if ratio >= TARGET else 'NOT met'}.")
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


if __name__ == "__main__":
    serve_ceiling()
