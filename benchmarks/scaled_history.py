"""A real-shaped history of any length: a real certify run's, copied into fresh namespaces.

A synthetic history (as in :mod:`benchmarks.checkers`) has the mix of a run but not its
texture: its scenarios, their hot keys, the reference store's actual answers. This takes
the history of one short ``memcert certify`` of the reference store on SQLite and repeats
it. Copy ``k`` renames every namespace ``ns`` to ``ns~k`` and every op_id ``id`` to
``id~k``; values, attributes, meta, causal seqs, results and worker ids stay. The copies
follow one another: indices run on, and each copy's times start just after the previous
copy's end. No copy can see another (their namespaces are disjoint and none overlaps the
next in time), so the scaled history is valid exactly when the run's is, and every count
the checkers make is the sum of the copies' counts but isolation's: its checks are reads
of an entity id that another namespace holds too, and the copies' namespaces all hold the
same ids, so it checks more reads than the copies would apart.

To reach an exact number of operations, the last copy or two are *prefixes* of the run,
cut where no operation was in flight: everything before such a point completed before
anything after it began, so the prefix is a history the run could have stopped at, with
every operation completed. The run's first such point can come a few thousand operations
in, so a size below that is not reachable.

The scaled file is written by the project's own :class:`HistoryRecorder`, with a clock
that replays the shifted times, as ``history.jsonl.zst`` (zstd frames at the recorder's
flush interval, as ``memcert nightly`` writes), and never held: the recorder keeps only
the operations in flight. The plain ``history.jsonl`` is the same file decompressed,
byte for byte what a plain recorder writes; above a size it is only counted, not written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

import zstandard

from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.history import Entry, History, HistoryRecorder, Payload, Read, read_history

COMPRESSED = "history.jsonl.zst"
PLAIN = "history.jsonl"
RESULTS = "results.json"
MANIFEST = "manifest.json"
GAP_NS = 1_000_000
"""Time between one copy's last entry and the next copy's first."""
FLUSH_INTERVAL_S = 0.1
"""The recorder's flush interval, as ``memcert nightly`` records: one zstd frame each."""
VERDICT_EXITS = (0, 1, 3)
"""certify's exit codes with a verdict (certified, failed, unknown): each is a history."""
_BLOCK = 1 << 20

Say = Callable[[str], None]


def say_to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def real_run(folder: Path, *, budget_s: float, seed: int, say: Say = say_to_stderr) -> Path:
    """The folder of a ``memcert certify`` of the reference store on a fresh SQLite file,
    run now unless ``folder`` already holds one."""
    if (folder / RESULTS).is_file() and (folder / PLAIN).is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    say(f"recording a real run: memcert certify --budget {budget_s:g} --seed {seed} "
        "--stateful-share 0")
    # The defaults, whatever this shell's MEMCERT_ settings say, on a file of its own.
    env = {name: value for name, value in os.environ.items() if not name.startswith("MEMCERT_")}
    env["MEMCERT_DB_URL"] = f"sqlite:///{folder / 'memcert.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "certify", "--budget", f"{budget_s:g}", "--seed",
         str(seed), "--stateful-share", "0", "--quiet", "--out", str(folder)],
        env=env, stdout=subprocess.DEVNULL, cwd=Path(__file__).resolve().parents[1], check=False)
    if done.returncode not in VERDICT_EXITS:
        raise RuntimeError(f"memcert certify exited {done.returncode}, with no verdict; its "
                           "error is above")
    (folder / "memcert.db").unlink(missing_ok=True)
    return folder


def quiescent_points(history: History) -> dict[int, int]:
    """Operations invoked before each point where none is in flight -> the number of
    entries before that point; the whole history is one such point if it ends complete."""
    in_flight = 0
    invoked = 0
    points: dict[int, int] = {}
    for position, entry in enumerate(history):
        if entry.type == "invoke":
            in_flight += 1
            invoked += 1
        else:
            in_flight -= 1
        if not in_flight:
            points[invoked] = position + 1
    return points


MAX_PREFIXES = 4
"""Prefixes at most in a plan: each one is a copy cut short, which the run's shape is not."""


def plan_copies(points: dict[int, int], ops: int) -> list[int]:
    """Operations of each copy, in order, summing to ``ops``: as many whole runs as can
    be, then up to :data:`MAX_PREFIXES` prefixes ending at quiescent points (as few, and
    as long, as reach ``ops``). Raises ValueError if ``ops`` is not reachable."""
    whole = max(points)
    lengths = sorted(points, reverse=True)
    full, rest = divmod(ops, whole)
    if not rest:
        return [whole] * full
    last: dict[int, int] = {0: 0}  # a sum of j prefixes -> the last of them
    chains: list[dict[int, int]] = [last]
    for count in range(1, MAX_PREFIXES + 1):
        reach: dict[int, int] = {}
        for total in chains[-1]:
            for length in lengths:
                reach.setdefault(total + length, length)
        chains.append(reach)
        for wholes in range(full, -1, -1):
            target = ops - wholes * whole
            if target > count * whole:
                break
            if target in reach:
                parts = []
                for j in range(count, 0, -1):
                    parts.append(chains[j][target])
                    target -= parts[-1]
                return [whole] * wholes + parts
    raise ValueError(f"{ops:,} operations cannot be made of whole copies of the run and "
                     f"{MAX_PREFIXES} prefixes of it that end with nothing in flight (the "
                     f"shortest is {min(points):,} operations); ask for a few more")


@dataclass(frozen=True)
class Scaled:
    """What was written for one size; ``plain_bytes`` counts the plain form even when it
    was not written."""

    ops: int
    entries: int
    copies: int
    namespaces: int
    zst_bytes: int
    plain_bytes: int
    plain_written: bool
    generate_s: float
    source_ops: int
    source: str
    """Which real run's history was copied (:func:`identity`): a new run makes it stale."""


