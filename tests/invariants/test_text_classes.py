"""``text_classes`` finds every class a text shows in one scan; here it is compared with
the plain definition, one search per class, on texts drawn from every class's marks."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from invariants.wording.values import LONG_VALUE_CHARS, WHITESPACE, text_classes

SCRIPTS = {
    "emoji": "[\U0001f000-\U0001faff\u200d]",
    "full_width": "[\uff01-\uffee]",
    "rtl": "[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\u200f\u202b\u202e\u2067]",
    "combining": "[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f"
                 "\u093a-\u094f\u0e31-\u0e4e\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
                 "\u3099\u309a\ufe20-\ufe2f]",
}


def by_definition(value: str) -> frozenset[str]:
    """The classes of docs/scenarios.md, one search each."""
    found = set()
    if len(value) > LONG_VALUE_CHARS:
        found.add("long")
    odd = "[" + re.escape(WHITESPACE.replace(" ", "")) + "]"
    if value[:1].isspace() or value[-1:].isspace() or re.search(odd, value):
        found.add("whitespace")
    if "\\" in value:
        found.add("backslash")
    if any(mark in value for mark in ("'", '"', ";--", "`", "%")):
        found.add("sql")
    if (any(mark in value for mark in ('\\"', "\\n", "\\u", "\\/", '{"'))
            or re.search("[\x01-\x08\x0e-\x1b\x7f]", value)):
        found.add("json")
    if unicodedata.normalize("NFC", value) != value:
        found.add("normalization")
    found.update(name for name, chars in SCRIPTS.items() if re.search(chars, value))
    return frozenset(found)


MARKS = ("a", "Z", " ", "\t", "\n", "\x01", "\x7f", "\\", "'", '"', "{", "%", "`", ";", "-",
         "u", "n", "/", "\u3000", "\xa0", "\u2028", "\U0001f600", "\u200d", "\uff21", "\u05e9",
         "\u05b8", "\u0301", "e", "\u1100", "\u1161", "\u2126", "\u309a", "\u0e34", "代", "\ufeff")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(MARKS), max_size=40).map("".join)
       | st.text(max_size=60)
       | st.builds(lambda head, n: head * n, st.text(max_size=3), st.integers(300, 400)))
def test_one_scan_finds_what_one_search_per_class_finds(value):
    assert text_classes(value) == by_definition(value)
