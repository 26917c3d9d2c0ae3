"""The normalizer's levels, its negation guard and its option errors, on real text."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import reference_store.normalize as normalize
from invariants.errors import InvalidArgument
from invariants.normalize.semantic import similarity
from reference_store.normalize import Normalizer

LEXICAL = Normalizer()
SURFACE = Normalizer("surface")
REPO = Path(__file__).resolve().parents[2]


def bag_of_words(texts: Sequence[str]) -> list[list[float]]:
    """Word counts over the batch's own vocabulary: a tiny, deterministic embedder."""
    words = [text.lower().split() for text in texts]
    vocabulary = sorted({word for text in words for word in text})
    return [[float(text.count(word)) for word in vocabulary] for text in words]


def says_all_alike(texts: Sequence[str]) -> list[list[float]]:
    """An embedder that scores every pair as identical, to test what overrides it."""
    return [[1.0, 0.0] for _ in texts]


def test_public_names() -> None:
    assert sorted(normalize.__all__) == [
        "DEFAULT_LEXICON_PATH",
        "Embedder",
        "Level",
        "Lexicon",
        "Normalizer",
        "load_lexicon",
    ]


def test_default_level_is_lexical() -> None:
    assert Normalizer().level == "lexical"


def test_imports_without_sqlalchemy() -> None:
    # The parent package is the store and imports SQLAlchemy, so stand in an empty
    # one: what is checked is the normalizer's own imports.
    program = (
        "import sys, types\n"
        "sys.modules['sqlalchemy'] = None\n"
        "parent = types.ModuleType('reference_store')\n"
        f"parent.__path__ = [{str(REPO / 'reference_store')!r}]\n"
        "sys.modules['reference_store'] = parent\n"
        "from reference_store.normalize import Normalizer\n"
        "print(Normalizer().value_key('Likes Americano.'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.stderr == ""
    assert result.stdout == "like americano\n"


# -- surface ---------------------------------------------------------------------------

COFFEE_PREFERENCE_SPELLINGS = [
    "coffee_preference",
    "Coffee Preference",
    "coffee-preference",
    "ＣＯＦＦＥＥ　Preference",
    " coffee   preference. ",
    "COFFEE.PREFERENCE",
    "coffee/preference",
    "“coffee preference”",
]


@pytest.mark.parametrize("spelling", COFFEE_PREFERENCE_SPELLINGS)
@pytest.mark.parametrize("normalizer", [SURFACE, LEXICAL], ids=["surface", "lexical"])
def test_attribute_spellings_fold_together(normalizer: Normalizer, spelling: str) -> None:
    assert normalizer.attribute_key(spelling) == "coffee preference"


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Likes Americano.", "likes americano"),
        ("likes   americano!!", "LIKES\tAMERICANO"),
        ("喜欢美式。", "喜欢 美式"),
        ("喜欢，美式！", "喜欢美式"),
        ("住在 Beijing", "住在Beijing"),
        ("（喜欢美式）", "喜欢美式"),
        ("doesn't like tea", "doesn’t like tea"),
        ("ｌａｔｔｅ", "latte"),
        ("café", "cafe\u0301"),
    ],
)
def test_surface_value_variants_fold_together(a: str, b: str) -> None:
    assert SURFACE.value_key(a) == SURFACE.value_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("C++", "C"),
        ("C#", "C"),
        ("UTC+8", "UTC 8"),
        ("50%", "50"),
        ("bob@example.com", "bob example com"),
        ("$5", "5"),
    ],
)
def test_surface_keeps_meaningful_symbols(a: str, b: str) -> None:
    assert SURFACE.value_key(a) != SURFACE.value_key(b)


@pytest.mark.parametrize("normalizer", [SURFACE, LEXICAL], ids=["surface", "lexical"])
def test_surface_keys_contrast_different_values(normalizer: Normalizer) -> None:
    assert normalizer.value_key("likes americano") != normalizer.value_key("likes latte")
    assert not normalizer.same_fact("likes americano", "likes latte")


