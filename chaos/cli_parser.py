"""The ``memcert`` argument parser, and nothing else: building it has no side effects.

Every option can also come from an environment variable (named in its help), so a CI
job can set them once. A mistyped subcommand gets "Did you mean ...?".
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import NoReturn, TypeVar

from invariants.backend import MAX_VALUE_BYTES
from invariants.errors import InvalidArgument
from invariants.levels import CLAIMABLE_LEVELS
from invariants.wording.values import DEFAULT_VALUE_BYTES, MIN_VALUE_BYTES

from .nightly_labels import parse_label
from .report import INVARIANTS

__all__ = ["STATEFUL_SHARE_MAX", "UsageError", "audit_namespaces", "build_parser", "help_hint",
           "looks_like_backend", "skip_names"]

T = TypeVar("T")


class UsageError(Exception):
    """The command line is wrong; the CLI prints the message and exits with 2."""


def help_hint(prog: str) -> str:
    """The line under every usage error: the help of the command that was run."""
    return f"(run '{prog} --help' for usage)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser with memcert's errors: raised as :class:`UsageError` rather than
    exiting, worded by flag, with "Did you mean ...?" for a mistyped command or option,
    and the help hint of the subcommand that was run, not the top level's."""

    subcommands: dict[str, _Parser]

    def error(self, message: str) -> NoReturn:
        if "invalid choice" in message and getattr(self, "subcommands", None):
            choice = message.split("'")[1] if "'" in message else ""
            close = difflib.get_close_matches(choice, list(self.subcommands), n=1)
            if close:
                message += f". Did you mean {close[0]!r}?"
        flagged = _FLAG_ERROR.fullmatch(message)
        if flagged:
            message = flagged.group(1)
        raise UsageError(f"{self.prog}: {message}\n{help_hint(self.prog)}")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse's, except that arguments nobody takes are refused by the
        subcommand they were given to, which knows its own options."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = getattr(self, "subcommands", {}).get(getattr(parsed, "command", ""))
            (command or self).refuse(extras)
        return parsed

    def refuse(self, extras: Sequence[str]) -> NoReturn:
        """Refuse arguments this parser does not take, suggesting the nearest option."""
        message = f"unrecognized arguments: {' '.join(extras)}"
        flags = [flag for action in self._actions for flag in action.option_strings
                 if flag.startswith("--")]
        for extra in extras:
            if extra.startswith("-"):
                close = difflib.get_close_matches(extra.partition("=")[0], flags, n=1)
                if close:
                    message += f". Did you mean {close[0]}?"
                    break
        self.error(message)


_FLAG_ERROR = re.compile(r"argument [^:]+: (--\S+ .*)", re.DOTALL)
"""argparse's "argument --budget: MESSAGE" for a MESSAGE of ours that names the flag
already (:func:`_checked`): the flag is said once."""


def _checked(flag: str, convert: Callable[[str], T], ok: Callable[[T], bool],
             must: str) -> Callable[[str], T]:
    """An argparse ``type`` that converts a value and checks it, and says what ``flag``
    must be when it fails, in the flag's terms rather than an options field's."""

    def check(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"{flag} must be {must}, not {text!r}")
        return value

    return check


def _seconds(flag: str) -> Callable[[str], float]:
    return _checked(flag, float, lambda s: math.isfinite(s) and s > 0,
                    "a positive number of seconds")


def _count(flag: str, least: int) -> Callable[[str], int]:
    return _checked(flag, int, lambda n: n >= least, f"a whole number >= {least}")


def _integer(flag: str) -> Callable[[str], int]:
    return _checked(flag, int, lambda n: True, "a whole number")


def _port(flag: str) -> Callable[[str], int]:
    return _checked(flag, int, lambda n: 0 <= n <= 65535,
                    "a TCP port, 0 to 65535 (0 picks a free one)")


def _url(flag: str) -> Callable[[str], str]:
    return _checked(flag, str, lambda u: u.lower().startswith(("http://", "https://")),
                    "an http(s) URL, e.g. http://127.0.0.1:9091")


def _label(text: str) -> tuple[str, str]:
    """``--label KEY=VALUE``, checked as the pushed metrics need it."""
    try:
        return parse_label(text)
    except InvalidArgument as error:
        raise argparse.ArgumentTypeError(str(error)) from None


STATEFUL_SHARE_MAX = 0.8
"""The largest ``--stateful-share``: ``chaos.certify.STATEFUL_SHARE_MAX``, which this
module does not import (building the parser loads no runner); a test holds them equal."""


