"""Surface variants: a text or an attribute name re-spelt as the surface level folds it.

Each transformation is one that surface normalization undoes (case, full width,
spacing, punctuation, separators), so a variant states its fact exactly as the
canonical text does, and a backend claiming ``surface`` must merge the two.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["attribute_surface_variant", "surface_variant"]

_FULL_WIDTH = {code: code + 0xFEE0 for code in range(0x21, 0x7F)} | {0x20: 0x3000}


def _upper(text: str, rng: random.Random) -> str:
    return text.upper()


def _capitalized(text: str, rng: random.Random) -> str:
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))


def _full_width(text: str, rng: random.Random) -> str:
    return text.translate(_FULL_WIDTH)


def _spaced(text: str, rng: random.Random) -> str:
    """Doubled spaces, padding, and spaces between Chinese characters."""
    spread = "".join(
        f"{char} " if "\u4e00" <= char <= "\u9fff" and rng.random() < 0.5 else char
        for char in text
    )
    return f"  {spread.replace(' ', '  ')} "


def _separated(text: str, rng: random.Random) -> str:
    return text.replace(" ", rng.choice(("_", "-", ".", "/")))


def _punctuated(text: str, rng: random.Random) -> str:
    choice = rng.randrange(4)
    if choice == 0:
        return f"{text}{rng.choice(('!', '.', '!!', '。', '！', '...'))}"
    if choice == 1:
        return f"“{text}”"
    if choice == 2:
        return text.replace(" ", ", ", 1) if " " in text else f"{text}."
    return f'"{text}"'


_TRANSFORMS: tuple[Callable[[str, random.Random], str], ...] = (
    _upper,
    _capitalized,
    _full_width,
    _spaced,
    _separated,
    _punctuated,
)


def surface_variant(text: str, rng: random.Random) -> str:
    """``text`` re-spelt by one or two surface transformations, never unchanged.

    Every transformation is one the surface level undoes: case, full width, spacing,
    punctuation, and the separators ``_ - . /`` in place of spaces.
    """
    for _ in range(8):
        variant = text
        for transform in rng.sample(_TRANSFORMS, rng.choice((1, 1, 2))):
            variant = transform(variant, rng)
        if variant != text:
            return variant
    return f" {text} "


def _attribute_separated(name: str, rng: random.Random) -> str:
    return name.replace("_", rng.choice((" ", "-", ".", "__")))


_ATTRIBUTE_TRANSFORMS: tuple[Callable[[str, random.Random], str], ...] = (
    _upper,
    _capitalized,
    _full_width,
    _attribute_separated,
    lambda name, rng: _capitalized(name.replace("_", " "), rng),
    lambda name, rng: f" {name} ",
)


def attribute_surface_variant(name: str, rng: random.Random) -> str:
    """An attribute name re-spelt as the surface level folds it back, never unchanged."""
    for _ in range(8):
        variant = rng.choice(_ATTRIBUTE_TRANSFORMS)(name, rng)
        if variant != name:
            return variant
    return f" {name} "
