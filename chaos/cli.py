"""``memcert``'s entry point: parse, build, run, report, each its own function.

The exit code is chosen in one place, :func:`main`: 0 certified, 1 failed, 2 usage
error (including a backend factory that does not import or raises), 3 unknown.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invariants.errors import MemcertError
from scenarios.service_plan import DEFAULT_START_TIMEOUT_S, Service

from .cli_parser import (
    UsageError,
    audit_namespaces,
    build_parser,
    help_hint,
    looks_like_backend,
    skip_names,
)
from .report import Report, render_table

if TYPE_CHECKING:
    from invariants.backend import BackendFactory

    from .certify import Progress
    from .metrics import MetricsOptions

__all__ = ["main"]

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    try:
        _check_out(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "load":
            return _load(args)
        if args.command == "audit":
            return _audit(args)
        report, saved = _dispatch(args)
    except (UsageError, MemcertError) as error:
        if getattr(args, "debug", False):
            traceback.print_exception(error, file=sys.stderr)
        print(error if isinstance(error, UsageError) else f"memcert: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("memcert: interrupted", file=sys.stderr)
        return 130
    print(render_table(report, verbose=getattr(args, "verbose", False)))
    for line in saved:
        print(line)
    return report.exit_code


OUT_COMMANDS = ("certify", "nightly", "chaos", "load", "audit")
"""The commands whose ``--out`` names a folder they write."""


def _check_out(args: argparse.Namespace) -> None:
    """Refuse an ``--out`` that is a file or cannot be written, before anything runs, so
    such a run writes nothing and exits 2 (a usage error), not 1 (a failed backend)."""
    if args.command not in OUT_COMMANDS or getattr(args, "worker", False):
        return
    out = Path(args.out)
    command = f"memcert {args.command}"
    fix = f"give a folder, which is created if missing\n{help_hint(command)}"
    if out.exists() and not out.is_dir():
        raise UsageError(f"{command}: --out {out} is a file, not a folder; {fix}")
    existing = out.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{command}: --out {out} cannot be created, since {existing} is a "
                         f"file; {fix}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{command}: --out {out} cannot be written: no permission to write "
                         f"in {existing}; {fix}")


def _saved(label: str, path: Path) -> str:
    """Where a run put its files, as a link a terminal opens."""
    return f"{label}: {path.resolve().as_uri()}"


def _replay_progress() -> Callable[[int, int], None] | None:
    """A line on a terminal's stderr, redrawn as the history is checked; None (silence)
    when stderr is not a terminal, as for the other commands' progress bars in logs."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        share = f" of {total:,} ({100 * done // total}%)" if total >= done else ""
        print(f"\rmemcert replay: {done:,}{share} entries checked", end="", file=sys.stderr,
              flush=True)

    return show


def _dispatch(args: argparse.Namespace) -> tuple[Report, list[str]]:
    """The command's report, and the lines that say where it was saved."""
    from .certify import CertifyOptions, certify, replay

    _share_token(args)
    if args.command == "replay":
        from invariants.history import find_history

        out = Path(args.out)
        if find_history(out) is None or not (out / "results.json").is_file():
            raise UsageError(f"memcert replay: {out} holds no history.jsonl (or "
                             "history.jsonl.zst) and results.json; pass the --out folder of "
                             "a memcert certify run")
        show = _replay_progress()
        try:
            return replay(out, progress=show), []
        finally:
            if show is not None:
                print("\r\033[K", end="", file=sys.stderr, flush=True)  # the line goes
    progress = None
    if not args.quiet:
        from .progress import TerminalProgress

        progress = TerminalProgress()
    metrics = _metrics_options(args)
    if args.command == "chaos":
        return _chaos(args, progress, metrics), [_saved("output", Path(args.out))]
    if args.command == "nightly":
        from .nightly import NightlyOptions, nightly
        from .nightly_labels import parse_labels_env

        labels = {**parse_labels_env(os.environ.get("MEMCERT_LABELS", "")), **dict(args.label)}
        with _backend(args) as backend:
            night = nightly(backend, NightlyOptions(
                out=Path(args.out), suite=args.suite, budget_s=args.budget, seed=args.seed,
                level=args.level, workers=args.workers, processes=args.processes,
                keep=args.keep, stateful_share=args.stateful_share, skip=skip_names(args),
                labels=labels, max_value_bytes=args.max_value_bytes),
                progress=progress, metrics=metrics)
        return night.report, [_saved("report", night.folder / "report.html"),
                              _saved("index", night.index)]
    options = CertifyOptions(budget_s=args.budget, seed=args.seed, level=args.level,
                             workers=args.workers, out=Path(args.out), suite=args.suite,
                             processes=args.processes, stateful_share=args.stateful_share,
                             skip=skip_names(args), fail_fast=args.fail_fast,
                             compress=args.compress, max_value_bytes=args.max_value_bytes)
    with _backend(args) as backend:
        return (certify(backend, options, progress=progress, metrics=metrics),
                [_saved("output", options.out)])