class _Version(argparse.Action):
    """``--version``: memcert's installed version, read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        try:
            version = metadata.version("memcert")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed; pip install -e . records it)"
        sys.stdout.write(f"memcert {version}\n")
        parser.exit()


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
    parser.add_argument("--version", action=_Version, help="print memcert's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    parser.subcommands = commands.choices

    certify = commands.add_parser(
        "certify", help="run the chaos scenarios against a backend and judge it",
        description="Drive a backend with the chaos scenarios, record the history, and "
                    "check every invariant. Writes results.json, history.jsonl and "
                    "junit.xml to --out.",
        epilog="Examples:\n  memcert certify                      # the reference store\n"
               "  memcert certify mypkg.store:factory --budget 120 --seed 7\n"
               "  memcert certify mypkg.store:factory --fail-fast   # stop at the first "
               "violation\n"
               "  memcert certify mypkg.store:factory --skip semantic_normalization\n"
               "  memcert certify --serve --suite network   # network and crash chaos\n"
               "  memcert replay memcert-out         # re-check a saved run",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    certify.add_argument(
        "backend", nargs="?", default=None, metavar="package.module:factory",
        help="a zero-argument callable returning a MemoryBackend; every call must give a "
             "handle onto the same store (default: the reference store on embedded SQLite); "
             "or http://host:port of a service speaking memcert's HTTP protocol")
    run = certify.add_argument_group("the run")
    run.add_argument("--budget", type=_seconds("--budget"),
                     default=_env("MEMCERT_BUDGET") or "60",
                     metavar="SECONDS",
                     help="wall-clock budget for the whole certification [env MEMCERT_BUDGET, "
                          "default 60]")
    _add_plan_options(run)
    run.add_argument("--suite", default=_env("MEMCERT_SUITE", "certify"), metavar="NAME",
                     help="the scenario suite to run (scenarios/suites/NAME.toml) "
                          "[env MEMCERT_SUITE, default certify]")
    _add_skip_option(run)
    run.add_argument("--fail-fast", action="store_true",
                     default=_env("MEMCERT_FAIL_FAST", "") not in ("", "0"),
                     help="stop at the first violation the online checkers count: the run "
                          "fails within seconds instead of its whole budget, and the "
                          "invariants it had no time to exercise stay unknown "
                          "[env MEMCERT_FAIL_FAST=1, default off]")
    output = certify.add_argument_group("output")
    output.add_argument("--out", default=_env("MEMCERT_OUT", "memcert-out"), metavar="DIR",
                        help="folder for results.json, history.jsonl, junit.xml "
                             "[env MEMCERT_OUT, default memcert-out]")
    output.add_argument("--compress", action="store_true",
                        default=_env("MEMCERT_COMPRESS", "") not in ("", "0"),
                        help="record history.jsonl.zst, zstd-compressed, instead of "
                             "history.jsonl; replay reads either [env MEMCERT_COMPRESS=1, "
                             "default off]")
    output.add_argument("--quiet", action="store_true",
                        help="no progress bar; print only the verdict table")
    _add_verbose_option(output)
    _add_metrics_options(certify)
    _add_token_option(certify)
    _add_debug_option(certify)
    _add_managed_options(certify)

    nightly = commands.add_parser(
        "nightly", help="the nightly chaos job: certify, then write a report to read later",
        description="Run a suite (by default the long nightly one) against a backend, write "
                    "the night's results.json, junit.xml, history.jsonl.zst and a self-contained "
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
        help="the backend factory or service URL, as for certify (default: the reference "
             "store)")
    job = nightly.add_argument_group("the run")
    job.add_argument("--suite", default=_env("MEMCERT_NIGHTLY_SUITE", "nightly"), metavar="NAME",
                     help="the scenario suite to run [env MEMCERT_NIGHTLY_SUITE, default "
                          "nightly]")
    job.add_argument("--budget", type=_seconds("--budget"),
                     default=_env("MEMCERT_NIGHTLY_BUDGET") or None,
                     metavar="SECONDS",
                     help="wall-clock budget [env MEMCERT_NIGHTLY_BUDGET, default the suite's "
                          "own budget_s]")
    _add_plan_options(job)
    _add_skip_option(job)
    job.add_argument("--label", action="append", type=_label, default=[], metavar="KEY=VALUE",
                     help="record a label with the night, e.g. backend_version=1.4.2 or "
                          "commit=abc123; repeatable; shown on the report and the index, in "
                          "results.json and on the pushed memcert_run_info as label_KEY "
                          "[env MEMCERT_LABELS=k1=v1,k2=v2; memcert_version and the "
                          "factory's package version are recorded anyway]")
    kept = nightly.add_argument_group("output")
    kept.add_argument("--out", default=_env("MEMCERT_NIGHTLY_OUT", "memcert-nightly"),
                      metavar="DIR",
                      help="the folder that keeps every night, one subfolder each, and "
                           "index.html [env MEMCERT_NIGHTLY_OUT, default memcert-nightly]")
    kept.add_argument("--keep", type=_count("--keep", 0),
                      default=_env("MEMCERT_NIGHTLY_KEEP") or "30",
                      metavar="N",
                      help="nights to keep; older night folders are deleted (0 keeps all) "
                           "[env MEMCERT_NIGHTLY_KEEP, default 30]")
    kept.add_argument("--quiet", action="store_true",
                      help="no progress bar; print only the verdict table")
    _add_verbose_option(kept)
    _add_metrics_options(nightly)
    _add_token_option(nightly)
    _add_debug_option(nightly)
    _add_managed_options(nightly)
    _add_chaos(commands)

    replay = commands.add_parser(
        "replay", help="re-check a saved run without the backend",
        description="Read DIR/history.jsonl (or DIR/history.jsonl.zst) and DIR/results.json, "
                    "check the history again with the same checkers, and print the verdict "
                    "table.")
    replay.add_argument("out", metavar="DIR", help="a folder written by memcert certify")
    _add_serve(commands)
    _add_load(commands)
    _add_audit(commands)
    return parser


AUDIT_LEVELS = ("surface", "lexical", "semantic")
"""The levels ``memcert audit`` keys canonical forms at; semantic loads the MiniLM model
of the ``semantic`` extra."""


def _add_audit(commands: argparse._SubParsersAction[_Parser]) -> None:
    audit = commands.add_parser(
        "audit", help="check what a store holds against the invariants, with no workload",
        description="Read a store's data and report what breaks the invariants: two active\n"
                    "records of one canonical attribute, duplicates by canonical value,\n"
                    "active records of a deleted entity, supersede chains whose causal_seq\n"
                    "goes backwards, records missing a namespace, entity or value (and other\n"
                    "field defects, each named), and exact and canonical duplicates per\n"
                    "namespace. SOURCE is the reference store's export (GET /v1/export of\n"
                    "memcert serve, ReferenceStore.export_jsonl), a JSON Lines dump in the\n"
                    "schema of docs/audit.md, or a backend factory with entities(namespace).\n"
                    "The store is only read. Writes results.json, junit.xml, findings.jsonl\n"
                    "and offending_ids.txt (the record ids a repair script acts on) to --out.",
        epilog="Examples:\n"
               "  memcert audit export.jsonl                       # a file, every namespace\n"
               "  memcert audit dump.jsonl --namespace tenant-a --level surface\n"
               "  memcert audit export.jsonl --level semantic         # needs [semantic]\n"
               "  memcert audit invariants.adapters.langgraph:sqlite_factory --namespace ns\n"
               "  memcert audit mem.jsonl --pushgateway http://pg:9091   # nightly, from cron\n\n"
               "Exit codes: 0 nothing found, 1 a violation or field defect, 2 usage error,\n"
               "3 could not decide (nothing to audit, or no entities(namespace)).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    audit.add_argument(
        "source", metavar="FILE|package.module:factory",
        help="a JSON Lines file (an export or a dump), or a factory whose handles have "
             "entities(namespace)")
    what = audit.add_argument_group("what to audit")
    what.add_argument("--namespace", action="append", metavar="N", default=None,
                      help="audit only this namespace; repeat for more; a factory needs at "
                           "least one [env MEMCERT_AUDIT_NAMESPACES, comma-separated, "
                           "default every namespace of a file]")
    what.add_argument("--level", choices=AUDIT_LEVELS,
                      default=_env("MEMCERT_AUDIT_LEVEL", "lexical"),
                      help="how far memcert's normalizer folds attributes and values into "
                           "canonical forms: surface (case, width, separators), lexical "
                           "(also synonyms) or semantic (also values the MiniLM model of "
                           "the semantic extra reads as one fact) [env MEMCERT_AUDIT_LEVEL, "
                           "default lexical]")
    output = audit.add_argument_group("output")
    output.add_argument("--out", default=_env("MEMCERT_AUDIT_OUT", "memcert-audit"),
                        metavar="DIR",
                        help="folder for results.json, junit.xml, findings.jsonl, "
                             "offending_ids.txt [env MEMCERT_AUDIT_OUT, default memcert-audit]")
    _add_verbose_option(output)
    _add_metrics_options(audit)
    _add_debug_option(audit)


def _add_managed_options(parser: argparse.ArgumentParser) -> None:
    managed = parser.add_argument_group(
        "a service memcert runs",
        "Certify the reference store as its users reach it: memcert starts 'memcert\n"
        "serve' on a free loopback port, certifies it over HTTP and stops it at the end.\n"
        "Because memcert owns the process, the crash_restart scenario can SIGKILL it and\n"
        "restart it on the same database: memcert certify --serve --suite network")
    managed.add_argument(
        "--serve", action="store_true",
        default=_env("MEMCERT_SERVE", "") not in ("", "0", "false", "no"),
        help="start memcert serve and certify it over HTTP; give no backend with it "
             "[env MEMCERT_SERVE=1]")
    managed.add_argument(
        "--db", default=None, metavar="URL",
        help="with --serve: the service's database, a SQLite path or a postgresql:// URL "
             "[env MEMCERT_DB_URL, default a SQLite file in a fresh temporary folder, "
             "removed afterwards]")
    yours = parser.add_argument_group(
        "your service, run by memcert",
        "Crash and stall your own HTTP service: memcert starts CMD itself, in a process\n"
        "group of its own, waits until it answers, and stops it at the end. crash_restart\n"
        "then freezes it with operations in flight, SIGKILLs it and starts CMD again on the\n"
        "same port and data; pause stops it for a moment (SIGSTOP, SIGCONT). {port} in the\n"
        "URL and in CMD is a free port. A [service] table in the suite or scenario file\n"
        "says the same; these flags win.\n"
        "  memcert certify http://127.0.0.1:{port} --service-cmd './serve --port {port}'")
    yours.add_argument("--service-cmd", default=None, metavar="CMD",
                       help="the command that starts your service, split as a shell would "
                            "(no shell runs it); {port} is replaced")
    yours.add_argument("--service-health", default=None, metavar="URL",
                       type=_url("--service-health"),
                       help="with --service-cmd: a URL that answers 2xx once the service is "
                            "ready [default: a read of the contract]")
    yours.add_argument("--service-timeout", default=None, metavar="SECONDS",
                       type=_checked("--service-timeout", float,
                                     lambda t: 0 < t <= 600, "a number of seconds in (0, 600]"),
                       help="with --service-cmd: how long a start or a restart may take "
                            "[default 30]")
    yours.add_argument("--service-cwd", default=None, metavar="DIR",
                       help="with --service-cmd: the folder to run it in [default: here]")


def _add_verbose_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("-v", "--verbose", action="store_true",
                       help="show every kept example of each cause, in full, each rate's "
                            "terms and why a scenario did not run (the default shows one "
                            "example per cause, the easiest to read)")


def _add_debug_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--debug", action="store_true",
        default=_env("MEMCERT_DEBUG", "") not in ("", "0", "false", "no"),
        help="on an error, print the full traceback too, e.g. of a backend module that "
             "fails to import [env MEMCERT_DEBUG=1]")


def _add_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--token", default=_env("MEMCERT_TOKEN") or None, metavar="T",
        help="bearer token for a backend given as an http:// URL; prefer the environment "
             "variable, which other users cannot see in the process list "
             "[env MEMCERT_TOKEN, default none]")


def _add_serve(commands: argparse._SubParsersAction[_Parser]) -> None:
    serve = commands.add_parser(
        "serve", help="serve the reference store over memcert's HTTP protocol",
        description="Serve the reference store as a JSON HTTP service (docs/http-protocol.md): "
                    "the contract operations, search, recall, touch, forget, entities, export and "
                    "import, /metrics, /healthz and /openapi.json. Prints 'memcert: serving "
                    "the reference store at URL' on stderr once it accepts requests; SIGTERM "
                    "stops it gracefully. A --host other than a loopback address needs a "
                    "token.",
        epilog="Examples:\n  memcert serve --port 8765\n"
               "  MEMCERT_TOKEN=s3cret memcert serve --host 0.0.0.0 --db postgresql://db/mem\n"
               "  memcert certify http://127.0.0.1:8765      # certify it over HTTP\n"
               "  memcert serve --openapi > openapi.json    # the API document, offline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--db", default=_env("MEMCERT_DB_URL") or None, metavar="URL",
                       help="a SQLite path or a postgresql:// URL [env MEMCERT_DB_URL, default "
                            "a SQLite file in a fresh temporary folder]")
    serve.add_argument("--host", default=_env("MEMCERT_HOST", "127.0.0.1"), metavar="ADDR",
                       help="address to bind; anything but loopback needs --token "
                            "[env MEMCERT_HOST, default 127.0.0.1]")
    serve.add_argument("--port", type=_port("--port"), default=_env("MEMCERT_PORT") or None,
                       metavar="N",
                       help="port to bind; 0 picks a free one and prints it "
                            "[env MEMCERT_PORT, default 8765]")
    serve.add_argument("--token", default=_env("MEMCERT_TOKEN") or None, metavar="T",
                       help="bearer token every request but /healthz and /openapi.json must "
                            "carry [env MEMCERT_TOKEN, default none: loopback only]")
    serve.add_argument("--handles", type=_count("--handles", 1),
                       default=_env("MEMCERT_SERVE_HANDLES") or None,
                       metavar="N",
                       help="store handles, so requests the store works on at once "
                            "[env MEMCERT_SERVE_HANDLES, default 2 on a SQLite file, which "
                            "takes one writer at a time, and 8 on PostgreSQL]")
    serve.add_argument("--openapi", action="store_true",
                       help="print the OpenAPI document to stdout and exit")


LOAD_MIXES = ("balanced", "read-heavy", "write-heavy", "read-only")
"""The mixes of chaos.load_mix.MIXES, named here so building the parser imports nothing."""


def _add_load(commands: argparse._SubParsersAction[_Parser]) -> None:
    load = commands.add_parser(
        "load", help="load a memory service with Locust while its invariants are checked",
        description="Run Locust users against a service speaking memcert's HTTP protocol:\n"
                    "contract operations (write, delete, restore, read), recorded, and store\n"
                    "operations (search, recall, touch, forget, export). Each Locust process\n"
                    "records its own history; when the run ends they are merged by time and\n"
                    "checked as certify checks. Writes results.json, junit.xml, history.jsonl,\n"
                    "load.json and Locust's locust_*.csv to --out, prints Locust's summary\n"
                    "and the verdict table. Without --host, the reference store is served for\n"
                    "the run. See docs/load.md.",
        epilog="Examples:\n"
               "  memcert load --users 16 --duration 60            # the reference store\n"
               "  memcert load --host http://127.0.0.1:8765 --users 32 --processes 2\n"
               "  memcert load --db postgresql://localhost/mem --mix write-heavy\n"
               "  memcert load --expect-workers 2 --master-bind-host 0.0.0.0 --host URL\n"
               "  memcert load --worker --master-host 10.0.0.5      # on each other machine\n\n"
               "Exit codes: 0 certified, 1 failed, 2 usage error, 3 unknown.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run = load.add_argument_group("the load")
    run.add_argument("--users", type=_count("--users", 1),
                     default=_env("MEMCERT_LOAD_USERS") or "8",
                     metavar="N", help="Locust users, each one request at a time, no think "
                                       "time [env MEMCERT_LOAD_USERS, default 8]")
    run.add_argument("--spawn-rate",
                     type=_checked("--spawn-rate", float, lambda r: math.isfinite(r) and r > 0,
                                   "a positive number of users per second"),
                     default=_env("MEMCERT_LOAD_SPAWN_RATE") or None, metavar="R",
                     help="users started per second [env MEMCERT_LOAD_SPAWN_RATE, default all "
                          "at once]")
    run.add_argument("--duration",
                     type=_checked("--duration", float, lambda s: math.isfinite(s) and s >= 1,
                                   "at least 1 second"),
                     default=_env("MEMCERT_LOAD_DURATION") or "60", metavar="SECONDS",
                     help="how long the users run, in whole seconds; merging and checking come "
                          "after [env MEMCERT_LOAD_DURATION, default 60]")
    run.add_argument("--processes", type=_count("--processes", 0),
                     default=_env("MEMCERT_LOAD_PROCESSES") or "0", metavar="P",
                     help="Locust's distributed mode on this machine: a master and P worker "
                          "processes; 0 runs one Locust process [env MEMCERT_LOAD_PROCESSES, "
                          "default 0]")
    run.add_argument("--mix", choices=LOAD_MIXES, default=_env("MEMCERT_LOAD_MIX", "balanced"),
                     help="the operations' weights [env MEMCERT_LOAD_MIX, default balanced]")
    run.add_argument("--entities", type=_count("--entities", 1),
                     default=_env("MEMCERT_LOAD_ENTITIES") or "8",
                     metavar="N", help="entities per namespace that every user shares "
                                       "[env MEMCERT_LOAD_ENTITIES, default 8]")
    run.add_argument("--seed", type=_integer("--seed"), default=_env("MEMCERT_SEED") or None,
                     metavar="N",
                     help="seed of the users' choices [env MEMCERT_SEED, default random and "
                          "reported]")
    run.add_argument("--level", choices=CLAIMABLE_LEVELS,
                     default=_env("MEMCERT_LEVEL", "lexical"),
                     help="the widest paraphrase written, which the backend claims to "
                          "normalize [env MEMCERT_LEVEL, default lexical]")
    target = load.add_argument_group("the service")
    which = target.add_mutually_exclusive_group()
    which.add_argument("--host", default=_env("MEMCERT_LOAD_HOST") or None, metavar="URL",
                       help="base URL of the service to load [env MEMCERT_LOAD_HOST, default "
                            "none: --serve]")
    which.add_argument("--serve", action="store_true",
                       help="serve the reference store for the run and stop it afterwards "
                            "(the default without --host)")
    target.add_argument("--db", default=None, metavar="URL",
                        help="with --serve: a SQLite path or a postgresql:// URL [default a "
                             "SQLite file in a temporary folder]")
    _add_token_option(load)
    spread = load.add_argument_group("distributed mode across machines")
    spread.add_argument("--expect-workers", type=_count("--expect-workers", 0), default=0,
                        metavar="N",
                        help="also wait for N workers started on other machines with "
                             "'memcert load --worker' [default 0]")
    spread.add_argument("--master-bind-host", default="127.0.0.1", metavar="ADDR",
                        help="address the master listens on for workers [default 127.0.0.1; "
                             "0.0.0.0 for workers on other machines]")
    spread.add_argument("--master-port", type=_port("--master-port"), default=None,
                        metavar="N",
                        help="the master's port: to listen on, or with --worker to connect to "
                             "[default 5557 with --expect-workers or --worker, else a free "
                             "port]")
    spread.add_argument("--worker", action="store_true",
                        help="run as a worker of a master on another machine: everything "
                             "else comes from the master")
    spread.add_argument("--master-host", default=None, metavar="ADDR",
                        help="with --worker: the master's address")
    output = load.add_argument_group("output")
    output.add_argument("--out", default=_env("MEMCERT_LOAD_OUT", "memcert-load"),
                        metavar="DIR",
                        help="folder for results.json, junit.xml, history.jsonl, load.json, "
                             "workers/ and locust_*.csv [env MEMCERT_LOAD_OUT, default "
                             "memcert-load]")
    _add_metrics_options(load)


def _add_metrics_options(parser: argparse.ArgumentParser) -> None:
    metrics = parser.add_argument_group("metrics")
    metrics.add_argument(
        "--metrics-port", type=_port("--metrics-port"),
        default=_env("MEMCERT_METRICS_PORT") or None, metavar="N",
        help="serve Prometheus metrics at http://127.0.0.1:N/metrics while the run "
             "records and is checked (0 picks a free port) [env MEMCERT_METRICS_PORT, "
             "default off]")
    metrics.add_argument(
        "--pushgateway", type=_url("--pushgateway"), default=_env("MEMCERT_PUSHGATEWAY") or None,
        metavar="URL",
        help="push the run's metrics to this Pushgateway when it ends, grouped by job, "
             "backend and suite [env MEMCERT_PUSHGATEWAY, default off]")


def _add_plan_options(group: argparse._ArgumentGroup) -> None:
    """The options that decide the operation plan, shared by certify and nightly."""
    group.add_argument("--seed", type=_integer("--seed"), default=_env("MEMCERT_SEED") or None,
                       metavar="N",
                       help="seed of the operation plan; the same seed gives the same plan "
                            "[env MEMCERT_SEED, default random and reported]")
    group.add_argument("--level", choices=CLAIMABLE_LEVELS,
                       default=_env("MEMCERT_LEVEL", "lexical"),
                       help="the paraphrase level the backend claims to normalize "
                            "[env MEMCERT_LEVEL, default lexical]")
    group.add_argument("--workers", type=_count("--workers", 1),
                       default=_env("MEMCERT_WORKERS") or "8",
                       metavar="N", help="concurrent worker threads [env MEMCERT_WORKERS, "
                                         "default 8]")
    group.add_argument("--processes", type=_count("--processes", 0),
                       default=_env("MEMCERT_PROCESSES") or None, metavar="P",
                       help="by default workers are threads, and the scenarios that need "
                            "worker processes (process_writes, crash_worker) run where a "
                            "probe shows the store is shared across processes; P > 0 "
                            "spreads every scenario's workers over P processes, each opening "
                            "its own handles from the factory; 0 keeps every worker a thread "
                            "and turns those scenarios off [env MEMCERT_PROCESSES]")
    _add_max_value_bytes_option(group)
    group.add_argument("--stateful-share",
                       type=_checked("--stateful-share", float,
                                     lambda f: 0 <= f <= STATEFUL_SHARE_MAX,
                                     f"a fraction from 0 (no stateful phase) to "
                                     f"{STATEFUL_SHARE_MAX}"),
                       default=_env("MEMCERT_STATEFUL_SHARE") or "0.2",
                       metavar="FRACTION",
                       help="share of the budget for the stateful phase, where Hypothesis "
                            "searches for the shortest program that breaks an invariant; 0 "
                            "skips it [env MEMCERT_STATEFUL_SHARE, default 0.2]")


def _add_max_value_bytes_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--max-value-bytes",
                       type=_checked("--max-value-bytes", int,
                                     lambda n: MIN_VALUE_BYTES <= n <= MAX_VALUE_BYTES,
                                     f"a whole number of bytes from {MIN_VALUE_BYTES} to "
                                     f"{MAX_VALUE_BYTES}, the contract's limit"),
                       default=_env("MEMCERT_MAX_VALUE_BYTES") or str(DEFAULT_VALUE_BYTES),
                       metavar="BYTES",
                       help="the longest value the plans write, in bytes of UTF-8; lengths "
                            "are log-uniform from 1 character up to it, and at most the "
                            "contract's 65536 [env MEMCERT_MAX_VALUE_BYTES, default "
                            f"{DEFAULT_VALUE_BYTES}]")


def _add_skip_option(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--skip", action="append", choices=tuple(INVARIANTS), default=None,
                       metavar="INVARIANT",
                       help="check and show this invariant but leave it out of the verdict, "
                            "for a backend that never claimed it (e.g. "
                            "semantic_normalization for a store that keeps every wording); "
                            "repeat for more; one of: " + ", ".join(INVARIANTS) +
                            " [env MEMCERT_SKIP, comma-separated; default none]")


def audit_namespaces(args: argparse.Namespace) -> tuple[str, ...]:
    """``--namespace`` as given, or else ``MEMCERT_AUDIT_NAMESPACES``, each once: the
    command line replaces the environment's list rather than adding to it."""
    names = args.namespace if args.namespace is not None else (
        _env_list("MEMCERT_AUDIT_NAMESPACES") or ())
    return tuple(dict.fromkeys(names))