# -- lexical ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variants",
    [
        pytest.param(["喜欢美式", "偏好美式咖啡", "常喝美式", "爱喝美式咖啡"], id="chinese"),
        pytest.param(
            ["likes americano", "prefers americano", "is fond of americano", "likes an americano"],
            id="english",
        ),
        pytest.param(
            [
                "My favourite drink is Americano.",
                "I usually drink americano",
                "我最喜欢的饮料是美式",
            ],
            id="templates",
        ),
        pytest.param(["likes americano", "喜欢美式"], id="across-languages"),
        pytest.param(
            ["住在北京", "lives in Beijing", "based in beijing", "I live in 北京"], id="city"
        ),
        pytest.param(["speaks English", "会说英语"], id="language"),
        pytest.param(["works as a software engineer", "职业是软件工程师"], id="job"),
        pytest.param(["UTC+08:00", "Asia/Shanghai", "北京时间", "GMT+8"], id="timezone"),
        pytest.param(["never drinks coffee", "从不喝咖啡"], id="never"),
    ],
)
def test_lexical_values_fold_together(variants: list[str]) -> None:
    keys = {LEXICAL.value_key(variant) for variant in variants}
    assert len(keys) == 1, keys
    assert all(LEXICAL.same_fact(variants[0], other) for other in variants[1:])


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("Likes an Americano.", "like americano"),
        ("不喜欢美式", "not like americano"),
        ("住在 Beijing", "live in beijing"),
        ("美式英语", "american english"),
        ("冰美式", "iced americano"),
    ],
)
def test_lexical_keys_are_readable(value: str, key: str) -> None:
    assert LEXICAL.value_key(value) == key


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("unlike americano", "like americano"),
        ("likely", "like"),
        ("美式英语", "美式"),
        ("冰美式", "美式"),
        ("likes americano", "likes latte"),
        ("喜欢美式", "喜欢拿铁"),
        ("lives in Beijing", "lives in Shanghai"),
        ("born in Beijing", "lives in Beijing"),
    ],
)
def test_lexical_keeps_different_facts_apart(a: str, b: str) -> None:
    assert LEXICAL.value_key(a) != LEXICAL.value_key(b)


@pytest.mark.parametrize(
    ("names", "slot"),
    [
        (
            ["coffee_preference", "favorite_coffee", "咖啡偏好", "coffee", "Favourite Coffee"],
            "coffee preference",
        ),
        (["city of residence", "所在城市", "Home-City", "location"], "city"),
        (["time_zone", "TZ", "时区"], "timezone"),
        (["occupation", "职业", "Job Title"], "job"),
    ],
)
def test_slot_names_fold_to_one_slot(names: list[str], slot: str) -> None:
    assert {LEXICAL.attribute_key(name) for name in names} == {slot}


def test_slots_match_whole_attribute_names_only() -> None:
    assert LEXICAL.attribute_key("coffee machine") == "coffee machine"
    assert SURFACE.attribute_key("favorite_coffee") == "favorite coffee"


# -- negation --------------------------------------------------------------------------

NEGATION_PAIRS = [
    ("likes americano", "does not like americano"),
    ("likes americano", "doesn't like americano"),
    ("likes americano", "dislikes americano"),
    ("likes americano", "is not a fan of americano"),
    ("喜欢美式", "不喜欢美式"),
    ("喜欢美式", "不爱喝美式"),
    ("喜欢美式", "讨厌美式"),
    ("drinks coffee", "never drinks coffee"),
    ("常喝咖啡", "从不喝咖啡"),
    ("has a car", "has no car"),
]


@pytest.mark.parametrize(("positive", "negative"), NEGATION_PAIRS)
@pytest.mark.parametrize("level", ["surface", "lexical", "semantic"])
def test_negation_is_never_folded_away(level: str, positive: str, negative: str) -> None:
    normalizer = Normalizer(level, embedder=says_all_alike)  # type: ignore[arg-type]
    assert normalizer.value_key(positive) != normalizer.value_key(negative)
    assert not normalizer.same_fact(positive, negative)


