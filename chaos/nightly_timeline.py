"""The report's timeline: every operation of the history in its worker's row, and every
violation's witnesses marked, counted per column.

The witnesses come from the checkers (the one definition of each invariant), told of
every violation they find, not only the few they keep: a :class:`Witnesses` given to
certify's own check of the saved history (``certify(on_violation=...)``), or, for a
history checked elsewhere, one more check here. The history is then streamed twice and
never held: once for its span, once to bin each operation, from its invocation to its
completion, into :data:`TIMELINE_BINS` columns of its worker's row. A witness of any
violation is marked in the column where it began: the page draws one mark per row and
pixel column with the number of witnesses under it, so that thousands of violations
show where they happened rather than a red smear.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import zstandard

from invariants.checkers import check_history
from invariants.history import HistoryStream, Paraphrase
from invariants.verdict import Violation

__all__ = [
    "MARKED_OPS",
    "TIMELINE_BINS",
    "TIMELINE_JS",
    "Timeline",
    "Witnesses",
    "scenario_of",
    "timeline",
]

TIMELINE_BINS = 600
MARKED_OPS = 1_000_000
"""Witness operations marked at most; past it the marks stop and the page says so."""
OPS_LISTED = 5
"""Witness op numbers a mark lists on hover; its count covers them all."""

# Timeline codes, in rising priority: a slice shows the most telling thing in it.
CODES = ".rwdxeuV"
_CODE_OF_OK = {"read": "r", "write": "w", "delete": "d", "restore": "d"}


@dataclass
class Timeline:
    bins: int
    span_s: float
    rows: list[dict[str, Any]]
    marks: list[dict[str, Any]]
    """Per worker and column with a witness: ``count`` witnesses, the first ``ops``."""
    scenarios: list[dict[str, Any]]
    operations: dict[int, list[str]]
    """The history lines of each shown witness: its invocation, then its completion."""
    plain_bytes: int
    """The size of the history's lines, decompressed: counted as they were read."""
    witnesses: int
    """Operations that witness some violation (each counted once)."""
    truncated: bool = False
    """More than :data:`MARKED_OPS` witnesses: only the first are marked."""


def history_lines(history: Path) -> Iterator[bytes]:
    """The history's lines, each with its newline, read a buffer at a time; a compressed
    history (told by its first bytes, as every reader tells it) is decompressed as it
    is read, so the file is never held whole, plain or not."""
    with open(history, "rb") as raw:
        compressed = raw.read(len(zstandard.FRAME_HEADER)) == zstandard.FRAME_HEADER
        raw.seek(0)
        if not compressed:
            yield from raw
            return
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        yield from io.BufferedReader(reader)


class _Stamp(msgspec.Struct, gc=False):
    """What the timeline reads of a history line; msgspec skips the rest (the op, a
    read's records) without building it, which is most of a line."""

    index: int
    worker: int
    time_ns: int
    type: str
    f: str
    result: msgspec.Raw = msgspec.Raw(b"null")
    """Left as JSON text: the timeline only asks whether it is an object (an Ack)."""


_STAMP = msgspec.json.Decoder(_Stamp)


class Witnesses:
    """Every violation's witness operations, each once, as the checkers find them: pass
    :meth:`violation` as ``on_violation``. At most :data:`MARKED_OPS` are kept."""

    def __init__(self) -> None:
        self.ops: set[int] = set()
        self.truncated = False

    def violation(self, violation: Violation) -> None:
        for op in violation.witnesses:
            if len(self.ops) < MARKED_OPS:
                self.ops.add(op)
            elif op not in self.ops:
                self.truncated = True


