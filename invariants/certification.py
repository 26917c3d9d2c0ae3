"""The Python API of certification, as a facade over the chaos layer.

``invariants`` is the bottom layer and must import neither the runner nor a database,
so the implementation is imported only when :func:`certify` is called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .backend import BackendFactory

if TYPE_CHECKING:
    from chaos.report import Report

__all__ = ["certify"]


def certify(factory: BackendFactory | str | None = None, **options: Any) -> Report:
    """Certify a backend and return the report (also written to ``out``).

    ``factory`` is a zero-argument callable, a ``package.module:callable`` spec, or None
    for the reference store. ``options`` are those of ``memcert certify``: ``budget_s``,
    ``seed``, ``level``, ``workers``, ``processes``, ``stateful_share``, ``out``,
    ``suite``, ``skip`` (invariants to check and show but leave out of the verdict) and
    ``fail_fast`` (stop at the first violation counted online).
    """
    from chaos.certify import CertifyOptions
    from chaos.certify import certify as run

    if "out" in options:
        options["out"] = Path(options["out"])
    return run(factory, CertifyOptions(**options))