@contextmanager
def _backend(args: argparse.Namespace) -> Iterator[BackendFactory | str | None]:
    """The backend argument as given, or with ``--serve`` a service memcert starts for
    the run (and stops after it)."""
    service = _service_spec(args)
    if service is not None:
        if args.serve:
            raise UsageError(f"memcert {args.command}: --service-cmd starts your own service, "
                             "--serve the reference store; give one of the two")
        if args.backend is None:
            raise UsageError(f"memcert {args.command}: --service-cmd needs the URL your "
                             "service answers at, e.g. http://127.0.0.1:{port}")
        from .user_service import controlled_service

        with controlled_service(service, args.backend) as started:
            print(f"memcert: started your service ({service.command}) at {started.url} for "
                  "this run", file=sys.stderr)
            yield started
        return
    if not args.serve:
        if args.db is not None:
            raise UsageError(f"memcert {args.command}: --db names the database of the service "
                             "--serve starts; add --serve (the in-process reference store "
                             "reads MEMCERT_DB_URL)")
        yield args.backend
        return
    if args.backend is not None:
        raise UsageError(f"memcert {args.command}: --serve certifies the reference store "
                         f"served by memcert, so it takes no backend, but {args.backend!r} "
                         "was given; to certify your own service, give its URL instead")
    from .service import managed_service, require_serve_extra

    require_serve_extra(f"memcert {args.command} --serve")
    with managed_service(args.db or os.environ.get("MEMCERT_DB_URL") or None) as served:
        print(f"memcert: serving the reference store at {served.url} for this run",
              file=sys.stderr)
        yield served


def _service_spec(args: argparse.Namespace) -> Service | None:
    """How to start the user's service: the --service-* flags, else the suite's (or one
    of its scenarios') [service] table; None when neither says."""
    flags = ("service_health", "service_timeout", "service_cwd")
    command = getattr(args, "service_cmd", None)
    if command is None:
        given = [f"--{name.replace('_', '-')}" for name in flags if getattr(args, name, None)]
        if given:
            raise UsageError(f"memcert {args.command}: {given[0]} goes with --service-cmd, "
                             "which was not given")
        suite = getattr(args, "suite", None)
        if suite is None or not str(args.backend or "").lower().startswith("http"):
            return None
        from scenarios import load_suite

        return load_suite(suite).service
    if not command.strip():
        raise UsageError(f"memcert {args.command}: --service-cmd is empty; give the command "
                         "that starts your service, e.g. './serve --port {port}'")
    return Service(command=command, health_url=args.service_health or "",
                   start_timeout_s=args.service_timeout or DEFAULT_START_TIMEOUT_S,
                   cwd=str(Path(args.service_cwd).resolve()) if args.service_cwd else "")


def _chaos(args: argparse.Namespace, progress: Progress | None,
           metrics: MetricsOptions | None) -> Report:
    """Until --duration is over, or the first SIGINT or SIGTERM: a signal stops the
    chaos gracefully and the run is judged; a second one interrupts the check."""
    import threading

    from .chaos_run import ChaosOptions, run_chaos, stop_on_signals

    options = ChaosOptions(
        duration_s=args.duration, suite=args.suite, scenarios=tuple(args.scenario or ()),
        seed=args.seed, level=args.level, workers=args.workers, processes=args.processes,
        out=Path(args.out), max_value_bytes=args.max_value_bytes)
    stop = threading.Event()
    with stop_on_signals(stop):
        return run_chaos(args.backend, options, progress=progress, metrics=metrics, stop=stop)


def _share_token(args: argparse.Namespace) -> None:
    """Put ``--token`` where the HTTP adapter's factory, in every worker process, reads it."""
    token = getattr(args, "token", None)
    if token:
        from invariants.factory import TOKEN_ENV

        os.environ[TOKEN_ENV] = token


def _serve(args: argparse.Namespace) -> int:
    """``memcert serve``: runs until SIGTERM or Ctrl-C, then exits 0. The service's
    modules (Starlette, uvicorn) are imported here, and only here, once the ``serve``
    extra is known to be installed."""
    from .service import require_serve_extra

    require_serve_extra("memcert serve")
    from reference_store.service import ServiceOptions, openapi_text, serve

    if args.openapi:
        sys.stdout.write(openapi_text())
        return 0
    given = {"port": args.port, "handles": args.handles}
    options = ServiceOptions(db_url=args.db, host=args.host, token=args.token,
                             **{name: value for name, value in given.items() if value is not None})
    serve(options, announce=_announce_service)
    print("memcert: stopped", file=sys.stderr, flush=True)
    return 0


