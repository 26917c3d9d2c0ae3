"""Value texts that provoke what a store does to text it should keep verbatim.

A store that truncates at 255 characters, re-encodes, strips or collapses whitespace,
applies NFC or NFKC, drops a zero-width joiner or a combining mark, or reorders
right-to-left text, returns a value nobody wrote. Short English phrases never provoke
any of that, so a fact's text gets a *payload*: text of one :data:`TEXT_CLASSES` class,
to a length drawn log-uniformly from 1 character to the configured maximum, so that
short values stay common and long ones (a pasted page, a code snippet) come too.

The payload follows the fact's own text and its tag (``lives in city-cw17``), after one
plain space, so the tag still makes every value unique, and no surface folding of the
payload can run two facts' texts together. A ``whitespace`` payload also wraps the
whole value in whitespace, since the ends are where a store strips it.

Values never hold NUL nor a lone surrogate: the contract refuses both
(:mod:`reference_store.validation` says why). :func:`text_classes` reads the classes
back off a text alone, so coverage counts them on a recorded history without the plan.
"""

from __future__ import annotations

import functools
import math
import random
import re
import unicodedata
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from invariants.backend import MAX_VALUE_BYTES
from invariants.errors import InvalidArgument

__all__ = [
    "DEFAULT_VALUE_BYTES",
    "LONG_VALUE_CHARS",
    "MIN_VALUE_BYTES",
    "TEXT_CLASSES",
    "WHITESPACE",
    "check_max_value_bytes",
    "log_uniform_length",
    "nfd_payload",
    "payload",
    "text_classes",
    "with_payload",
]

DEFAULT_VALUE_BYTES: Final = 16 * 1024
"""The longest value the generators write unless told otherwise, in bytes of UTF-8."""

MIN_VALUE_BYTES: Final = 64
"""The smallest maximum that still leaves room for a fact's text and its tag."""

LONG_VALUE_CHARS: Final = 1024
"""A value longer than this is *long*: past every ``VARCHAR(255)`` or ``VARCHAR(1000)``
column a lenient database would cut it to."""

WHITESPACE: Final = (
    "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Every character ``str.isspace`` calls whitespace: the Unicode White_Space property
and the four information separators Python's ``strip`` and ``split`` remove too."""

_FRAGMENTS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "emoji": (
        "\U0001f469\u200d\U0001f4bb", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d"
        "\U0001f466", "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f44d\U0001f3fd",
        "\U0001f9d1\U0001f3ff\u200d\U0001f680", "\U0001f937\U0001f3fb\u200d\u2640\ufe0f",
        "\u2764\ufe0f", "\U0001f1e8\U0001f1f3", "\U0001f600", "\U0001f44b\U0001f3fe",
    ),
    "combining": (
        "q\u0307\u0323", "Z\u0335\u0321\u0322", "a\u0308\u0304", "x\u20dd", "o\u0328\u0304",
        "\u0915\u094d\u0937", "\u0e01\u0e34\u0e48", "i\u0307\u0301", "\u05e9\u05c1\u05b8",
    ),
    "full_width": (
        "\uff21\uff22\uff23", "\uff11\uff12\uff13", "\uff08\u5168\u89d2\uff09",
        "\uff48\uff45\uff4c\uff4c\uff4f\u3000\uff57\uff4f\uff52\uff4c\uff44", "\uff01\uff1f",
        "\uff4e\uff4f\uff54\uff45\uff1a", "\uffe5\uff15\uff10\uff10",
    ),
    "rtl": (
        "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd",
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
        "abc \u05e9\u05dc\u05d5\u05dd 123 \u0645\u0631\u062d\u0628\u0627 xyz",
        "\u202bembedded \u05e2\u05d1\u05e8\u05d9\u05ea\u202c", "\u200f(\u05d0)\u200e",
        "\u2067\u0639\u0631\u0628\u064a 42\u2069", "\u0627\u0644\u0639\u062f\u062f 1234",
    ),
    "sql": (
        "'; DROP TABLE memories; --", '" OR "1"="1', "O'Brien", "100% _match_",
        "`backtick`", "$1 ? :name", "/* comment */", "'' ''", ";--", "LIKE '%x%' ESCAPE '\\'",
    ),
    "json": (
        '{"k": "v", "n": [1, null]}', '\\"quoted\\"', "\\n\\t", "\\u0000", "\\ud83d",
        "\x01\x07\x1b\x7f", "\\/", "</script>", '"', "\u2028\u2029",
    ),
    "backslash": (
        "C:\\Users\\me\\notes.txt", "\\\\server\\share", "\\d+\\s*\\\\", "\\x00", "\\",
        "line\\nbreak", "\\\\\\", "tab\\there",
    ),
})

