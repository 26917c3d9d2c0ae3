"""Run the benchmarks and print their tables as markdown (``make bench``).

``python -m benchmarks`` runs them all; ``python -m benchmarks checkers runner`` runs the
ones named, in the order given. With more than one, each runs in an interpreter of its
own: the checker benchmark leaves gigabytes of heap behind, which would slow every
collection, and so every operation, of the benchmarks after it. A benchmark named alone
takes options of its own after its name: ``python -m benchmarks history --sizes 100k``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from . import (
    certify_wall,
    checkers,
    embedder,
    guard,
    history,
    runner_overhead,
    service,
    store_write,
)


def _store() -> None:
    for synchronous in ("NORMAL", "FULL"):
        store_write.run(n=2000 if synchronous == "FULL" else 4000, synchronous=synchronous)


BENCHMARKS: dict[str, Callable[[], object]] = {
    "store": _store,
    "checkers": checkers.run,
    "runner": runner_overhead.run,
    "certify": certify_wall.run,
    "embedder": embedder.run,
    "service": service.run,
    "history": history.run,
    "guard": guard.run,
}

OPTIONS: dict[str, Callable[[Sequence[str]], object]] = {
    "history": history.main,
    "guard": guard.main,
}
"""The benchmarks that take options of their own, by name: each parses what follows it."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"benchmarks to run, among {', '.join(BENCHMARKS)} (default: all); "
                             "history alone takes --sizes N,N, --data DIR and --cap-gb GB; "
                             "guard alone takes --rounds N and --ops N")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    names = args.names or list(BENCHMARKS)
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown:
        parser.error(f"no benchmark named {', '.join(map(repr, unknown))}; "
                     f"choose among {', '.join(BENCHMARKS)}")
    if rest and (len(names) != 1 or names[0] not in OPTIONS):
        takers = " and ".join(OPTIONS)
        parser.error(f"unrecognized arguments: {' '.join(rest)}; only {takers} "
                     f"take{'s' if len(OPTIONS) == 1 else ''} options, after the name, alone")
    if not args.no_header:
        print(f"# memcert benchmarks\n\nPython {platform.python_version()} on "
              f"{platform.machine()}, {_cores()} cores.", flush=True)
    if len(names) == 1:
        if rest:
            OPTIONS[names[0]](rest)
        else:
            BENCHMARKS[names[0]]()
        return
    for name in names:
        subprocess.run([sys.executable, "-m", "benchmarks", "--no-header", name], check=True,
                       cwd=Path(__file__).resolve().parent.parent)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    main()
