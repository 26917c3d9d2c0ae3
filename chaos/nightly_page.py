"""The frame every nightly page shares: one self-contained HTML file, styles and data
inline, so that it opens offline, from a CI artifact or a mail attachment."""

from __future__ import annotations

import html
import json

__all__ = ["VERDICT_COLOURS", "duration_text", "escape", "page", "size_text"]

VERDICT_COLOURS = {"certified": "#31a354", "pass": "#31a354", "failed": "#d62728",
                   "fail": "#d62728", "unknown": "#e6550d", "skipped": "#737373"}
"""The colour of each night's and invariant's verdict, wherever a chart shows one."""

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 2em 3em;color:#222;max-width:1500px}
header{padding:.6em 1em;margin:0 -1em 1em;border-bottom:4px solid #999}
header.certified{border-color:#31a354}header.failed{border-color:#d62728}
header.unknown{border-color:#fd8d3c}
h1{font-size:1.4em}h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;
text-align:left;vertical-align:top}tr.fail td,tr.failed td,tr.missing td,td.fail{background:#fde0dd}
tr.unknown td,td.unknown{background:#fff3d6}tr.skipped td{color:#5c5c5c}
td a{white-space:nowrap}code,pre{font:12px/1.35 ui-monospace,monospace}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}code{overflow-wrap:anywhere}
.charts{display:flex;flex-wrap:wrap;gap:1em}.scenario{border:1px solid #ddd;padding:0 1em 1em}
svg.chart text{font-size:11px}svg.chart text.t{font-weight:600}svg.chart .tick{fill:#595959}
svg.chart .axis{stroke:#777}svg.chart .grid{stroke:#eee}
rect.bad{fill:#d62728}rect.zero{fill:#31a354}
.legend span{margin-right:1em}.legend i{display:inline-block;width:10px;height:10px;
margin-right:4px}
#timeline-box{position:relative}#timeline{width:100%;border:1px solid #ddd}
#tip{position:absolute;background:#222;color:#fff;padding:2px 6px;font-size:12px;
pointer-events:none}
.cex{border-left:4px solid #d62728;padding-left:1em;margin:1em 0}.note{color:#4d4d4d}
h4{margin:1.2em 0 .3em}.fix{background:#eef6ee;border-left:4px solid #31a354;padding:.3em 1em}
.detail{font-weight:600}.cex p.text{white-space:pre-wrap;font:12px/1.35 ui-monospace,monospace}
.scroll{overflow-x:auto;max-width:100%;border:1px solid #eee}
.scroll table{margin:0}.scroll th:first-child,.scroll td:first-child{position:sticky;left:0;
background:#fff;z-index:1;box-shadow:1px 0 0 #ddd}
.scroll tr.failed td:first-child{background:#fde0dd}
.scroll tr.unknown td:first-child{background:#fff3d6}
.scroll td:last-child{min-width:16em;max-width:28em}
td.took{white-space:nowrap}
.labels code{background:#f0f0f0;padding:0 4px;margin-right:.4em;white-space:nowrap}
#since{border:1px solid #ccc;border-left:6px solid #3182bd;padding:.2em 1em .6em;
margin:1em 0}#since h2{margin-top:.4em;border:0}#since li{margin:.15em 0}
.overrun{background:#fff3d6;border-left:4px solid #e6550d;padding:.3em 1em}
"""


def page(title: str, body: str, *, script: str = "", data: object = None) -> str:
    """A whole page: ``body``, then ``data`` as JSON in ``<script id="data">`` (what a
    reader or a test takes from the page without parsing its HTML), then ``script``."""
    payload = ""
    if data is not None:
        encoded = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
        payload = f'<script type="application/json" id="data">{encoded}</script>'
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><meta name=\"viewport\" "
            "content=\"width=device-width,initial-scale=1\">"
            f"<style>{STYLE}</style></head><body><main>\n{body}\n</main>{payload}"
            f"{f'<script>{script}</script>' if script else ''}</body></html>\n")


def escape(text: str) -> str:
    return html.escape(text, quote=True)


def size_text(count: int) -> str:
    """A size as a reader takes it in: "6.1 MB", "67 MB", "820 kB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            value = count / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{count} B"


def duration_text(seconds: float) -> str:
    """A latency bucket's bound: "50µs", "2.5ms", "1s"."""
    return f"{seconds * 1e6:g}µs" if seconds < 1e-3 else (
        f"{seconds * 1e3:g}ms" if seconds < 1 else f"{seconds:g}s")