def identity(path: Path) -> str:
    """A file's size and modification time, as the name of one recording of it."""
    stat = path.stat()
    return f"{stat.st_size}-{stat.st_mtime_ns}"


class _Clock:
    """The recorder's clock: the time the copier set for the entry being recorded."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def renamed(op: Payload, suffix: str) -> Payload:
    """``op`` in namespace ``ns + suffix``, its op_id (if it has one) ended the same way."""
    ns = op.namespace + suffix
    if type(op) is Write:
        return Write(ns, op.entity_id, op.attribute, op.value, op.causal_seq,
                     op.op_id + suffix, op.source)
    if type(op) is Read:
        return Read(ns, op.entity_id)
    if type(op) is Delete:
        return Delete(ns, op.entity_id, op.causal_seq, op.op_id + suffix, op.reason)
    assert type(op) is Restore
    return Restore(ns, op.entity_id, op.causal_seq, op.op_id + suffix)


def write_scaled(source: History, ops: int, path: Path, *, say: Say = say_to_stderr,
                 name: str = "") -> Scaled:
    """Write ``ops`` operations of copies of ``source`` (``name``: its :func:`identity`) to
    ``path`` (``.zst``), streaming."""
    points = quiescent_points(source)
    plan = plan_copies(points, ops)
    entries = source.entries
    t0 = entries[0].time_ns
    clock = _Clock()
    offset = t0
    namespaces: set[str] = set()
    start = time.perf_counter()
    done = 0
    step = max(ops // 10, 1)
    shown = step
    with HistoryRecorder(path, keep=False, clock=clock, flush_interval_s=FLUSH_INTERVAL_S,
                         compress=True) as recorder:
        invoke, ok, fail, info = recorder.invoke, recorder.ok, recorder.fail, recorder.info
        for k, copy_ops in enumerate(plan):
            suffix = f"~{k}"
            open_ops: dict[int, Entry] = {}
            for entry in entries[:points[copy_ops]]:
                clock.now = offset + entry.time_ns - t0
                etype = entry.type
                if etype == "invoke":
                    op = renamed(entry.op, suffix)
                    namespaces.add(op.namespace)
                    open_ops[entry.worker] = invoke(entry.worker, op, meta=entry.meta)
                    continue
                invocation = open_ops.pop(entry.worker)
                result = entry.result
                if etype == "ok":
                    ok(invocation, cast(Ack | tuple[Record, ...], result))
                elif etype == "fail":
                    fail(invocation, cast(Ack | str, result))
                else:
                    info(invocation, cast(str, result))
            offset = clock.now + GAP_NS
            done += copy_ops
            if done >= shown or k == len(plan) - 1:
                say(f"  generated {done:,} of {ops:,} operations, copy {k + 1} of {len(plan)}, "
                    f"{time.perf_counter() - start:.0f} s")
                shown = done - done % step + step
        entry_count = len(recorder)
    return Scaled(ops=done, entries=entry_count, copies=len(plan), namespaces=len(namespaces),
                  zst_bytes=path.stat().st_size, plain_bytes=0, plain_written=False,
                  generate_s=time.perf_counter() - start, source_ops=max(points), source=name)


def decompress(path: Path, plain: Path | None) -> int:
    """Bytes of ``path``'s frames decompressed, written to ``plain`` if given."""
    total = 0
    with ExitStack() as stack:
        src = stack.enter_context(open(path, "rb"))
        out = None if plain is None else stack.enter_context(open(plain, "wb"))
        reader = zstandard.ZstdDecompressor().stream_reader(src, read_across_frames=True)
        while block := reader.read(_BLOCK):
            total += len(block)
            if out is not None:
                out.write(block)
    return total


@dataclass(frozen=True)
class Prepared:
    """The folders of one size, each a run folder ``memcert replay`` takes."""

    scaled: Scaled
    zst: Path
    plain: Path | None


def prepare(data: Path, real: Path, ops: int, *, plain: bool,
            say: Say = say_to_stderr) -> Prepared:
    """The scaled history of ``ops`` operations under ``data``, generated unless a
    complete one (its manifest written last) of the same real run is there already."""
    base = data / f"scaled-{ops}"
    zst, flat = base / "zst", base / "plain"
    manifest = base / MANIFEST
    name = identity(real / PLAIN)
    if manifest.is_file():
        kept = json.loads(manifest.read_text(encoding="utf-8"))
        scaled = Scaled(**kept) if kept.get("source") == name else None
        if scaled is not None and (scaled.plain_written or not plain):
            say(f"{ops:,} operations: reusing {base}")
            return Prepared(scaled, zst, flat if scaled.plain_written else None)
    shutil.rmtree(base, ignore_errors=True)
    zst.mkdir(parents=True)
    say(f"{ops:,} operations: generating {base / 'zst' / COMPRESSED}")
    source = read_history(real / PLAIN)
    scaled = write_scaled(source, ops, zst / COMPRESSED, say=say, name=name)
    del source
    shutil.copy(real / RESULTS, zst / RESULTS)
    say(f"{ops:,} operations: " + (f"decompressing to {flat / PLAIN}" if plain else
                                   "counting the plain bytes (not written)"))
    if plain:
        flat.mkdir()
        shutil.copy(real / RESULTS, flat / RESULTS)
    plain_bytes = decompress(zst / COMPRESSED, flat / PLAIN if plain else None)
    scaled = Scaled(**{**asdict(scaled), "plain_bytes": plain_bytes, "plain_written": plain})
    manifest.write_text(json.dumps(asdict(scaled), indent=2) + "\n", encoding="utf-8")
    return Prepared(scaled, zst, flat if plain else None)

