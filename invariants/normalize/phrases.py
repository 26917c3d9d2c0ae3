"""Find lexicon phrases in text: whole tokens only, the longest phrase at each place.

Text is matched in *spaced* form, where every Chinese or Japanese character stands
apart as a token of its own (``喜欢美式`` is ``喜 欢 美 式``). A phrase then matches
only from token edge to token edge in every script, so ``like`` is not found inside
``unlike``, while Chinese, written without spaces, still matches anywhere.

The phrases are laid out as a trie and rendered as nested alternations, with longer
continuations before the end of a phrase, so the first match at a position is the
longest. Each branch opens with a literal character, which the regex engine checks
before entering it: a scan costs about one trie step per character of text, however
many phrases there are. A flat ``a|b|c`` alternation would try every phrase at every
position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .surface import CJK

__all__ = ["compile_phrases", "count", "spaced"]

_CJK_CHAR = re.compile(f"([{CJK}])")
_SPACES = re.compile(" {2,}")
_NEVER = re.compile(r"(?!)")
# Checked right after a phrase's first character, so that each branch still opens
# with a literal: the character before the phrase must be a space, or not exist.
_STARTS_TOKEN = "(?<![^ ].)"
_ENDS_TOKEN = "(?![^ ])"

_Trie = dict[str, "_Trie"]


def spaced(text: str) -> str:
    """Surface-form ``text`` with each Chinese or Japanese character set apart."""
    return _SPACES.sub(" ", _CJK_CHAR.sub(r" \1 ", text)).strip(" ")


def compile_phrases(phrases: Iterable[str]) -> re.Pattern[str]:
    """A pattern whose matches are the leftmost-longest of the (spaced) ``phrases``."""
    trie: _Trie = {}
    for phrase in phrases:
        node = trie
        for char in phrase:
            node = node.setdefault(char, {})
        node[""] = {}
    if not trie:
        return _NEVER
    return re.compile(_render(trie, first=True))


def count(pattern: re.Pattern[str], text: str) -> int:
    """How many non-overlapping phrases of ``pattern`` occur in (spaced) ``text``."""
    return sum(1 for _ in pattern.finditer(text))


def _render(node: _Trie, *, first: bool) -> str:
    branches = [
        re.escape(char) + (_STARTS_TOKEN if first else "") + _render(child, first=False)
        for char, child in sorted(node.items())
        if char
    ]
    if "" in node:
        branches.append(_ENDS_TOKEN)
    if len(branches) == 1:
        return branches[0]
    return "(?:" + "|".join(branches) + ")"
