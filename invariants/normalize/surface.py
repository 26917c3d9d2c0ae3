"""The surface level: fold the spellings of one text that no reader would tell apart.

Case, full/half width, Unicode composition, whitespace, punctuation and the separators
``_ - . /`` are noise. Symbols are not: ``C++``, ``UTC+8``, ``$5`` and ``50%`` keep
theirs, and so do ``# % & @`` although Unicode files them as punctuation, because
``C#`` is not ``C`` and an e-mail address must stay one.

Apostrophes are removed rather than turned into a separator, so ``doesn't`` folds to
``doesnt``, the word a lexicon can name. Chinese and Japanese are written without
spaces, so a space next to one of their characters is dropped: ``住在 北京`` and
``住在北京`` are one text.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CJK", "fold"]

#: Character ranges of scripts written without spaces between words (Han, kana,
#: bopomofo), as the body of a regex character class.
CJK = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
)

_KEPT = frozenset("#%&@")
_APOSTROPHES = frozenset("'\u2019")
_SPACE_BY_CJK = re.compile(f" (?=[{CJK}])|(?<=[{CJK}]) ")


# Punctuation, spaces and controls live only in planes 0, 1 and 14; planes 2 and 3
# hold ideographs, 15 and 16 private use, and the rest is unassigned.
_PLANES_WITH_SEPARATORS = (range(0x20000), range(0xE0000, 0xF0000))
_TO_SPACE = frozenset({"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Zs", "Zl", "Zp", "Cc"})


@functools.cache
def _separators() -> Mapping[int, str | None]:
    """Map every punctuation, space and control character to a space or to nothing.

    Built on first use rather than at import, since it scans Unicode.
    """
    table: dict[int, str | None] = {}
    for code in itertools.chain(*_PLANES_WITH_SEPARATORS):
        char = chr(code)
        category = unicodedata.category(char)
        if char in _APOSTROPHES or category == "Cf":
            table[code] = None
        elif char == "`" or (category in _TO_SPACE and char not in _KEPT):
            table[code] = " "
    return MappingProxyType(table)


def fold(text: str) -> str:
    """Return the surface form of ``text``; ``fold(fold(x)) == fold(x)`` for every str.

    NFKC runs again at the end because removing a character can bring a base and a
    combining mark together (``e'\u0301``, ``か \u3099``), which NFKC would compose on
    a second pass.
    """
    text = unicodedata.normalize("NFKC", text).casefold().translate(_separators())
    text = _SPACE_BY_CJK.sub("", " ".join(text.split()))
    return unicodedata.normalize("NFKC", text)