TEXT_CLASSES: Final = (*_FRAGMENTS, "whitespace", "normalization")
"""The payload classes, each provoking one way of mangling text; ``normalization`` is a
payload that NFC changes, so a store that applies it to values serves a value nobody
wrote."""

_NFD: Final = (
    "Cafe\u0301", "A\u030astro\u0308m", "\u1100\u1161\u11a8", "e\u0301le\u0300ve",
    "\u2126", "n\u0303o\u0303", "\u304b\u3099", "Pe\u0301rez", "u\u0308ber",
)
"""Fragments that NFC changes (decomposed letters, conjoining jamo, the ohm sign)."""

_FILLER: Final = (
    "note", "summary", "the", "user", "said", "def f(x): return x", "memory", "agent",
    "代码", "备注", "日本語", "Привет", "naïve", "42", "e.g.", "TODO",
)

_SPACE_GAPS: Final = (*WHITESPACE, *(
    a + b for a, b in zip(WHITESPACE, WHITESPACE[3:] + WHITESPACE[:3], strict=True)))
"""Runs of whitespace between a ``whitespace`` payload's words: every kind, alone and
in pairs."""
_ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"
_MARKS: Final = MappingProxyType({name: f"[{chars}]" for name, chars in (
    ("whitespace", re.escape(WHITESPACE.replace(" ", ""))),
    ("json", "\x01-\x08\x0e-\x1b\x7f"),
    ("emoji", "\U0001f000-\U0001faff\u200d"),
    ("full_width", "\uff01-\uffee"),
    ("rtl", "\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\u200f\u202b\u202e\u2067"),
    ("combining", "\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f"
                  "\u093a-\u094f\u0e31-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
                  "\u3099\u309a\ufe20-\ufe2f"),
)})
"""The characters that mark a class wherever they occur, as regex character sets: a
whitespace other than the plain space, a control character JSON must escape, and each
script class's characters. :func:`text_classes` finds them all in one scan."""
_MARK_PATTERNS: Final = MappingProxyType(
    {name: re.compile(chars) for name, chars in _MARKS.items()})
_SQL = ("'", '"', ";--", "`", "%")
_JSON = ('\\"', "\\n", "\\u", "\\/", '{"')


def check_max_value_bytes(value: object, flag: str = "--max-value-bytes") -> int:
    """``value`` as a maximum value size, or an InvalidArgument naming ``flag``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{flag}={value!r} must be an integer number of bytes of UTF-8; "
                              f"the default is {DEFAULT_VALUE_BYTES}.")
    if not MIN_VALUE_BYTES <= value <= MAX_VALUE_BYTES:
        raise InvalidArgument(
            f"{flag}={value} is outside {MIN_VALUE_BYTES}..{MAX_VALUE_BYTES}: the contract "
            f"requires a backend to accept values of up to {MAX_VALUE_BYTES} bytes of "
            f"UTF-8 (64 KiB), and a fact's text needs {MIN_VALUE_BYTES}; the default is "
            f"{DEFAULT_VALUE_BYTES}.")
    return value


def log_uniform_length(rng: random.Random, max_chars: int) -> int:
    """A length in 1..``max_chars``, log-uniform: as many values of 1-9 characters as
    of 10-99, 100-999 and so on."""
    return min(max_chars, int(math.exp(rng.uniform(0.0, math.log(max_chars + 1)))))


def payload(rng: random.Random, text_class: str, length: int) -> str:
    """Text of ``text_class``, about ``length`` characters long and at least one
    fragment of the class, however short ``length`` is."""
    if text_class == "normalization":
        return nfd_payload(rng, length)
    if text_class == "whitespace":
        return _spread(rng, length, rng.choice(_FILLER), _FILLER, _SPACE_GAPS)
    fragments = _FRAGMENTS[text_class]
    return _spread(rng, length, rng.choice(fragments), (*fragments, *_FILLER), (" ",),
                   weights=_weights(len(fragments)))


def nfd_payload(rng: random.Random, length: int) -> str:
    """Text that NFC changes, about ``length`` characters long; its NFC form, a value
    that differs from it only in normalization form, is another fact's payload."""
    return _spread(rng, length, rng.choice(_NFD), (*_NFD, *_FILLER), (" ",),
                   weights=_weights(len(_NFD)))


