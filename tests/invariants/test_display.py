"""Stored text as the explanations show it: nothing invisible, nothing too long, widths in
terminal columns."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invariants.display import ELLIPSIS, clip, columns, escape, quote, wrap


@pytest.mark.parametrize(("text", "shown"), [
    ("job\u200b", "job\\u200b"),          # zero-width space
    ("\ufeffjob", "\\ufeffjob"),          # byte-order mark
    ("a\u00a0b", "a\\xa0b"),              # no-break space
    ("a\tb\nc\rd", "a\\tb\\nc\\rd"),
    ("\x00\x1b[31m", "\\x00\\x1b[31m"),   # NUL, and the escape that starts a colour
    ("\u200f(א)\u200e", "\\u200f(א)\\u200e"),  # bidi marks, the Hebrew kept
    ("职业\u3000［ｐｆ５］", "职业\\u3000［ｐｆ５］"),  # the ideographic space only
    ("\U000e0001", "\\U000e0001"),        # a language tag, beyond the BMP
    ("back\\slash", "back\\\\slash"),
    ("plain words, café", "plain words, café"),
])
def test_invisible_and_control_characters_are_escaped_the_rest_kept(text, shown):
    assert escape(text) == shown


def test_a_combining_mark_and_an_emoji_stay_as_they_are():
    assert escape("e\u0301 🏳️") == "e\u0301 🏳️"


def test_two_attributes_that_print_alike_are_told_apart():
    assert quote("job", mark="'") != quote("job\u200b", mark="'")
    assert quote("job", mark="'") == "'job'"


def test_the_quote_mark_is_escaped_inside_and_nothing_is_cut_without_a_limit():
    value = 'say "hi"' * 100
    assert quote(value) == '"' + value.replace('"', '\\"') + '"'
    assert quote("it's", mark="'") == "'it\\'s'"


@pytest.mark.parametrize(("text", "width"), [
    ("abc", 3), ("职业", 4), ("ｊｏｂ", 6), ("e\u0301", 1), ("", 0), ("a\u200bb", 2),
])
def test_columns_count_wide_characters_two_and_combining_marks_none(text, width):
    assert columns(text) == width


def test_a_long_value_keeps_its_head_and_tail_and_states_its_length():
    value = "lives in Tokyo " + "x" * 500 + " and the end"
    shown = quote(value, 30)
    assert shown.startswith('"lives in Tokyo')
    assert shown.endswith(f'the end" ({len(value):,} chars)')
    inner = shown[1:shown.index('" (')]
    assert ELLIPSIS in inner and columns(inner) <= 30


def test_a_value_that_fits_is_not_cut_and_states_no_length():
    assert quote("does not work as doctor [pf10]", 32) == '"does not work as doctor [pf10]"'


def test_a_cut_never_splits_an_escape_and_counts_it_whole():
    value = "\u200b" * 40
    inner = clip(value, 20)
    assert ELLIPSIS in inner and columns(inner) <= 20
    assert inner.replace(ELLIPSIS, "").replace("\\u200b", "") == ""


def test_wide_text_is_cut_in_columns_not_characters():
    inner = clip("职业是产品经理" * 10, 20)
    assert columns(inner) <= 20
    assert len(inner) <= 11


def test_combining_marks_cannot_make_a_cut_value_long():
    inner = clip("Z" + "\u0335" * 500, 10)
    assert len(inner) <= 10
    assert not unicodedata.combining(inner[inner.index(ELLIPSIS) + 1:][:1] or "a")


def test_wrap_holds_the_width_in_columns_for_wide_text():
    text = "W2 op 11464: write ' job ' = " + "职业是产品经理［ｐｆ５］" * 8 + " -> applied"
    lines = wrap(text, 40, "  ", "      ")
    assert all(columns(line) <= 40 for line in lines)
    assert lines[0].startswith("  W2") and all(line.startswith("      ") for line in lines[1:])
    assert "".join(line.strip() for line in lines).replace(" ", "") == text.replace(" ", "")


def test_wrap_breaks_at_spaces_and_keeps_a_short_text_whole():
    assert wrap("one two three", 100, "> ") == ["> one two three"]
    assert wrap("one two three", 9) == ["one two", "three"]
    assert wrap("", 10, "  x ") == ["  x"]


@given(st.text(max_size=200), st.integers(min_value=3, max_value=60))
def test_any_text_is_shown_within_its_limit_with_nothing_hidden(text, limit):
    inner = clip(text, limit)
    assert columns(inner) <= limit
    assert not any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in inner)
    assert (ELLIPSIS in inner) or inner == escape(text)


def test_wrap_reads_a_tab_or_a_line_break_as_a_space():
    assert wrap("one\ntwo\tthree", 100) == ["one two three"]


HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}


def test_every_code_point_is_escaped_exactly_when_a_terminal_would_hide_it():
    """escape's fast path (str.isprintable) must agree with the categories, one by one."""
    for code in range(0x110000):
        ch = chr(code)
        hidden = ch != " " and unicodedata.category(ch) in HIDDEN
        assert (escape(ch) != ch) == (hidden or ch == "\\"), hex(code)


def cut_the_whole_text(text: str, limit: int, mark: str) -> str:
    """The cut as clip's docstring states it, over every character of the text."""
    shown = [escape(ch, mark) for ch in text]
    cost = [max(columns(token), 1) for token in shown]
    if sum(cost) <= limit:
        return "".join(shown)
    room = max(limit - columns(ELLIPSIS), 2)
    used, h = 0, 0
    while h < len(shown) and used + cost[h] <= (room + 1) // 2:
        used, h = used + cost[h], h + 1
    t = len(shown)
    while t > h and used + cost[t - 1] <= room:
        used, t = used + cost[t - 1], t - 1
    while t < len(shown) and columns(shown[t]) == 0:
        t += 1
    return "".join(shown[:h]) + ELLIPSIS + "".join(shown[t:])


@given(st.text(alphabet="ab 咖啡\u200b\u0301\t\\\"é\ufeff…", max_size=3000),
       st.integers(min_value=0, max_value=120), st.sampled_from(["", '"']))
def test_a_long_text_is_cut_as_if_every_character_had_been_read(text, limit, mark):
    """clip reads only as much of each end as the limit can show, and escape a long
    text in runs as it would a character at a time."""
    assert escape(text, mark) == "".join(escape(ch, mark) for ch in text)
    assert clip(text, limit, mark) == cut_the_whole_text(text, limit, mark)
    whole = quote(text, limit, mark or '"')
    assert whole.endswith(" chars)") == (clip(text, limit, mark or '"') != escape(
        text, mark or '"'))
