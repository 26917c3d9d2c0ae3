"""The scenarios' wording vocabulary, which is :mod:`invariants.wording`.

The tables of which texts state one fact, and at which paraphrase level, are shared
with the stateful machine, which sits below the scenarios in the layers; so they live in
:mod:`invariants.wording`, and this module keeps the names the scenarios (and the
tools built on them) have always imported from here.
"""

from __future__ import annotations

from invariants.wording import (
    LANGS,
    SLOTS,
    Lang,
    Phrasing,
    SlotWording,
    Templates,
    attribute_surface_variant,
    phrasing,
    surface_variant,
)

Wording = Templates
"""The former name of :class:`~invariants.wording.Templates`, kept importable."""

__all__ = [
    "LANGS",
    "SLOTS",
    "Lang",
    "Phrasing",
    "SlotWording",
    "Templates",
    "Wording",
    "attribute_surface_variant",
    "phrasing",
    "surface_variant",
]
