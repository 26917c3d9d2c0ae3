"""Text the backend stored, shown in a terminal as it is: every character visible, long
text cut to a stated length, widths in terminal columns.

An explanation quotes attributes and values as the backend returned them, and those are
often the very thing that went wrong: a zero-width space or a byte-order mark that made
two spellings of one attribute into two keys, a no-break space or an ideographic space
where a space was sent, a value cut short. Printed raw, such characters are invisible and
``'job'`` reads the same as ``'job\\u200b'``; a tab or a newline breaks the layout, and a
right-to-left mark reorders the rest of the line. So every character that a terminal would
not show as itself is written as its escape (``\\u200b``, ``\\t``).

Long values are cut to their head and tail around ``…``, with the full length stated,
since what a store does to a value often shows at its end (a truncation, a stripped
space). Widths are counted in terminal columns, not characters: an East Asian wide or
full-width character takes two columns and a combining mark none, so a line of Chinese or
full-width text still fits the explanations' 100 columns.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["ELLIPSIS", "clip", "columns", "escape", "quote", "wrap"]

ELLIPSIS = "…"
"""What stands for the middle of a value that was cut."""

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\\": "\\\\"}
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""Categories a terminal does not show as a glyph of their own: controls, formats (zero
width space, BOM, bidi marks), surrogates, private use, unassigned, and separators; the
plain space (also ``Zs``) is the one separator left as it is."""

_RUN = 64
"""Characters :func:`escape` checks at once in a long text."""


def _char(ch: str, mark: str) -> str:
    """One character as shown: itself, or its escape."""
    if ch in _NAMED:
        return _NAMED[ch]
    if ch == mark:
        return "\\" + ch
    if ch != " " and unicodedata.category(ch) in _HIDDEN:
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else (
            f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return ch


def escape(text: str, mark: str = "") -> str:
    """``text`` with every invisible or control character written as its escape, the
    backslash doubled, and ``mark`` (a quote character, if any) escaped too.

    :meth:`str.isprintable` is false for exactly the categories of ``_HIDDEN`` but the
    plain space, so a text it passes, with no backslash or mark, is shown as it is; a
    long one is taken in runs, so that only the runs with something to escape are read
    a character at a time: results.json quotes whole values of up to 64 KiB.
    """
    if text.isprintable() and "\\" not in text and not (mark and mark in text):
        return text
    if len(text) > _RUN:
        return "".join(escape(text[i:i + _RUN], mark) for i in range(0, len(text), _RUN))
    return "".join(_char(ch, mark) for ch in text)


def _width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes: two per East Asian wide or full-width
    character, none per combining mark or format character, one per other character."""
    return sum(_width(ch) for ch in text)


def _cost(token: str) -> int:
    """What one shown character spends of a :func:`clip` limit: its columns, but at least
    one, so that a run of combining marks (no width, two bytes each) stays short too."""
    return max(columns(token), 1)


def clip(text: str, limit: int, mark: str = "") -> str:
    """``text`` escaped (:func:`escape`), and when that is longer than ``limit`` (in
    columns, each character counting at least one), cut to its head and tail around
    :data:`ELLIPSIS` within ``limit``; a cut never splits an escape, and the tail never
    starts with a combining mark, which would attach itself to the ellipsis."""
    return _clipped(text, limit, mark)[0]


def _clipped(text: str, limit: int, mark: str) -> tuple[str, bool]:
    """:func:`clip`'s text, and whether it differs from the whole text escaped.

    Every shown character spends at least one of ``limit``, so a cut reads no more than
    ``room`` characters from each end of ``text``: a value of 64 KiB is clipped as fast
    as a short one. A cut spends at most ``room`` and the ellipsis, so only a text that
    short can come out whole even though it was cut.
    """
    room = max(limit - columns(ELLIPSIS), 2)
    whole = ""
    if len(text) <= max(limit, room + columns(ELLIPSIS)):
        shown = [_char(ch, mark) for ch in text]
        whole = "".join(shown)
        if sum(map(_cost, shown)) <= limit:
            return whole, False
    head: list[str] = []
    used = 0
    for ch in text[:room]:
        token = _char(ch, mark)
        if used + _cost(token) > (room + 1) // 2:
            break
        head.append(token)
        used += _cost(token)
    tail: list[str] = []
    for ch in reversed(text[max(len(head), len(text) - room):]):
        token = _char(ch, mark)
        if used + _cost(token) > room:
            break
        tail.append(token)
        used += _cost(token)
    tail.reverse()
    while tail and columns(tail[0]) == 0:
        tail.pop(0)
    cut = "".join(head) + ELLIPSIS + "".join(tail)
    return cut, cut != whole


def quote(text: str, limit: int | None = None, mark: str = '"') -> str:
    """``text`` between ``mark`` quotes, escaped, and cut to ``limit`` columns between the
    quotes (:func:`clip`) with its length stated after them, as ``"head…tail" (545
    chars)``; ``limit`` None never cuts."""
    if limit is None:
        return f"{mark}{escape(text, mark)}{mark}"
    shown, cut = _clipped(text, limit, mark)
    if not cut:
        return f"{mark}{shown}{mark}"
    return f"{mark}{shown}{mark} ({len(text):,} chars)"


_CHUNK = re.compile(r" +|[^ ]+")
_BLANKS = re.compile(r"[\t\n\r\f\v]")


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` terminal columns, ``first`` before the first
    line and ``rest`` before the others: broken at spaces, and inside a word only when
    the word alone is wider than a line. Spaces where a line breaks are dropped, and a
    tab or a line break in ``text`` counts as a space, as in :func:`textwrap.wrap`."""
    text = _BLANKS.sub(" ", text)
    lines: list[str] = []
    line, used = first, columns(first)
    fresh = True
    for chunk in _CHUNK.findall(text):
        if chunk.startswith(" "):
            if not fresh:
                line += chunk
                used += len(chunk)
            continue
        size = columns(chunk)
        if used + size > width and not fresh:
            lines.append(line.rstrip(" "))
            line, used, fresh = rest, columns(rest), True
        while used + size > width and size > 1:
            cut, taken = "", 0
            for ch in chunk:
                if used + taken + _width(ch) > width and cut:
                    break
                cut += ch
                taken += _width(ch)
            lines.append(line + cut)
            chunk, size = chunk[len(cut):], columns(chunk[len(cut):])
            line, used = rest, columns(rest)
        line += chunk
        used += size
        fresh = False
    lines.append(line.rstrip(" "))
    return lines