@pytest.mark.parametrize(
    "variants",
    [
        [
            "does not like americano",
            "doesn't like americano",
            "dislikes americano",
            "不喜欢美式",
            "不爱喝美式",
        ],
        ["never drinks coffee", "从不喝咖啡", "从来不喝咖啡"],
    ],
)
def test_negated_variants_fold_together(variants: list[str]) -> None:
    assert len({LEXICAL.value_key(variant) for variant in variants}) == 1


# -- semantic --------------------------------------------------------------------------


def test_semantic_threshold_is_inclusive() -> None:
    # The bags share 4 of 5 words each, so the cosine is exactly 4/5.
    a, b = "enjoys hiking in the alps", "enjoys hiking in the mountains"
    assert LEXICAL.value_key(a) != LEXICAL.value_key(b)
    assert Normalizer("semantic", embedder=bag_of_words, threshold=0.8).same_fact(a, b)
    assert not Normalizer("semantic", embedder=bag_of_words, threshold=0.81).same_fact(a, b)
    assert not Normalizer("lexical", embedder=bag_of_words, threshold=0.8).same_fact(a, b)


def test_semantic_keys_are_the_lexical_keys() -> None:
    semantic = Normalizer("semantic", embedder=bag_of_words)
    for value in ["Likes an Americano.", "不喜欢美式", "enjoys hiking in the alps"]:
        assert semantic.value_key(value) == LEXICAL.value_key(value)
    assert semantic.attribute_key("咖啡偏好") == "coffee preference"


def test_negation_guard_overrides_the_embedder() -> None:
    a, b = "hiking in the alps every summer", "not hiking in the alps every summer"
    assert math.isclose(similarity(bag_of_words, a, b), 6 / math.sqrt(6 * 7))
    semantic = Normalizer("semantic", embedder=bag_of_words, threshold=0.9)
    assert not semantic.same_fact(a, b)
    assert Normalizer("semantic", embedder=says_all_alike).same_fact("likes tea", "enjoys chai")
    assert not Normalizer("semantic", embedder=says_all_alike).same_fact("likes tea", "没喝过茶")


def test_a_different_number_is_a_different_fact_whatever_the_embedder_says() -> None:
    alike = Normalizer("semantic", embedder=says_all_alike)
    assert not alike.same_fact("lives in room 101", "lives in room 102")
    assert not alike.same_fact("owns 2 cats", "owns 12 cats")
    assert not alike.same_fact("flight LH400", "flight LH4000")
    assert alike.same_fact("lives in room 101", "has room 101 as home")
    assert alike.same_fact("born 1990 in May", "May 1990 birthday")


class _LatinOnly:
    """Says every text is alike, and that it cannot read anything but ASCII."""

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return says_all_alike(texts)

    def unreadable(self, text: str) -> list[str]:
        return [char for char in text if not char.isascii()]


def test_values_that_differ_where_the_embedder_is_blind_are_never_merged() -> None:
    blind = Normalizer("semantic", embedder=_LatinOnly())
    assert not blind.same_fact("likes 奶茶", "likes 绿茶")
    assert blind.same_fact("likes 奶茶", "enjoys 奶茶")
    assert blind.same_fact("likes tea", "enjoys chai")


