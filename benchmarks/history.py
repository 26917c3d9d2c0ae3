"""``memcert replay`` at nightly scale, beside the least any reader of the file must do.

For each size, a real certify run's history is copied into fresh namespaces until it
holds that many operations (:mod:`benchmarks.scaled_history`), as ``history.jsonl`` and
``history.jsonl.zst``; above :data:`PLAIN_UP_TO` operations only the compressed file is
written (the plain one would take gigabytes of disk) and its plain bytes are counted.

Every measurement runs in a fresh interpreter of its own, so that its peak RSS is its
own, and under an address-space cap (``--cap-gb``), so that a reader that holds the whole
history fails with MemoryError instead of taking a shared machine's memory. Wall and
CPU time are the call's alone, the interpreter's start and imports excluded; on a shared
machine the CPU time says what the code costs. Peak RSS is the process's, imports
included (the start column shows how much of it they are):

- ``replay``: ``chaos.certify.replay`` on a folder holding the file and the run's
  ``results.json``, what ``memcert replay`` runs: read, check, build the report;
- ``decode``, baseline 1: the file decoded a megabyte of lines at a time by one msgspec
  call into a minimal typed ``Struct`` per line (every field of the format, typed, none
  validated against the others), each chunk's lines dropped at once: the least any
  reader must do;
- ``check``, baseline 2: ``read_history`` of the whole file (timed apart), then only
  ``check_history`` on the entries already in memory; skipped above
  :data:`IN_MEMORY_UP_TO` operations, whose entries would take gigabytes.

``python -m benchmarks.history KIND PATH LEVEL CAP_BYTES`` is one measurement's child
process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import msgspec
import zstandard

from .scaled_history import (
    COMPRESSED,
    PLAIN,
    RESULTS,
    Prepared,
    prepare,
    real_run,
    say_to_stderr,
)

SIZES = (100_000, 1_000_000, 10_000_000)
PLAIN_UP_TO = 1_000_000
"""The largest size whose plain file is written, and so replayed and decoded."""
IN_MEMORY_UP_TO = 1_000_000
"""The largest size checked in memory (baseline 2)."""
REAL_BUDGET_S = 10.0
REAL_SEED = 19
CAP_GB = 8.0

TARGET_REPLAY_S = 5.0
"""For 1M operations, end to end."""
TARGET_RSS_MB = {1_000_000: 300, 10_000_000: 400}
TARGET_CHECK_OPS_PER_S = 250_000
TARGET_COMPRESSION = 5.0

_ROOT = Path(__file__).resolve().parent.parent
_BLOCK = 1 << 20
_SUFFIXES = {"k": 1_000, "m": 1_000_000}


def parse_sizes(text: str) -> tuple[int, ...]:
    """``100k,1M,10M`` -> (100000, 1000000, 10000000)."""
    sizes = []
    for part in text.split(","):
        word = part.strip().lower()
        scale = _SUFFIXES.get(word[-1:], 1)
        number = word[:-1] if scale > 1 else word
        try:
            value = round(float(number) * scale)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not a number of operations; write 100k, 1M or 2500") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{part!r} must be a positive number of operations")
        sizes.append(value)
    return tuple(sizes)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of rounds from 1 up")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks history",
        description="memcert replay of real-shaped histories of each size, with a bare "
                    "msgspec decode and an in-memory check beside it.")
    parser.add_argument("--sizes", type=parse_sizes, default=SIZES, metavar="N,N",
                        help="operations per history, e.g. 100k,1M (default 100k,1M,10M)")
    parser.add_argument("--data", type=Path, default=None, metavar="DIR",
                        help="where the real run and the scaled histories are kept and reused "
                             "(default: memcert-bench-history in the system's temporary "
                             "folder); delete it to record and generate afresh")
    parser.add_argument("--cap-gb", type=float, default=CAP_GB, metavar="GB",
                        help=f"address-space cap of each measurement (default {CAP_GB:g})")
    parser.add_argument("--rounds", type=_positive, default=1, metavar="N",
                        help="rounds of the decodes and replays of each size, interleaved; the "
                             "median round is shown (default 1)")
    return parser


def main(argv: Sequence[str]) -> dict[str, float]:
    args = build_parser().parse_args(argv)
    return run(args.sizes, data=args.data, cap_gb=args.cap_gb, rounds=args.rounds)


@dataclass
class Measured:
    """One child's figures, or why it gave none."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    start_rss_mb: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    error: str = ""


