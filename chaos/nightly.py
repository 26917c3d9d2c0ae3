"""``memcert nightly``: the long chaos run, and the pages a person opens in the morning.

Each night gets a folder of its own under ``--out``, named by its UTC start time
(``2026-11-29T020000Z``), holding what ``memcert certify --compress`` writes
(``results.json``, ``junit.xml``, ``history.jsonl.zst``) and ``report.html``. Thirty nights
are kept by default, so each night's history is compressed. ``index.html``, in the
parent folder and in every night's folder, links the nights kept there, opens with what
changed since the previous night and charts each invariant's rate across them. Every
page is one self-contained file, so it opens offline, from a mail attachment or an
artifact store.

This module runs the night and keeps the folders; the night's labels come from
:mod:`chaos.nightly_labels`, its page from :mod:`chaos.nightly_report` (the timeline
from :mod:`chaos.nightly_timeline`, the charts from :mod:`chaos.nightly_charts`), and
the index from :mod:`chaos.nightly_index` (what changed from
:mod:`chaos.nightly_changes`). The verdict and the exit code are certify's; results.json
is written again once the report is, with the night's labels and the report's time
among its ``phases``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from invariants.errors import InvalidArgument
from invariants.factory import REFERENCE
from invariants.history import Paraphrase, find_history
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes
from scenarios import load_suite

from .certify import STATEFUL_SHARE, CertifyOptions, Progress, certify
from .metrics import MetricsOptions
from .nightly_index import NIGHT_FORMAT, render_index
from .nightly_labels import check_labels, night_labels
from .nightly_report import render_report, samples
from .nightly_timeline import TIMELINE_BINS, Witnesses
from .report import Report

__all__ = ["TIMELINE_BINS", "NightlyOptions", "NightlyResult", "nightly", "render_index",
           "render_report"]

_NIGHT_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{6}Z(-\d+)?$")


@dataclass(frozen=True)
class NightlyOptions:
    """What a nightly run does and where it keeps its nights.

    ``budget_s`` None takes the suite's own ``budget_s``. ``keep`` bounds the nights
    kept under ``out`` (the oldest go first); 0 keeps every night.
    """

    out: Path = Path("memcert-nightly")
    suite: str = "nightly"
    budget_s: float | None = None
    seed: int | None = None
    level: Paraphrase = "lexical"
    workers: int = 8
    processes: int | None = None
    keep: int = 30
    stateful_share: float = STATEFUL_SHARE
    skip: tuple[str, ...] = ()
    compress: bool = True
    """Record ``history.jsonl.zst`` (the default) rather than ``history.jsonl``."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """The night's own labels (``--label``, ``MEMCERT_LABELS``); the versions found are
    added to them (:func:`chaos.nightly_labels.night_labels`)."""
    max_value_bytes: int = DEFAULT_VALUE_BYTES
    """The longest value the plans write, in bytes of UTF-8 (at most the contract's 64 KiB)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", check_labels(self.labels, source="labels"))
        check_max_value_bytes(self.max_value_bytes, "max_value_bytes")
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 0:
            raise InvalidArgument(f"keep={self.keep!r} must be an int >= 0 (0 keeps every "
                                  "night).")


@dataclass(frozen=True)
class NightlyResult:
    """The night's report, its folder, and the index that links it."""

    report: Report
    folder: Path
    index: Path
    removed: tuple[Path, ...] = field(default=())


def nightly(factory: Any = None, options: NightlyOptions | None = None, *,
            progress: Progress | None = None, metrics: MetricsOptions | None = None,
            started: datetime | None = None) -> NightlyResult:
    """Run the nightly suite against ``factory`` (as for :func:`certify`) and write the
    night's folder, ``report.html`` and the index."""
    options = options or NightlyOptions()
    suite = load_suite(options.suite)
    started = started or datetime.now(UTC)
    labels = night_labels(factory, options.labels.items())
    folder = _new_folder(options.out, started)
    registry = (metrics.registry if metrics is not None and metrics.registry is not None
                else CollectorRegistry())
    metrics = (replace(metrics, registry=registry, labels={**metrics.labels, **labels})
               if metrics else MetricsOptions(registry=registry, labels=labels))
    witnesses = Witnesses()
    report = certify(factory, CertifyOptions(
        budget_s=options.budget_s or suite.budget_s, seed=options.seed, level=options.level,
        workers=options.workers, out=folder, suite=options.suite,
        processes=options.processes, stateful_share=options.stateful_share,
        skip=options.skip, compress=options.compress,
        max_value_bytes=options.max_value_bytes), progress=progress, metrics=metrics,
        on_violation=witnesses.violation)
    history = find_history(folder)
    if history is None:
        raise FileNotFoundError(f"certify left no history in {folder}")
    rendering = time.monotonic()
    report = replace(report, labels=labels)
    page = render_report(report, suite=options.suite, started=started, history=history,
                         workers=options.workers, samples=samples(registry),
                         ran=_ran(factory, options, report.seed),
                         stateful_share=options.stateful_share, witnesses=witnesses)
    (folder / "report.html").write_text(page, encoding="utf-8")
    report = replace(report, phases={**report.phases, "report": time.monotonic() - rendering})
    report.write(folder)
    removed = _prune(options.out, options.keep, keep_also=folder)
    nights = _nights(options.out)
    index = options.out / "index.html"
    kept_bytes = sum(_size_on_disk(options.out / name) for name, _ in nights)
    index.write_text(render_index(nights, prefix="", history_bytes=kept_bytes),
                     encoding="utf-8")
    (folder / "index.html").write_text(
        render_index(nights, prefix="../", history_bytes=kept_bytes), encoding="utf-8")
    return NightlyResult(report, folder, index, removed)


def _ran(factory: Any, options: NightlyOptions, seed: int) -> str:
    """The nightly command these options make, with the seed the run drew and the labels
    given (the versions found are not flags)."""
    parts = ["memcert", "nightly"]
    if isinstance(factory, str) and factory != REFERENCE:
        parts.append(factory)
    elif factory is not None and not isinstance(factory, str):
        parts.append(getattr(factory, "name", None) or
                     f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__name__', '?')}")
    parts += ["--suite", options.suite, "--seed", str(seed), "--level", options.level,
              "--workers", str(options.workers), "--out", str(options.out)]
    if options.budget_s:
        parts += ["--budget", f"{options.budget_s:g}"]
    for name in options.skip:
        parts += ["--skip", name]
    for key, value in options.labels.items():
        parts += ["--label", f"{key}={value}"]
    return shlex.join(parts)


def _new_folder(out: Path, started: datetime) -> Path:
    base = started.astimezone(UTC).strftime(NIGHT_FORMAT)
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        folder = out / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise InvalidArgument(f"{out} already holds 999 nights named {base}; pick another --out")


def _nights(out: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every night kept under ``out``, oldest first, with its results.json."""
    nights = []
    for folder in sorted(out.iterdir()):
        results = folder / "results.json"
        if _NIGHT_NAME.match(folder.name) and results.is_file():
            try:
                nights.append((folder.name, json.loads(results.read_text(encoding="utf-8"))))
            except (OSError, ValueError):
                continue
    return nights


def _size_on_disk(folder: Path) -> int:
    """The bytes of the history kept in a night's folder; 0 if it has none."""
    history = find_history(folder)
    return history.stat().st_size if history is not None else 0


def _prune(out: Path, keep: int, *, keep_also: Path) -> tuple[Path, ...]:
    """Delete the oldest night folders beyond ``keep``; only folders this job made."""
    if keep == 0:
        return ()
    folders = [out / name for name, _ in _nights(out) if out / name != keep_also]
    excess = folders[: max(0, len(folders) - (keep - 1))]
    for folder in excess:
        shutil.rmtree(folder)
    return tuple(excess)