def test_embedder_is_not_consulted_below_semantic_or_on_equal_keys() -> None:
    calls: list[Sequence[str]] = []

    def recording(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        return bag_of_words(texts)

    assert not Normalizer("lexical", embedder=recording).same_fact("likes tea", "enjoys chai")
    semantic = Normalizer("semantic", embedder=recording)
    assert semantic.same_fact("likes tea", "喜欢茶")
    assert calls == []
    semantic.same_fact("likes tea", "enjoys chai")
    assert calls == [["likes tea", "enjoys chai"]]


def test_zero_vectors_are_never_alike() -> None:
    semantic = Normalizer("semantic", embedder=lambda texts: [[0.0, 0.0] for _ in texts])
    assert not semantic.same_fact("likes tea", "enjoys chai")


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        (
            lambda texts: [[1.0]],
            "embedder returned 1 vector(s) for 2 texts. An embedder must return one "
            "vector per text, in order.",
        ),
        (
            lambda texts: [[1.0], [1.0, 0.0]],
            "embedder returned vectors of lengths 1 and 2. An embedder must give every "
            "text a vector of the same length.",
        ),
    ],
)
def test_misbehaving_embedder_is_named(embedder: normalize.Embedder, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Normalizer("semantic", embedder=embedder).same_fact("likes tea", "enjoys chai")
    assert str(caught.value) == message


# -- option errors ---------------------------------------------------------------------


def test_semantic_without_embedder_says_how_to_fix_it() -> None:
    with pytest.raises(InvalidArgument) as caught:
        Normalizer("semantic")
    assert str(caught.value) == (
        "level='semantic' needs an embedder, and none was given. Pass embedder=<a "
        "function that maps a list of texts to one vector per text>, or use "
        "level='lexical'."
    )


@pytest.mark.parametrize(
    ("threshold", "message"),
    [
        (
            0,
            "threshold=0 (type int) is outside (0, 1]. Pass the cosine similarity at "
            "which two values are one fact, e.g. threshold=0.9.",
        ),
        (
            1.5,
            "threshold=1.5 (type float) is outside (0, 1]. Pass the cosine similarity "
            "at which two values are one fact, e.g. threshold=0.9.",
        ),
        (
            -0.1,
            "threshold=-0.1 (type float) is outside (0, 1]. Pass the cosine similarity "
            "at which two values are one fact, e.g. threshold=0.9.",
        ),
        (
            math.nan,
            "threshold=nan (type float) is outside (0, 1]. Pass the cosine "
            "similarity at which two values are one fact, e.g. threshold=0.9.",
        ),
        (
            "0.9",
            "threshold='0.9' (type str) is not a number. Pass the cosine similarity at "
            "which two values are one fact, in (0, 1], e.g. threshold=0.9.",
        ),
        (
            True,
            "threshold=True (type bool) is not a number. Pass the cosine similarity at "
            "which two values are one fact, in (0, 1], e.g. threshold=0.9.",
        ),
    ],
)
def test_threshold_outside_range_is_refused(threshold: object, message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Normalizer("semantic", embedder=bag_of_words, threshold=threshold)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_threshold_of_one_is_accepted() -> None:
    assert Normalizer("semantic", embedder=bag_of_words, threshold=1).threshold == 1.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"level": "fuzzy"},
            "level='fuzzy' (type str) is not a normalization level. Use 'surface', "
            "'lexical' or 'semantic'.",
        ),
        (
            {"embedder": 3},
            "embedder=3 (type int) is not callable. Pass a function that maps a list of "
            "texts to one vector per text.",
        ),
        (
            {"lexicon": "lexicon.toml"},
            "lexicon='lexicon.toml' (type str) is not a Lexicon. Build one with "
            "load_lexicon(path), or pass lexicon=None for the default.",
        ),
    ],
)
def test_unusable_options_are_named(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        Normalizer(**kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


# -- size ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "unit", ["I usually drink americano, 不喜欢美式; ", "美", "a ", "is a big fan "]
)
def test_64_kib_values_normalize_in_linear_time(unit: str) -> None:
    value = (unit * (65536 // len(unit) + 1))[:65536]
    started = time.perf_counter()
    key = LEXICAL.value_key(value)
    elapsed = time.perf_counter() - started
    assert LEXICAL.value_key(key) == key
    # Linear work takes tens of milliseconds here; quadratic work would take minutes.
    assert elapsed < 2.0