@dataclass
class _Size:
    prepared: Prepared
    runs: list[tuple[str, str, Measured]] = field(default_factory=list)
    """(file, kind, figures), in the order run."""
    check: Measured | None = None

    @property
    def ops(self) -> int:
        return self.prepared.scaled.ops


def run(sizes: Sequence[int] = SIZES, *, data: Path | None = None, cap_gb: float = CAP_GB,
        rounds: int = 1, real_budget_s: float = REAL_BUDGET_S) -> dict[str, float]:
    """Measure every size and print the tables; returns the figures by name."""
    data = data or Path(tempfile.gettempdir()) / "memcert-bench-history"
    real = real_run(data / "real", budget_s=real_budget_s, seed=REAL_SEED)
    original = _child("replay", real, "", cap_gb)
    level = json.loads((real / RESULTS).read_text(encoding="utf-8"))["level"]
    measured: list[_Size] = []
    for ops in sizes:
        start = time.perf_counter()
        size = _Size(prepare(data, real, ops, plain=ops <= PLAIN_UP_TO))
        say_to_stderr(f"{ops:,} operations: ready in {time.perf_counter() - start:.0f} s")
        plan = [(name, kind, target)
                for name, folder in (("plain", size.prepared.plain), ("zst", size.prepared.zst))
                if folder is not None
                for kind, target in (("decode", folder / (PLAIN if name == "plain" else
                                                          COMPRESSED)), ("replay", folder))]
        taken: dict[tuple[str, str], list[Measured]] = {}
        for round_ in range(rounds):
            for name, kind, target in plan:
                what = f"{kind} {name}" + (f", round {round_ + 1}" if rounds > 1 else "")
                taken.setdefault((name, kind), []).append(
                    _step(ops, what, kind, target, level, cap_gb))
        size.runs = [(name, kind, _median(taken[name, kind])) for name, kind, _ in plan]
        if ops <= IN_MEMORY_UP_TO:
            folder = size.prepared.plain or size.prepared.zst
            history = folder / (PLAIN if size.prepared.plain else COMPRESSED)
            size.check = _step(ops, "read whole and check in memory", "check", history, level,
                               cap_gb)
        measured.append(size)
    return _print(measured, original, data, rounds)


def _step(ops: int, what: str, kind: str, target: Path, level: str, cap_gb: float) -> Measured:
    say_to_stderr(f"{ops:,} operations: {what}")
    result = _child(kind, target, level, cap_gb)
    say_to_stderr(f"{ops:,} operations: {what}: "
                  + (result.error or f"{result.wall_s:.2f} s, {result.peak_rss_mb:,.0f} MB"))
    return result


