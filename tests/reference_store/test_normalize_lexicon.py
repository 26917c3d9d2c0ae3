"""Lexicon files: the shipped default, user extensions merged over it, and refusals."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from invariants.errors import InvalidArgument
from reference_store.normalize import DEFAULT_LEXICON_PATH, Lexicon, Normalizer, load_lexicon

FORMAT_HINT = f"See the header of {DEFAULT_LEXICON_PATH} for the format."


def says_all_alike(texts: Sequence[str]) -> list[list[float]]:
    return [[1.0] for _ in texts]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(InvalidArgument) as caught:
        load_lexicon(path)
    return str(caught.value)


def test_default_lexicon_is_shipped_next_to_the_code_and_documents_its_format() -> None:
    text = DEFAULT_LEXICON_PATH.read_text(encoding="utf-8")
    assert DEFAULT_LEXICON_PATH.parent.name == "normalize"
    for section in ("[negation]", "[drop]", "[phrases.<group>]", "[slots]"):
        assert f"#   {section}" in text
    assert set(tomllib.loads(text)) == {"negation", "drop", "phrases", "slots"}


def test_default_lexicon_is_loaded_once() -> None:
    assert load_lexicon() is load_lexicon()
    assert Normalizer().lexicon is load_lexicon()


def test_default_lexicon_covers_both_languages() -> None:
    lexicon = load_lexicon()
    expected = {"likes", "喜欢", "lives in", "住在", "speaks", "会说", "北京时间"}
    assert expected <= set(lexicon.phrases)
    assert {"not", "不", "没", "never"} <= lexicon.negation_cues
    assert len(set(lexicon.phrases.values())) >= 40
    assert len(set(lexicon.slots.values())) >= 15


def test_user_file_extends_and_overrides_the_default(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        [negation]
        cues = ["nope"]

        [drop]
        phrases = ["kinda"]

        [phrases.mine]
        "oat latte" = ["燕麦拿铁", "oatmilk latte"]
        "like" = ["digs"]

        [slots]
        "coffee preference" = ["java"]
        "drink preference" = ["coffee"]
        """,
    )
    normalizer = Normalizer(lexicon=load_lexicon(path))
    assert normalizer.value_key("Digs an oatmilk latte") == "like oat latte"
    assert normalizer.value_key("喜欢燕麦拿铁") == "like oat latte"
    assert normalizer.value_key("kinda likes americano") == "like americano"
    assert normalizer.attribute_key("Java") == "coffee preference"
    assert normalizer.attribute_key("coffee") == "drink preference"
    assert normalizer.attribute_key("咖啡偏好") == "coffee preference"


def test_user_negation_cues_guard_the_semantic_level(tmp_path: Path) -> None:
    path = write(tmp_path, '[negation]\ncues = ["nope"]\n')
    guarded = Normalizer("semantic", lexicon=load_lexicon(path), embedder=says_all_alike)
    unguarded = Normalizer("semantic", embedder=says_all_alike)
    assert not guarded.same_fact("likes latte", "nope, latte")
    assert unguarded.same_fact("likes latte", "nope, latte")


def test_chains_resolve_to_their_last_link() -> None:
    lexicon = Lexicon(
        phrases={"java": "coffee", "coffee": "kaffee", "Kaffee!": "kaffee"},
        slots={},
        negation_cues=[],
    )
    assert dict(lexicon.phrases) == {"java": "kaffee", "coffee": "kaffee", "kaffee": "kaffee"}
    assert lexicon.rewrite("java and coffee") == "kaffee and kaffee"


def test_rule_that_changes_negation_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[phrases.mine]\n"fine" = ["not bad"]\n')
    assert refusal(path) == (
        f"{path}: the rule 'not bad' -> 'fine' turns 1 negation cue(s) into 0, and "
        "negation is never folded away. Give the canonical form the same negation as the "
        "variant, or add the negating word to [negation] cues."
    )


def test_dropping_a_negation_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[drop]\nphrases = ["no way"]\n')
    assert refusal(path) == (
        f"{path}: the rule 'no way' -> nothing ([drop]) turns 1 negation cue(s) into 0, "
        "and negation is never folded away. Give the canonical form the same negation as "
        "the variant, or add the negating word to [negation] cues."
    )


def test_chinese_rule_that_changes_negation_is_refused() -> None:
    with pytest.raises(InvalidArgument) as caught:
        Lexicon(phrases={"不错": "好"}, slots={}, negation_cues=["不"], source="mine")
    assert str(caught.value) == (
        "mine: the rule '不错' -> '好' turns 1 negation cue(s) into 0, and negation is "
        "never folded away. Give the canonical form the same negation as the variant, or "
        "add the negating word to [negation] cues."
    )


def test_loop_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[phrases.mine]\n"alpha" = ["beta"]\n"beta" = ["alpha"]\n')
    assert refusal(path) == (
        f"{path}: the rules 'beta' -> 'alpha' -> 'beta' form a loop, so no form is "
        "canonical. Remove one of them."
    )


def test_name_with_two_meanings_in_one_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[slots]\n"city" = ["Base"]\n"employer" = ["base"]\n')
    assert refusal(path) == (
        f"{path}: the slot name 'base' is listed for both 'city' and 'employer'. "
        "Keep it under one of them."
    )


def test_phrase_that_folds_to_nothing_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[phrases.mine]\n"ok" = ["!!!"]\n')
    assert refusal(path) == (
        f"{path}: the phrase '!!!' is empty once case, punctuation and spaces are folded "
        "away, so it could never match. Remove it."
    )


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[synonyms]\n"like" = ["digs"]\n')
    assert refusal(path) == (
        f"{path}: unknown section [synonyms]. A lexicon has only the sections [negation], "
        f"[drop], [phrases], [slots]. {FORMAT_HINT}"
    )


def test_phrases_outside_a_group_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[phrases]\n"like" = "digs"\n')
    assert refusal(path) == f"{path}: [phrases.like] must be a table, not str. {FORMAT_HINT}"


def test_variants_must_be_a_list_of_strings(tmp_path: Path) -> None:
    path = write(tmp_path, '[phrases.mine]\n"like" = "digs"\n')
    assert refusal(path) == (
        f"{path}: [phrases.mine] 'like' must be a list of strings, not 'digs'. {FORMAT_HINT}"
    )


def test_invalid_toml_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "[phrases.mine\n")
    with pytest.raises(tomllib.TOMLDecodeError) as parse:
        tomllib.loads("[phrases.mine\n")
    assert refusal(path) == f"{path} is not valid TOML: {parse.value}. {FORMAT_HINT}"


def test_missing_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert refusal(path) == (
        f"lexicon {str(path)!r} could not be read ([Errno 2] No such file or directory: "
        f"{str(path)!r}). Pass the path of a UTF-8 TOML lexicon file. {FORMAT_HINT}"
    )