def skip_names(args: argparse.Namespace) -> tuple[str, ...]:
    """``--skip`` as given, or else ``MEMCERT_SKIP``: the command line replaces the
    environment's list rather than adding to it."""
    if args.skip is not None:
        return tuple(args.skip)
    names = tuple(n.strip() for n in (_env("MEMCERT_SKIP") or "").split(",") if n.strip())
    for name in names:
        if name not in INVARIANTS:
            raise UsageError(f"memcert: MEMCERT_SKIP names {name!r}, which is not an "
                             f"invariant; use some of {', '.join(INVARIANTS)}")
    return names


def _add_chaos(commands: argparse._SubParsersAction[_Parser]) -> None:
    chaos = commands.add_parser(
        "chaos", help="keep a backend under chaos while you watch it; judge it when stopped",
        description="Run the chaos scenarios against a backend round after round, each\n"
                    "round with a fresh seed derived from --seed, until --duration is over\n"
                    "or the process gets Ctrl-C or SIGTERM. Violations are counted while it\n"
                    "runs (serve them with --metrics-port). When it ends, the saved history\n"
                    "is checked as by certify: results.json, junit.xml, history.jsonl.zst and\n"
                    "rounds.jsonl (each round's seed and range of history lines) go to\n"
                    "--out, the verdict table is printed, and the exit code is certify's.",
        epilog="Examples:\n"
               "  memcert chaos --duration 300                # the reference store, 5 min\n"
               "  memcert chaos mypkg.store:factory --metrics-port 9464   # until Ctrl-C\n"
               "  memcert chaos mypkg.store:factory --scenario mixed delete_then_write \\\n"
               "      --duration 3600 --pushgateway http://pushgateway:9091\n"
               "  memcert replay memcert-chaos                # re-check the saved run\n\n"
               "Stopping: Ctrl-C or SIGTERM once lets the operations in flight complete,\n"
               "records them, and judges everything recorded; a second one abandons the\n"
               "check. Exit codes: 0 certified, 1 failed, 2 usage error, 3 unknown.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chaos.add_argument(
        "backend", nargs="?", default=None, action=_Backend, metavar="package.module:factory",
        help="the backend factory, as for certify (default: the reference store)")
    run = chaos.add_argument_group("the run")
    run.add_argument("--duration", type=_seconds("--duration"),
                     default=_env("MEMCERT_CHAOS_DURATION") or None,
                     metavar="SECONDS",
                     help="how long the chaos goes on; checking comes after "
                          "[env MEMCERT_CHAOS_DURATION, default until Ctrl-C or SIGTERM]")
    which = run.add_mutually_exclusive_group()
    which.add_argument("--scenario", nargs="+", action=_Extend, metavar="NAME",
                       default=_env_list("MEMCERT_CHAOS_SCENARIOS"),
                       help="run only these scenarios (names in scenarios/, or .toml paths), "
                            "each with an equal share of a 60 s round; repeatable; a "
                            "backend may follow the names "
                            "[env MEMCERT_CHAOS_SCENARIOS, comma-separated, default the "
                            "suite's]")
    which.add_argument("--suite", action=_Suite, default=_env("MEMCERT_CHAOS_SUITE", "certify"),
                       metavar="NAME",
                       help="the suite each round runs, every scenario within its share of "
                            "the suite's budget_s [env MEMCERT_CHAOS_SUITE, default certify]")
    run.add_argument("--seed", type=_integer("--seed"), default=_env("MEMCERT_SEED") or None,
                     metavar="N",
                     help="seed of the first round's plans (those certify --seed N runs); "
                          "later rounds' seeds derive from it [env MEMCERT_SEED, default "
                          "random and reported]")
    run.add_argument("--level", choices=CLAIMABLE_LEVELS,
                     default=_env("MEMCERT_LEVEL", "lexical"),
                     help="the paraphrase level the backend claims to normalize "
                          "[env MEMCERT_LEVEL, default lexical]")
    run.add_argument("--workers", type=_count("--workers", 1),
                     default=_env("MEMCERT_WORKERS") or "8",
                     metavar="N", help="concurrent worker threads [env MEMCERT_WORKERS, "
                                       "default 8]")
    run.add_argument("--processes", type=_count("--processes", 0),
                     default=_env("MEMCERT_PROCESSES") or None,
                     metavar="P",
                     help="as for certify: by default threads, and process_writes and "
                          "crash_worker in worker processes where the store is shared; P > 0 "
                          "spreads every scenario's workers over P processes (a stop then "
                          "waits for the scenario running); 0 keeps every worker a thread "
                          "[env MEMCERT_PROCESSES]")
    _add_max_value_bytes_option(run)
    output = chaos.add_argument_group("output")
    output.add_argument("--out", default=_env("MEMCERT_CHAOS_OUT", "memcert-chaos"),
                        metavar="DIR",
                        help="folder for results.json, junit.xml, history.jsonl.zst, "
                             "rounds.jsonl [env MEMCERT_CHAOS_OUT, default memcert-chaos]")
    output.add_argument("--quiet", action="store_true",
                        default=_env("MEMCERT_QUIET", "") not in ("", "0", "false", "no"),
                        help="no progress bar; print only the verdict table "
                             "[env MEMCERT_QUIET=1]")
    _add_verbose_option(output)
    _add_metrics_options(chaos)
    _add_token_option(chaos)
    _add_debug_option(chaos)