def with_payload(text: str, rng: random.Random, text_class: str, *,
                 max_bytes: int = DEFAULT_VALUE_BYTES, length: int | None = None,
                 body: str | None = None) -> str:
    """``text`` followed by a payload of ``text_class``, the whole within ``max_bytes``
    bytes of UTF-8 and, unless ``text`` alone is longer, ``length`` characters (drawn
    log-uniformly when not given). ``body`` replaces the drawn payload (the NFC twin of
    another fact's). ``text`` itself is never cut: it carries the fact's tag.
    """
    if length is None:
        length = log_uniform_length(rng, max_bytes)
    room = max(1, length - len(text) - 1)
    if body is None:
        body = payload(rng, text_class, room)
    lead = trail = ""
    if text_class == "whitespace":
        lead, trail = (rng.choice(WHITESPACE) for _ in range(2))
    value = f"{lead}{text} {body}{trail}"
    size = len(value.encode("utf-8"))
    if size > max_bytes:
        value = f"{lead}{text} {_cut(body, size - max_bytes)}{trail}"
    return value


def text_classes(value: str) -> frozenset[str]:
    """The classes of :data:`TEXT_CLASSES` a value shows, read off its text alone, plus
    ``long`` for one longer than :data:`LONG_VALUE_CHARS`."""
    found: set[str] = set()
    if len(value) > LONG_VALUE_CHARS:
        found.add("long")
    if value[:1].isspace() or value[-1:].isspace():
        found.add("whitespace")
    if "\\" in value:
        found.add("backslash")
    if any(mark in value for mark in _SQL):
        found.add("sql")
    if any(mark in value for mark in _JSON):
        found.add("json")
    if not value.isascii() and not unicodedata.is_normalized("NFC", value):
        found.add("normalization")
    unseen = frozenset(_MARKS) - found
    if value.isascii():
        unseen -= _NON_ASCII_MARKS
    at = 0
    while unseen and (hit := _any_of(unseen).search(value, at)) is not None:
        char = hit.group()
        marked = {name for name in unseen if _MARK_PATTERNS[name].match(char)}
        found |= marked
        unseen -= marked
        at = hit.start()
    return frozenset(found)


_NON_ASCII_MARKS: Final = frozenset(
    name for name, pattern in _MARK_PATTERNS.items()
    if not any(pattern.match(chr(code)) for code in range(128)))
"""The marks no ASCII character carries: an ASCII value is not scanned for them."""


@functools.cache
def _any_of(names: frozenset[str]) -> re.Pattern[str]:
    """One pattern for the marks of ``names``: a scan finds the first character of any
    of them, and the next scan, from there, looks only for those still unseen, so a
    value is read about once however many classes it shows."""
    return re.compile("|".join(_MARKS[name] for name in sorted(names)))


def _spread(rng: random.Random, length: int, first: str, words: Sequence[str],
            gaps: Sequence[str], *, weights: Sequence[float] | None = None) -> str:
    """``first``, then words and gaps drawn in bulk until about ``length`` characters;
    sometimes with a zero-width character somewhere. One draw per part would make
    building a plan of 16 KiB values slower than running it."""
    mean = (sum(map(len, words)) / len(words)) + sum(map(len, gaps)) / len(gaps)
    count = max(0, math.ceil((length - len(first)) / mean))
    picked = rng.choices(words, weights, k=count)
    spaced = rng.choices(gaps, k=count)
    text = first + "".join(gap + word for gap, word in zip(spaced, picked, strict=True))
    if rng.random() < 0.3:
        cut = rng.randrange(len(text) + 1)
        text = f"{text[:cut]}{rng.choice(_ZERO_WIDTH)}{text[cut:]}"
    return text


@functools.cache
def _weights(fragments: int) -> tuple[float, ...]:
    """Fragments of the class 60% of the time, filler words the rest."""
    return (*(0.6 / fragments,) * fragments, *(0.4 / len(_FILLER),) * len(_FILLER))


def _cut(body: str, excess: int) -> str:
    """``body`` less at least ``excess`` bytes of UTF-8 from its end, never empty."""
    encoded = body.encode("utf-8")
    kept = encoded[: max(1, len(encoded) - excess)].decode("utf-8", errors="ignore")
    return kept or body[:1]

