"""The Python API of certification: :func:`certify` and :func:`replay`.

This is the facade's one home. It sits in the top layer, above ``chaos``, which does the
work, so the implementation is imported when a function is called: ``import memcert``
starts no runner. ``invariants.certify`` is a late-bound alias of :func:`certify`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invariants.backend import BackendFactory
from invariants.errors import InvalidArgument
from invariants.factory import ResolvedBackend

if TYPE_CHECKING:
    from chaos.report import Report

__all__ = ["certify", "replay"]


def certify(
    factory: BackendFactory | str | ResolvedBackend | None = None, **options: Any
) -> Report:
    """Certify a backend and return the report (also written to ``out``).

    ``factory`` is a zero-argument callable, a ``package.module:callable`` or
    ``http://`` spec, or None for the reference store. ``options`` are those of
    ``memcert certify``, the fields of :class:`chaos.certify.CertifyOptions`:
    ``budget_s``, ``seed``, ``level``, ``workers``, ``processes``, ``stateful_share``,
    ``out``, ``suite``, ``skip`` (invariants to check and show but leave out of the
    verdict), ``fail_fast`` (stop at the first violation counted online) and
    ``max_value_bytes`` (the longest value the plans write, at most 64 KiB). A name
    that is none of these is an :class:`~invariants.errors.InvalidArgument`.
    """
    from chaos.certify import CertifyOptions
    from chaos.certify import certify as run

    known = [field.name for field in dataclasses.fields(CertifyOptions)]
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InvalidArgument(
                f"certify() got an unknown option {name!r}; {hint}"
                f"the options are {', '.join(known)}"
            )
    if "out" in options:
        options["out"] = Path(options["out"])
    return run(factory, CertifyOptions(**options))


def replay(out: str | os.PathLike[str]) -> Report:
    """Re-check the run saved in the folder ``out`` (its ``history.jsonl`` or
    ``history.jsonl.zst``, and ``results.json``) with today's checkers, without the
    backend, as ``memcert replay`` does."""
    from chaos.certify import replay as run

    return run(Path(out))
