"""Hypothesis properties of the normalizer: idempotent, surface-blind, negation-preserving."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import example, given
from hypothesis import strategies as st

from reference_store.normalize import Normalizer, load_lexicon

LEXICON = load_lexicon()
SURFACE = Normalizer("surface")
LEXICAL = Normalizer("lexical")


def says_all_alike(texts: Sequence[str]) -> list[list[float]]:
    return [[1.0] for _ in texts]


SEMANTIC = Normalizer("semantic", embedder=says_all_alike)
LEVELS = [SURFACE, LEXICAL, SEMANTIC]

# Text made of lexicon phrases glued by separators, stray letters and marks, which is
# where a rewrite could complete a different phrase with its neighbour on a second pass.
_PIECES = sorted(set(LEXICON.phrases) | set(LEXICON.phrases.values()) | LEXICON.negation_cues)
_GLUE = st.sampled_from(["", " ", ",", "_", "-", "'", "。", "s", "x", "美", "\u0301", "Ａ"])
lexicon_text = st.lists(
    st.one_of(st.sampled_from(_PIECES), _GLUE, st.text(max_size=3)), max_size=10
).map("".join)
any_text = st.one_of(st.text(), lexicon_text)


@given(any_text)
# Removing a character can bring a base and a combining mark together.
@example("e'\u0301")
@example("か \u3099")
@example("\u1100'\u1161")
# Casefolding decomposes this one; NFKC composes it again.
@example("\u01f0")
# A rewrite completes a longer phrase with its neighbour only on a second pass.
@example("my favourite drink is americano")
def test_keys_are_idempotent(text: str) -> None:
    for normalizer in (SURFACE, LEXICAL):
        value_key = normalizer.value_key(text)
        assert normalizer.value_key(value_key) == value_key
        attribute_key = normalizer.attribute_key(text)
        assert normalizer.attribute_key(attribute_key) == attribute_key


@given(any_text)
def test_a_value_is_the_same_fact_as_its_key(text: str) -> None:
    for normalizer in LEVELS:
        assert normalizer.same_fact(text, normalizer.value_key(text))


_FULL_WIDTH = 0xFEE0  # distance from ASCII "!".."~" to its full-width form


@st.composite
def rendered(draw: st.DrawFn, words: list[str]) -> str:
    """``words`` spelled with random case, width, separators, spaces and punctuation."""

    def letter(char: str) -> str:
        char = char.upper() if draw(st.booleans()) else char
        return chr(ord(char) + _FULL_WIDTH) if draw(st.booleans()) else char

    separator = st.lists(
        st.sampled_from([" ", "_", "-", ".", "/", "\u3000", "\t", "\n", ", ", "，", "、", "; "]),
        min_size=1,
        max_size=3,
    ).map("".join)
    edge = st.sampled_from(["", " ", "  ", "\t", ".", "!", "...", "。", "！", "？", "“", "（", '"'])
    parts = ["".join(letter(char) for char in word) for word in words]
    body = parts[0] + "".join(draw(separator) + part for part in parts[1:])
    return draw(edge) + body + draw(edge)


words = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8),
    min_size=1,
    max_size=4,
)


@given(st.data(), words)
def test_surface_variants_fold_together(data: st.DataObject, plain: list[str]) -> None:
    first, second = data.draw(rendered(plain)), data.draw(rendered(plain))
    assert SURFACE.value_key(first) == " ".join(plain)
    assert SURFACE.attribute_key(first) == " ".join(plain)
    assert LEXICAL.value_key(first) == LEXICAL.value_key(second)
    assert LEXICAL.attribute_key(first) == LEXICAL.attribute_key(second)
    assert SEMANTIC.same_fact(first, second)


han = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
noise = st.sampled_from(
    ["", " ", "　", "，", "。", "、", "！", "？", "；", "：", "“", "”", "（", "）"]
)


@given(st.lists(st.tuples(han, noise), min_size=1, max_size=8))
def test_chinese_ignores_spaces_and_punctuation(chars: list[tuple[str, str]]) -> None:
    plain = "".join(char for char, _ in chars)
    spelled = "".join(char + mark for char, mark in chars)
    assert SURFACE.value_key(spelled) == plain
    assert LEXICAL.value_key(spelled) == LEXICAL.value_key(plain)


_LIKE = sorted(variant for variant, form in LEXICON.phrases.items() if form == "like")
_OBJECTS = sorted(
    variant
    for variant, form in LEXICON.phrases.items()
    if form in {"americano", "latte", "tea", "coffee", "green tea", "beijing", "english"}
)
_NEGATIONS = ["not", "does not", "doesn't", "do not", "never", "不", "没有", "从不", "别", "isn't"]


def _negate(prefix: str, statement: str) -> str:
    return f"{prefix} {statement}" if prefix.isascii() else prefix + statement


@given(st.sampled_from(_LIKE), st.sampled_from(_OBJECTS), st.sampled_from(_NEGATIONS))
def test_negated_lexicon_statements_never_fold(verb: str, obj: str, prefix: str) -> None:
    positive = f"{verb} {obj}"
    negative = _negate(prefix, positive)
    for normalizer in LEVELS:
        assert normalizer.value_key(positive) != normalizer.value_key(negative)
        assert not normalizer.same_fact(positive, negative)


@given(any_text, st.sampled_from(_NEGATIONS))
def test_negating_any_text_never_folds(text: str, prefix: str) -> None:
    negative = _negate(prefix, text)
    for normalizer in LEVELS:
        assert normalizer.value_key(text) != normalizer.value_key(negative)
    assert not SEMANTIC.same_fact(text, negative)
