"""The ``memcert`` argument parser, and nothing else: building it has no side effects.

Every option can also come from an environment variable (named in its help), so a CI
job can set them once. A mistyped subcommand gets "Did you mean ...?".
"""

from __future__ import annotations

import argparse
import difflib
import os
from typing import NoReturn

__all__ = ["UsageError", "build_parser"]


class UsageError(Exception):
    """The command line is wrong; the CLI prints the message and exits with 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        if "invalid choice" in message:
            choice = message.split("'")[1] if "'" in message else ""
            subcommands = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
            names = list(subcommands[0].choices) if subcommands else []
            close = difflib.get_close_matches(choice, names, n=1)
            if close:
                message += f". Did you mean {close[0]!r}?"
        raise UsageError(f"{self.prog}: {message}\n(run '{self.prog} --help' for usage)")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name, default)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memcert",
        description="Certify agent-memory backends against write-time invariants: "
                    "uniqueness, causal monotonicity, deletion monotonicity, semantic "
                    "normalization, plus durability and namespace isolation.",
        epilog="Exit codes: 0 certified, 1 failed, 2 usage error, 3 unknown.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    certify = commands.add_parser(
        "certify", help="run the chaos scenarios against a backend and judge it",
        description="Drive a backend with the chaos scenarios, record the history, and "
                    "check every invariant. Writes results.json, history.jsonl and "
                    "junit.xml to --out.",
        epilog="Examples:\n  memcert certify                      # the reference store\n"
               "  memcert certify mypkg.store:factory --budget 120 --seed 7\n"
               "  memcert replay memcert-out         # re-check a saved run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    certify.add_argument(
        "backend", nargs="?", default=None, metavar="package.module:factory",
        help="a zero-argument callable returning a MemoryBackend; every call must give a "
             "handle onto the same store (default: the reference store on embedded SQLite)")
    run = certify.add_argument_group("the run")
    run.add_argument("--budget", type=float, default=float(_env("MEMCERT_BUDGET", "60") or 60),
                     metavar="SECONDS",
                     help="wall-clock budget for the whole certification [env MEMCERT_BUDGET, "
                          "default 60]")
    _add_plan_options(run)
    run.add_argument("--suite", default=_env("MEMCERT_SUITE", "certify"), metavar="NAME",
                     help="the scenario suite to run (scenarios/suites/NAME.toml) "
                          "[env MEMCERT_SUITE, default certify]")
    output = certify.add_argument_group("output")
    output.add_argument("--out", default=_env("MEMCERT_OUT", "memcert-out"), metavar="DIR",
                        help="folder for results.json, history.jsonl, junit.xml "
                             "[env MEMCERT_OUT, default memcert-out]")
    output.add_argument("--quiet", action="store_true",
                        help="no progress bar; print only the verdict table")
    _add_metrics_options(certify)

    nightly = commands.add_parser(
        "nightly", help="the nightly chaos job: certify, then write a report to read later",
        description="Run a suite (by default the long nightly one) against a backend, write "
                    "the night's results.json, junit.xml, history.jsonl and a self-contained "
                    "report.html to a new folder under --out, refresh index.html across "
                    "nights, and push the run's metrics to a Pushgateway if given. Exits "
                    "non-zero on any violation, like certify.",
        epilog="Examples:\n  memcert nightly --out /var/lib/memcert/nightly\n"
               "  memcert nightly mypkg.store:factory --out reports "
               "--pushgateway http://pushgateway:9091",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    nightly.add_argument(
        "backend", nargs="?", default=None, metavar="package.module:factory",
        help="the backend factory, as for certify (default: the reference store)")
    job = nightly.add_argument_group("the run")
    job.add_argument("--suite", default=_env("MEMCERT_NIGHTLY_SUITE", "nightly"), metavar="NAME",
                     help="the scenario suite to run [env MEMCERT_NIGHTLY_SUITE, default "
                          "nightly]")
    job.add_argument("--budget", type=float, default=_float_env("MEMCERT_NIGHTLY_BUDGET"),
                     metavar="SECONDS",
                     help="wall-clock budget [env MEMCERT_NIGHTLY_BUDGET, default the suite's "
                          "own budget_s]")
    _add_plan_options(job)
    kept = nightly.add_argument_group("output")
    kept.add_argument("--out", default=_env("MEMCERT_NIGHTLY_OUT", "memcert-nightly"),
                      metavar="DIR",
                      help="the folder that keeps every night, one subfolder each, and "
                           "index.html [env MEMCERT_NIGHTLY_OUT, default memcert-nightly]")
    kept.add_argument("--keep", type=int, default=int(_env("MEMCERT_NIGHTLY_KEEP", "30") or 30),
                      metavar="N",
                      help="nights to keep; older night folders are deleted (0 keeps all) "
                           "[env MEMCERT_NIGHTLY_KEEP, default 30]")
    kept.add_argument("--quiet", action="store_true",
                      help="no progress bar; print only the verdict table")
    _add_metrics_options(nightly)

    replay = commands.add_parser(
        "replay", help="re-check a saved run without the backend",
        description="Read DIR/history.jsonl and DIR/results.json, check the history again "
                    "with the same checkers, and print the verdict table.")
    replay.add_argument("out", metavar="DIR", help="a folder written by memcert certify")
    return parser


def _add_metrics_options(parser: argparse.ArgumentParser) -> None:
    metrics = parser.add_argument_group("metrics")
    metrics.add_argument(
        "--metrics-port", type=int, default=_int_env("MEMCERT_METRICS_PORT"), metavar="N",
        help="serve Prometheus metrics at http://127.0.0.1:N/metrics while the run "
             "records and is checked (0 picks a free port) [env MEMCERT_METRICS_PORT, "
             "default off]")
    metrics.add_argument(
        "--pushgateway", default=_env("MEMCERT_PUSHGATEWAY") or None, metavar="URL",
        help="push the run's metrics to this Pushgateway when it ends, grouped by job, "
             "backend and suite [env MEMCERT_PUSHGATEWAY, default off]")


def _float_env(name: str) -> float | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"memcert: {name}={value!r} is not a number") from None


def _add_plan_options(group: argparse._ArgumentGroup) -> None:
    """The options that decide the operation plan, shared by certify and nightly."""
    group.add_argument("--seed", type=int, default=_int_env("MEMCERT_SEED"), metavar="N",
                       help="seed of the operation plan; the same seed gives the same plan "
                            "[env MEMCERT_SEED, default random and reported]")
    group.add_argument("--level", choices=("surface", "lexical", "semantic"),
                       default=_env("MEMCERT_LEVEL", "lexical"),
                       help="the paraphrase level the backend claims to normalize "
                            "[env MEMCERT_LEVEL, default lexical]")
    group.add_argument("--workers", type=int, default=int(_env("MEMCERT_WORKERS", "8") or 8),
                       metavar="N", help="concurrent worker threads [env MEMCERT_WORKERS, "
                                         "default 8]")
    group.add_argument("--processes", type=int,
                       default=int(_env("MEMCERT_PROCESSES", "0") or 0), metavar="P",
                       help="spread the workers over P worker processes, each opening its own "
                            "handles from the factory; 0 keeps them as threads "
                            "[env MEMCERT_PROCESSES, default 0]")
    group.add_argument("--stateful-share", type=float,
                       default=float(_env("MEMCERT_STATEFUL_SHARE", "0.2") or 0.2),
                       metavar="FRACTION",
                       help="share of the budget for the stateful phase, where Hypothesis "
                            "searches for the shortest program that breaks an invariant; 0 "
                            "skips it [env MEMCERT_STATEFUL_SHARE, default 0.2]")


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"memcert: {name}={value!r} is not an integer") from None