class _Extend(argparse.Action):
    """``action="extend"``, except that the first use on the command line replaces the
    default taken from the environment instead of adding to it.

    A backend given after the names (``--scenario mixed pkg:factory``) is the backend, not
    a scenario: no scenario name or ``.toml`` path has the form ``module:callable`` or
    ``http://``, and a list of names would otherwise leave no place to put one.
    """

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        given = values if isinstance(values, list) else []
        backends = [value for value in given if looks_like_backend(value)]
        if backends:
            if len(backends) > 1 or namespace.backend is not None:
                named = [namespace.backend, *backends] if namespace.backend else backends
                parser.error(f"one backend at most, but {', '.join(map(repr, named))} were "
                             "given")
            namespace.backend = backends[0]
        names = [value for value in given if value not in backends]
        if not names:
            parser.error(f"{option_string} needs at least one scenario name")
        current = getattr(namespace, self.dest)
        kept = [] if current is self.default else list(current)
        setattr(namespace, self.dest, [*kept, *names])


class _Backend(argparse.Action):
    """The backend positional of a command whose ``--scenario`` list may hold the backend:
    argparse fills an optional positional it found no word for with its default after
    the options, which must not undo the backend taken from that list."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        current = getattr(namespace, self.dest, None)
        if values is None or values == current:
            return
        if current is not None:
            parser.error(f"one backend at most, but {current!r}, {values!r} were given")
        setattr(namespace, self.dest, values)


_BACKEND_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*|https?://\S+", re.IGNORECASE)


def looks_like_backend(value: str) -> bool:
    """Whether a command-line word is a backend (``package.module:callable`` or an
    ``http(s)://`` URL) rather than a scenario name or path."""
    return _BACKEND_SPEC.fullmatch(value) is not None


class _Suite(argparse.Action):
    """A suite given on the command line outranks scenarios named in the environment."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        namespace.scenario = None
        setattr(namespace, self.dest, values)


def _env_list(name: str) -> list[str] | None:
    value = os.environ.get(name, "")
    names = [part for part in value.replace(",", " ").split() if part]
    return names or None