def _load(args: argparse.Namespace) -> int:
    """``memcert load``: Locust's summary, then the verdict table and certify's exit code."""
    from .load import LoadOptions, describe, run_load, run_worker

    default_port = 5557
    if args.worker:
        if not args.master_host:
            raise UsageError("memcert load --worker needs --master-host ADDR, the address of "
                             "the machine running 'memcert load --expect-workers N'")
        return run_worker(args.master_host, args.master_port or default_port, args.token)
    if args.db is not None and args.host is not None:
        raise UsageError("memcert load: --db is for the store memcert serves (--serve); "
                         "with --host the service has its own database")
    if args.host is None:
        from .service import require_serve_extra

        require_serve_extra("memcert load --serve")
    port = args.master_port
    if port is None:
        port = default_port if args.expect_workers else 0
    options = LoadOptions(
        users=args.users, spawn_rate=args.spawn_rate, duration_s=args.duration,
        processes=args.processes, expect_workers=args.expect_workers, host=args.host,
        db=args.db, token=args.token, out=Path(args.out), mix=args.mix,
        entities=args.entities, level=args.level, seed=args.seed,
        master_bind_host=args.master_bind_host, master_port=port)
    result = run_load(options, metrics=_metrics_options(args))
    for line in describe(result):
        print(line)
    print(render_table(result.report))
    print(_saved("output", options.out))
    return result.report.exit_code


def _audit(args: argparse.Namespace) -> int:
    """``memcert audit``: the verdict table, the audit's counts and certify's exit code;
    3 when the source cannot be audited at all."""
    from .audit import AuditOptions, Unauditable, audit_factory, audit_items, render_audit
    from .audit_input import read_file

    namespaces = audit_namespaces(args)
    source = args.source
    path = Path(source)
    as_file = path.exists() or not looks_like_backend(source)
    command = " ".join(["memcert audit", shlex.quote(source), *(
        f"--namespace {shlex.quote(n)}" for n in namespaces), f"--level {args.level}"])
    options = AuditOptions(level=args.level, namespaces=namespaces, out=Path(args.out),
                           command=command, metrics=_metrics_options(args),
                           **_audit_embedder(args.level))
    try:
        if as_file:
            _check_readable(path)
            result = audit_items(read_file(path), source, options)
        else:
            if not namespaces:
                raise UsageError("memcert audit: a factory is audited one namespace at a time; "
                                 "give --namespace N (repeat for more)\n"
                                 + help_hint("memcert audit"))
            from invariants.factory import load_factory

            result = audit_factory(load_factory(source), source, options)
    except Unauditable as error:
        print(error, file=sys.stderr)
        return 3
    print(render_audit(result, verbose=args.verbose))
    print(_saved("output", options.out))
    return result.exit_code


def _audit_embedder(level: str) -> dict[str, Any]:
    """The model and threshold ``--level semantic`` audits with, or a usage error naming
    the flag when the semantic extra is not installed."""
    if level != "semantic":
        return {}
    from reference_store.normalize import minilm

    try:
        return {"embedder": minilm.load(), "threshold": minilm.DEFAULT_THRESHOLD}
    except ImportError as error:
        raise UsageError(f"memcert audit: --level semantic needs a model: {error}\n"
                         + help_hint("memcert audit")) from None


def _check_readable(path: Path) -> None:
    """A file the audit can open, or a usage error naming it, before anything is written."""
    hint = help_hint("memcert audit")
    if not path.exists():
        raise UsageError(f"memcert audit: {path} does not exist; give a JSON Lines file or a "
                         f"package.module:factory\n{hint}")
    if path.is_dir():
        raise UsageError(f"memcert audit: {path} is a folder; give a JSON Lines file\n{hint}")
    try:
        with path.open("rb"):
            pass
    except OSError as error:
        raise UsageError(f"memcert audit: {path} cannot be read: {error.strerror}\n"
                         f"{hint}") from None


def _announce_service(url: str, db: str) -> None:
    print(f"memcert: database {db}", file=sys.stderr)
    print(f"memcert: serving the reference store at {url}", file=sys.stderr, flush=True)


def _metrics_options(args: argparse.Namespace) -> MetricsOptions | None:
    if args.metrics_port is None and args.pushgateway is None:
        return None
    from .metrics import MetricsOptions

    return MetricsOptions(port=args.metrics_port, pushgateway=args.pushgateway,
                          on_serving=_announce)


def _announce(port: int) -> None:
    print(f"memcert: serving metrics at http://127.0.0.1:{port}/metrics", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
