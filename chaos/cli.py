"""``memcert``'s entry point: parse, build, run, report, each its own function.

The exit code is chosen in one place, :func:`main`: 0 certified, 1 failed, 2 usage
error (including a backend factory that does not import or raises), 3 unknown.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from invariants.errors import MemcertError

from .cli_parser import UsageError, build_parser
from .report import Report, render_table

__all__ = ["main"]

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        report = _dispatch(args)
    except UsageError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    except MemcertError as error:
        print(f"memcert: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("memcert: interrupted", file=sys.stderr)
        return 130
    print(render_table(report))
    return report.exit_code


def _dispatch(args: argparse.Namespace) -> Report:
    from .certify import CertifyOptions, certify, replay

    if args.command == "replay":
        out = Path(args.out)
        if not (out / "history.jsonl").is_file() or not (out / "results.json").is_file():
            raise UsageError(f"memcert replay: {out} holds no history.jsonl and results.json; "
                             "pass the --out folder of a memcert certify run")
        return replay(out)
    options = CertifyOptions(budget_s=args.budget, seed=args.seed, level=args.level,
                             workers=args.workers, out=Path(args.out), suite=args.suite,
                             processes=args.processes)
    progress = None
    if not args.quiet:
        from .progress import TerminalProgress

        progress = TerminalProgress()
    return certify(args.backend, options, progress=progress)


if __name__ == "__main__":
    sys.exit(main())