def _median(taken: list[Measured]) -> Measured:
    """The round of median wall time; a failed round, if any failed."""
    failed = [m for m in taken if m.error]
    return failed[0] if failed else sorted(taken, key=lambda m: m.wall_s)[len(taken) // 2]


def _child(kind: str, target: Path, level: str, cap_gb: float) -> Measured:
    """One measurement in an interpreter of its own, which caps its own address space."""
    done = subprocess.run([sys.executable, "-m", "benchmarks.history", kind, str(target), level,
                           str(int(cap_gb * 2**30))],
                          cwd=_ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        last = lines[-1]
        if "MemoryError" in last:
            last = f"MemoryError under the {cap_gb:g} GB cap"
        return Measured(error=f"failed: {last[:80]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return Measured(figures.pop("wall_s"), figures.pop("cpu_s"), figures.pop("peak_rss_mb"),
                    figures.pop("start_rss_mb"), figures)


def _print(measured: list[_Size], original: Measured, data: Path,
           rounds: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    print("\n## History at scale: `memcert replay` of a real run copied into fresh namespaces")
    source = measured[0].prepared.scaled.source_ops if measured else 0
    taken = (f"decodes and replays: the median of {rounds} interleaved rounds" if rounds > 1
             else "one round each")
    print(textwrap.fill(
        f"A `memcert certify` of the reference store on SQLite (seed {REAL_SEED}, "
        f"{source:,} operations) copied into fresh namespaces up to each size, kept in "
        f"{data}. Each figure is a run of a fresh interpreter under a memory cap ({taken}); "
        "wall and CPU time exclude its start and imports, peak RSS includes them (start MB: "
        "after the imports). `decode` is a bare msgspec decode of the same file into a "
        "minimal Struct per line, the least any reader must do; `/ decode` is the run's "
        "wall time over it. The in-memory check reads the file whole first.",
        width=100) + "\n")
    print("| ops | entries | copies | generate s | plain MB | zst MB | plain / zst |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in measured:
        s = size.prepared.scaled
        ratio = s.plain_bytes / s.zst_bytes
        figures[f"compression_{s.ops}"] = ratio
        written = "" if s.plain_written else " (counted)"
        print(f"| {s.ops:,} | {s.entries:,} | {s.copies:,} | {s.generate_s:.1f} | "
              f"{s.plain_bytes / 1e6:,.1f}{written} | {s.zst_bytes / 1e6:,.1f} | {ratio:.1f} |")
    print("\n| ops | file | run | wall s | CPU s | ops/s | peak RSS MB | start MB | / decode |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for size in measured:
        decode = {name: m for name, kind, m in size.runs if kind == "decode" and not m.error}
        for name, kind, m in size.runs:
            if m.error:
                print(f"| {size.ops:,} | {name} | {kind} | {m.error} | | | | | |")
                continue
            rate = size.ops / m.wall_s
            figures[f"{kind}_{name}_s_{size.ops}"] = m.wall_s
            figures[f"{kind}_{name}_rss_mb_{size.ops}"] = m.peak_rss_mb
            base = decode.get(name)
            times = f"{m.wall_s / base.wall_s:.1f}" if base else ""
            print(f"| {size.ops:,} | {name} | {kind} | {m.wall_s:.2f} | {m.cpu_s:.2f} | "
                  f"{rate:,.0f} | {m.peak_rss_mb:,.0f} | {m.start_rss_mb:,.0f} | {times} |")
    print("\n| ops | read whole s | RSS after read MB | check s | check CPU s | check ops/s "
          "| peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in measured:
        check = size.check
        if check is None:
            print(f"| {size.ops:,} | not run: over {IN_MEMORY_UP_TO:,} operations the entries "
                  "would take gigabytes | | | | | |")
            continue
        if check.error:
            print(f"| {size.ops:,} | {check.error} | | | | | |")
            continue
        rate = size.ops / check.wall_s
        figures[f"check_ops_per_s_{size.ops}"] = rate
        print(f"| {size.ops:,} | {check.extra['read_s']:.2f} | "
              f"{check.extra['read_rss_mb']:,.0f} | {check.wall_s:.2f} | {check.cpu_s:.2f} | "
              f"{rate:,.0f} | {check.peak_rss_mb:,.0f} |")
    _print_targets(measured, figures)
    _print_verdicts(measured, original)
    return figures


def _print_targets(measured: list[_Size], figures: dict[str, float]) -> None:
    print("\nTargets (issue 19, 2 cores):")
    for size in measured:
        if size.ops == 1_000_000:
            for name in ("plain", "zst"):
                if (wall := figures.get(f"replay_{name}_s_{size.ops}")) is not None:
                    print(f"- replay of 1M operations ({name}) <= {TARGET_REPLAY_S:g} s: "
                          f"{wall:.1f} s, {_met(wall <= TARGET_REPLAY_S)}")
        if (limit := TARGET_RSS_MB.get(size.ops)) is not None:
            for name in ("plain", "zst"):
                if (rss := figures.get(f"replay_{name}_rss_mb_{size.ops}")) is not None:
                    print(f"- replay peak RSS at {size.ops:,} ({name}) <= {limit} MB: "
                          f"{rss:,.0f} MB, {_met(rss <= limit)}")
        ratio = figures[f"compression_{size.ops}"]
        print(f"- compressed <= 1/{TARGET_COMPRESSION:g} of plain at {size.ops:,}: "
              f"1/{ratio:.1f}, {_met(ratio >= TARGET_COMPRESSION)}")
    rates = [v for k, v in figures.items() if k.startswith("check_ops_per_s_")]
    if rates:
        print(f"- in-memory check >= {TARGET_CHECK_OPS_PER_S:,} ops/s: slowest {min(rates):,.0f}"
              f" ops/s, {_met(min(rates) >= TARGET_CHECK_OPS_PER_S)}")


def _print_verdicts(measured: list[_Size], original: Measured) -> None:
    """Copies in fresh namespaces must not change the verdict: say whether they did."""
    expected = original.extra.get("verdict", original.error)
    differ = [f"{size.ops:,} {name}: {m.extra['verdict']}" for size in measured
              for name, kind, m in size.runs
              if kind == "replay" and not m.error and m.extra["verdict"] != expected]
    print(f"\nReplay verdict of the real run: {expected}; of every scaled history: "
          + (f"DIFFERENT ({'; '.join(differ)})" if differ else "the same") + ".")


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


# The child process: one measurement, its figures printed as one JSON line.


class _Op(msgspec.Struct, gc=False):
    namespace: str
    entity_id: str
    attribute: str | None = None
    value: str | None = None
    causal_seq: int | None = None
    op_id: str | None = None
    source: str | None = None
    reason: str | None = None


class _Ack(msgspec.Struct, gc=False):
    applied: bool
    version: int | None = None
    reason: str | None = None


class _Record(msgspec.Struct, gc=False):
    entity_id: str
    attribute: str
    value: str
    causal_seq: int
    version: int


class _Meta(msgspec.Struct, gc=False):
    fact: str
    slot: str
    paraphrase: str


class _Line(msgspec.Struct, gc=False):
    """A line of ``history.jsonl``, every field typed, nothing checked across fields."""

    index: int
    worker: int
    time_ns: int
    type: str
    f: str
    op: _Op
    result: _Ack | list[_Record] | str | None = None
    meta: _Meta | None = None


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes, decompressed if it is zstd, a megabyte at a time."""
    with open(path, "rb") as src:
        reader: BinaryIO = src
        if path.name.endswith(".zst"):
            reader = zstandard.ZstdDecompressor().stream_reader(src, read_across_frames=True)
        while block := reader.read(_BLOCK):
            yield block


def bare_decode(path: Path) -> int:
    """Baseline 1: the lines of ``path`` decoded, a chunk of whole lines per call."""
    decode = msgspec.json.Decoder(_Line).decode_lines
    lines = 0
    rest = b""
    for block in _blocks(path):
        cut = block.rfind(b"\n") + 1
        if not cut:
            rest += block
            continue
        lines += len(decode(rest + block[:cut] if rest else block[:cut]))
        rest = block[cut:]
    if rest:
        lines += len(decode(rest))
    return lines


def _rss_mb() -> float:
    """This process's peak RSS so far. ``VmHWM`` where Linux has it: ``ru_maxrss`` carries
    over ``exec`` the RSS of the process that forked this one."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _Clocks:
    """Wall and CPU seconds of this process since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def measure(kind: str, target: Path, level: str) -> dict[str, Any]:
    """One measurement, in this process: ``replay`` of a run folder, ``decode`` or
    ``check`` of a history file."""
    figures: dict[str, Any] = {}
    if kind == "replay":
        from chaos.certify import replay

        figures["start_rss_mb"] = _rss_mb()
        clocks = _Clocks()
        report = replay(target)
        figures["wall_s"], figures["cpu_s"] = clocks.read()
        figures["verdict"] = report.verdict
        figures["checked"] = {name: c.checked for name, c in report.checks.items()}
    elif kind == "decode":
        figures["start_rss_mb"] = _rss_mb()
        clocks = _Clocks()
        figures["entries"] = bare_decode(target)
        figures["wall_s"], figures["cpu_s"] = clocks.read()
    elif kind == "check":
        from invariants.checkers import check_history
        from invariants.history import Paraphrase, read_history

        figures["start_rss_mb"] = _rss_mb()
        clocks = _Clocks()
        history = read_history(target)
        figures["read_s"] = clocks.read()[0]
        figures["read_rss_mb"] = _rss_mb()
        clocks = _Clocks()
        check_history(history, level=cast(Paraphrase, level))
        figures["wall_s"], figures["cpu_s"] = clocks.read()
    else:
        raise ValueError(f"no measurement named {kind!r}; use replay, decode or check")
    figures["peak_rss_mb"] = _rss_mb()
    return figures


def _child_main(argv: Sequence[str]) -> None:
    """``KIND PATH LEVEL CAP_BYTES``: cap this process's address space, measure, print."""
    kind, target, level, cap = argv
    resource.setrlimit(resource.RLIMIT_AS, (int(cap), int(cap)))
    print(json.dumps(measure(kind, Path(target), level)), flush=True)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