def timeline(history: Path, *, level: Paraphrase, scenarios: Sequence[str], workers: int,
             shown: set[int], witnesses: Witnesses | None = None) -> Timeline:
    """Bin every operation of the history into its worker's row; ``shown`` are the
    witnesses of the counterexamples shown in full, whose history lines are kept, and
    ``witnesses`` those of every violation (None checks the history for them).

    certify numbers workers per scenario, in suite order: scenario ``i`` runs workers
    ``i * (W + 1)`` to ``i * (W + 1) + W - 1`` and does its final reads as worker
    ``i * (W + 1) + W``.
    """
    if witnesses is None:
        witnesses = Witnesses()
        check_history(HistoryStream(history), level=level, keep=0,
                      on_violation=witnesses.violation)
    head, tail = b"", b""
    for line in history_lines(history):
        head = head or line
        tail = line
    if not head:
        return Timeline(TIMELINE_BINS, 0.0, [], [], [], {}, 0, 0)
    first, last = _STAMP.decode(head).time_ns, _STAMP.decode(tail).time_ns
    width = max(1, last - first)
    marked = witnesses.ops
    rows: dict[int, list[int]] = {}
    invoked: dict[int, tuple[int, int]] = {}
    spans: dict[int, list[int]] = {}
    operations: dict[int, list[str]] = {}
    marks: dict[tuple[int, int], list[Any]] = {}
    plain_bytes = 0
    decode = _STAMP.decode
    for line in history_lines(history):
        plain_bytes += len(line)
        entry = decode(line)
        worker, at, etype = entry.worker, entry.time_ns, entry.type
        if etype == "invoke":
            invoked[worker] = (entry.index, at)
            if entry.index in shown:
                operations[entry.index] = [line.decode("utf-8").rstrip("\n")]
            continue
        index, since = invoked.pop(worker, (entry.index, at))
        if index in shown:
            operations.setdefault(index, []).append(line.decode("utf-8").rstrip("\n"))
        witness = index in marked
        code = ("V" if witness else _CODE_OF_OK[entry.f] if etype == "ok"
                else "u" if etype == "info"
                else "x" if bytes(entry.result).startswith(b"{") else "e")
        row = rows.setdefault(worker, [0] * TIMELINE_BINS)
        start = min(TIMELINE_BINS - 1, (since - first) * TIMELINE_BINS // width)
        end = min(TIMELINE_BINS - 1, (at - first) * TIMELINE_BINS // width)
        rank = CODES.index(code)
        for slot in range(start, end + 1):
            row[slot] = max(row[slot], rank)
        span = spans.setdefault(scenario_of(worker, workers), [since, at])
        span[0], span[1] = min(span[0], since), max(span[1], at)
        if witness:
            mark = marks.setdefault((worker, start), [0, []])
            mark[0] += 1
            if len(mark[1]) < OPS_LISTED:
                mark[1].append(index)
    return Timeline(
        bins=TIMELINE_BINS,
        span_s=width / 1e9,
        rows=[{"worker": worker, "scenario": _name(scenarios, scenario_of(worker, workers)),
               "codes": "".join(CODES[rank] for rank in row)}
              for worker, row in sorted(rows.items())],
        marks=[{"worker": worker, "bin": slot, "count": count, "ops": ops}
               for (worker, slot), (count, ops) in sorted(marks.items())],
        scenarios=[{"name": _name(scenarios, i), "from": (a - first) / width,
                    "to": (b - first) / width} for i, (a, b) in sorted(spans.items())],
        operations=operations,
        plain_bytes=plain_bytes,
        witnesses=len(marked),
        truncated=witnesses.truncated,
    )


def scenario_of(worker: int, workers: int) -> int:
    return worker // (workers + 1)


def _name(names: Sequence[str], i: int) -> str:
    return names[i] if i < len(names) else f"scenario {i + 1}"


TIMELINE_JS = """
(function () {
  var data = JSON.parse(document.getElementById('data').textContent);
  var canvas = document.getElementById('timeline');
  var colours = data.colours;
  var rowH = 7, top = 18, left = 170, bottom = 34;
  var width = Math.max(600, canvas.parentNode.clientWidth || 900);
  var height = top + rowH * data.rows.length + bottom;
  var scale = window.devicePixelRatio || 1;
  canvas.width = width * scale; canvas.height = height * scale;
  canvas.style.height = height + 'px';
  var ctx = canvas.getContext('2d');
  ctx.scale(scale, scale);
  ctx.font = '10px sans-serif';
  var plot = width - left - 8, bin = plot / data.bins;
  var floor = top + rowH * data.rows.length + 2;
  data.scenarios.forEach(function (s, i) {
    ctx.fillStyle = i % 2 ? '#fafafa' : '#eef3f8';
    ctx.fillRect(left + s.from * plot, 0, Math.max(1, (s.to - s.from) * plot), floor);
    ctx.fillStyle = '#333';
    ctx.fillText(s.name, left + s.from * plot + 2, 11);
  });
  var rowOf = {};
  data.rows.forEach(function (row, r) {
    rowOf[row.worker] = r;
    var y = top + r * rowH;
    ctx.fillStyle = '#555';
    if (r % 3 === 0) ctx.fillText('w' + row.worker + ' ' + row.scenario, 2, y + rowH);
    for (var i = 0; i < row.codes.length; i++) {
      var c = row.codes.charAt(i);
      if (c === '.') continue;
      ctx.fillStyle = colours[c];
      ctx.fillRect(left + i * bin, y, Math.max(1, bin), rowH - 1);
    }
  });
  ctx.strokeStyle = '#777'; ctx.fillStyle = '#333';
  ctx.beginPath(); ctx.moveTo(left, floor); ctx.lineTo(left + plot, floor); ctx.stroke();
  var ticks = 8;
  for (var k = 0; k <= ticks; k++) {
    var tx = left + plot * k / ticks;
    ctx.beginPath(); ctx.moveTo(tx, floor); ctx.lineTo(tx, floor + 4); ctx.stroke();
    var digits = data.span_s < 4 ? 2 : data.span_s < 40 ? 1 : 0;
    var label = (data.span_s * k / ticks).toFixed(digits);
    ctx.textAlign = k === 0 ? 'left' : k === ticks ? 'right' : 'center';
    ctx.fillText(label, tx, floor + 14);
  }
  ctx.textAlign = 'center';
  ctx.fillText('time since the run began (s)', left + plot / 2, floor + 28);
  ctx.textAlign = 'left';
  ctx.fillText('worker, scenario', 2, floor + 14);
  var columns = {};
  data.marks.forEach(function (m) {
    var x = Math.floor(left + (m.bin + 0.5) * bin), key = m.worker + ':' + x;
    var column = columns[key];
    if (!column) {
      column = columns[key] = {x: x, y: top + rowOf[m.worker] * rowH, worker: m.worker,
                               count: 0, ops: []};
    }
    column.count += m.count;
    column.ops = column.ops.concat(m.ops).slice(0, 5);
  });
  var marks = Object.keys(columns).map(function (key) { return columns[key]; });
  var drawn = 0;
  marks.forEach(function (m) {
    ctx.fillStyle = '#d62728';
    ctx.beginPath(); ctx.moveTo(m.x, m.y - 3); ctx.lineTo(m.x - 4, m.y + rowH + 2);
    ctx.lineTo(m.x + 4, m.y + rowH + 2); ctx.closePath(); ctx.fill();
    drawn += m.count;
  });
  var tip = document.getElementById('tip');
  canvas.addEventListener('mousemove', function (event) {
    var box = canvas.getBoundingClientRect();
    var cssX = event.clientX - box.left, cssY = event.clientY - box.top;
    // The marks are placed in the drawing's own pixels, and the canvas box may show the
    // drawing narrower than it is drawn (a narrow window) and inside its border: the
    // pointer is mapped into the drawing before it is matched.
    var x = (cssX - canvas.clientLeft) * width / canvas.clientWidth;
    var y = (cssY - canvas.clientTop) * height / canvas.clientHeight;
    // Marks a pixel or two apart overlap: the one nearest the pointer answers, so that
    // each can be pointed at.
    var hit = null, nearest = Infinity;
    marks.forEach(function (m) {
      var off = Math.abs(m.x - x) + Math.abs(m.y + rowH / 2 - y);
      if (Math.abs(m.x - x) < 5 && y >= m.y - 3 && y <= m.y + rowH + 3 && off < nearest) {
        hit = m; nearest = off;
      }
    });
    tip.style.left = (cssX + 8) + 'px'; tip.style.top = (cssY + 8) + 'px';
    if (hit) {
      tip.hidden = false;
      tip.textContent = hit.count + ' witness operation(s) of worker ' + hit.worker +
        ' here: op ' + hit.ops.join(', ') + (hit.count > hit.ops.length ? ', ...' : '');
    } else if (x >= left) {
      tip.hidden = false;
      tip.textContent = ((x - left) / plot * data.span_s).toFixed(2) + ' s';
    } else { tip.hidden = true; }
  });
  canvas.addEventListener('mouseleave', function () { tip.hidden = true; });
  canvas.setAttribute('data-rendered', String(data.rows.length));
  canvas.setAttribute('data-marks', String(drawn));
  canvas.setAttribute('data-columns', String(marks.length));
})();
"""
