"""The lexical level: fold synonyms, reworded templates and renamed slots from a lexicon.

A lexicon is three tables, all of them in surface form: phrases (a variant found
anywhere in a value becomes its canonical form, or vanishes if that form is empty),
slots (a whole attribute name becomes its slot's canonical name) and negation cues.
The format of the data file is documented at the top of ``lexicon.toml``.

No rule may change how many negation cues a phrase holds; that is checked when a
lexicon is built, so folding can never turn "does not like X" into "likes X".

Keys must be idempotent. Every canonical form is also a phrase of its own, so a key
fed back in matches its canonical forms whole and leaves them alone. A replacement can
still complete a longer phrase with its neighbour ("favourite" -> "favorite", then
"favorite drink is" -> "like"), so rewriting repeats until nothing changes.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from invariants.errors import InvalidArgument

from .phrases import compile_phrases, count, spaced
from .surface import fold

__all__ = ["DEFAULT_LEXICON_PATH", "Lexicon", "default_lexicon", "load_lexicon"]

DEFAULT_LEXICON_PATH = Path(__file__).with_name("lexicon.toml")

#: Real lexicons settle in two or three passes; the bound only keeps a pathological
#: user lexicon from hanging the write path.
_MAX_PASSES = 8
_SECTIONS = ("negation", "drop", "phrases", "slots")
_FORMAT_HINT = f"See the header of {DEFAULT_LEXICON_PATH} for the format."


class Lexicon:
    """Compiled, checked and immutable rules of the lexical level.

    ``phrases`` maps each variant to its canonical form ("" removes the variant);
    ``slots`` maps each attribute name to its slot; ``negation_cues`` are the words
    and characters that negate a statement. Every entry is folded to surface form
    first, and chains (a -> b, b -> c) are resolved to their last link.
    ``source`` names the origin in error messages.
    """

    __slots__ = ("_cue_pattern", "_cues", "_phrase_pattern", "_phrases", "_replacements", "_slots")

    def __init__(
        self,
        *,
        phrases: Mapping[str, str],
        slots: Mapping[str, str],
        negation_cues: Iterable[str],
        source: str = "lexicon",
    ) -> None:
        cues = frozenset(_fold_phrase(cue, "negation cue", source) for cue in negation_cues)
        table = _resolve(_fold_table(phrases, "phrase", source), source)
        self._cues = cues
        self._phrases: Mapping[str, str] = MappingProxyType(table)
        self._slots: Mapping[str, str] = MappingProxyType(
            _resolve(_fold_table(slots, "slot name", source), source)
        )
        self._replacements = {spaced(variant): spaced(form) for variant, form in table.items()}
        self._cue_pattern = compile_phrases(spaced(cue) for cue in cues)
        self._phrase_pattern = compile_phrases(self._replacements)
        self._check(source)

    @property
    def phrases(self) -> Mapping[str, str]:
        return self._phrases

    @property
    def slots(self) -> Mapping[str, str]:
        return self._slots

    @property
    def negation_cues(self) -> frozenset[str]:
        return self._cues

    def rewrite(self, text: str) -> str:
        """Fold the phrases of ``text``, which must already be in surface form."""
        for _ in range(_MAX_PASSES):
            tokens = spaced(text)
            replaced = self._phrase_pattern.sub(self._replacement, tokens)
            if replaced == tokens:
                break
            folded = fold(replaced)
            if folded == text:
                break
            text = folded
        return text

    def slot(self, name: str) -> str:
        """The canonical slot of an attribute name that is already in surface form."""
        return self._slots.get(name, name)

    def negations(self, text: str) -> int:
        """How many negation cues a surface-form text holds."""
        return count(self._cue_pattern, spaced(text))

    def _replacement(self, match: re.Match[str]) -> str:
        return self._replacements[match.group()]

    def _check(self, source: str) -> None:
        for variant, canonical in self._phrases.items():
            before, after = self.negations(variant), self.negations(canonical)
            if before != after:
                target = repr(canonical) if canonical else "nothing ([drop])"
                raise InvalidArgument(
                    f"{source}: the rule {variant!r} -> {target} turns {before} negation "
                    f"cue(s) into {after}, and negation is never folded away. Give the "
                    "canonical form the same negation as the variant, or add the negating "
                    "word to [negation] cues."
                )


def load_lexicon(path: str | os.PathLike[str] | None = None) -> Lexicon:
    """The default lexicon, with the TOML file at ``path`` (if any) merged over it.

    A variant or slot name in the user's file replaces the default mapping of that
    name; negation cues and dropped phrases are added to the default ones.
    """
    if path is None:
        return default_lexicon()
    default = _read(DEFAULT_LEXICON_PATH)
    user = _read(Path(path))
    return Lexicon(
        phrases={**default.phrases, **user.phrases},
        slots={**default.slots, **user.slots},
        negation_cues=default.cues | user.cues,
        source=os.fspath(path),
    )


@functools.cache
def default_lexicon() -> Lexicon:
    """The shipped lexicon, read and compiled once per process."""
    rules = _read(DEFAULT_LEXICON_PATH)
    return Lexicon(
        phrases=rules.phrases,
        slots=rules.slots,
        negation_cues=rules.cues,
        source=os.fspath(DEFAULT_LEXICON_PATH),
    )


@dataclass(frozen=True)
class _Rules:
    """The tables of one lexicon file, folded and checked, before merging."""

    cues: frozenset[str]
    phrases: dict[str, str]
    slots: dict[str, str]


def _read(path: Path) -> _Rules:
    source = os.fspath(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(
            f"lexicon {source!r} could not be read ({exc}). Pass the path of a UTF-8 TOML "
            f"lexicon file. {_FORMAT_HINT}"
        ) from exc
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{source} is not valid TOML: {exc}. {_FORMAT_HINT}") from exc
    return _parse(document, source)


def _parse(document: Mapping[str, object], source: str) -> _Rules:
    for key in document:
        if key not in _SECTIONS:
            raise InvalidArgument(
                f"{source}: unknown section [{key}]. A lexicon has only the sections "
                f"{', '.join(f'[{name}]' for name in _SECTIONS)}. {_FORMAT_HINT}"
            )
    negation = _table(document.get("negation", {}), "[negation]", source)
    drop = _table(document.get("drop", {}), "[drop]", source)
    cues = frozenset(
        _fold_phrase(cue, "negation cue", source)
        for cue in _strings(negation.get("cues", []), "[negation] cues", source)
    )
    phrases: dict[str, str] = {}
    for variant in _strings(drop.get("phrases", []), "[drop] phrases", source):
        _add(phrases, variant, "", "phrase", source)
    groups = _table(document.get("phrases", {}), "[phrases]", source)
    for group, entries in groups.items():
        where = f"[phrases.{group}]"
        for canonical, variants in _table(entries, where, source).items():
            for variant in _strings(variants, f"{where} {canonical!r}", source):
                _add(phrases, variant, canonical, "phrase", source)
    slots: dict[str, str] = {}
    for canonical, names in _table(document.get("slots", {}), "[slots]", source).items():
        for name in _strings(names, f"[slots] {canonical!r}", source):
            _add(slots, name, canonical, "slot name", source)
    return _Rules(cues, phrases, slots)


def _table(value: object, where: str, source: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise InvalidArgument(
            f"{source}: {where} must be a table, not {type(value).__name__}. {_FORMAT_HINT}"
        )
    return value


def _strings(value: object, where: str, source: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidArgument(
            f"{source}: {where} must be a list of strings, not {value!r}. {_FORMAT_HINT}"
        )
    return value


def _add(table: dict[str, str], raw: str, canonical: str, kind: str, source: str) -> None:
    """Record one folded rule, refusing a name that one file gives two meanings."""
    variant = _fold_phrase(raw, kind, source)
    target = _fold_phrase(canonical, "canonical form", source) if canonical else ""
    previous = table.setdefault(variant, target)
    if previous != target:
        shown = [repr(form) if form else "[drop]" for form in (previous, target)]
        raise InvalidArgument(
            f"{source}: the {kind} {raw!r} is listed for both {shown[0]} and {shown[1]}. "
            "Keep it under one of them."
        )


def _fold_phrase(raw: str, kind: str, source: str) -> str:
    folded = fold(raw)
    if not folded:
        raise InvalidArgument(
            f"{source}: the {kind} {raw!r} is empty once case, punctuation and spaces are "
            "folded away, so it could never match. Remove it."
        )
    return folded


def _fold_table(rules: Mapping[str, str], kind: str, source: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for variant, canonical in rules.items():
        _add(table, variant, canonical, kind, source)
    for canonical in set(table.values()):
        if canonical:
            table.setdefault(canonical, canonical)
    return table


def _resolve(table: dict[str, str], source: str) -> dict[str, str]:
    """Follow each rule to the end of its chain, so that one lookup gives the answer."""
    resolved: dict[str, str] = {}
    for variant in table:
        chain = [variant]
        target = table[variant]
        while target and table.get(target, target) != target:
            if target in chain:
                loop = " -> ".join(repr(step) for step in [*chain[chain.index(target) :], target])
                raise InvalidArgument(
                    f"{source}: the rules {loop} form a loop, so no form is canonical. "
                    "Remove one of them."
                )
            chain.append(target)
            target = table[target]
        resolved[variant] = target
    return resolved
