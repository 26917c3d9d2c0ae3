"""What a generator is: a function from a :class:`Context` to one step list per worker,
with the parameters it accepts declared so a scenario file can be checked on load."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from invariants.levels import CLAIMABLE_LEVELS, Paraphrase
from invariants.wording.values import DEFAULT_VALUE_BYTES

from .._errors import MISSING, ScenarioError, did_you_mean
from ..plan import Step
from ._facts import Facts

__all__ = ["Context", "Generator", "GeneratorParam", "generator"]

ParamValue = int | float | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GeneratorParam:
    """One parameter a generator accepts from ``[params]``.

    ``kind`` is int, float, str or tuple (a list of strings in TOML). ``choices``
    restricts strings, and the items of a list. A generator that wants a parameter to
    grow with ``Scenario.plan``'s ``scale`` reads it through :meth:`Context.scaled`.
    """

    kind: type
    default: ParamValue
    help: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def check(self, path: Path, where: str, value: object) -> ParamValue:
        """The value as the generator will see it, or a ScenarioError saying why not."""
        if self.kind is tuple:
            return self._check_list(path, where, value)
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, self.kind):
            raise ScenarioError(
                path, where, value, f"is not {_KIND_NAMES[self.kind]}", self._fix()
            )
        if isinstance(value, int | float) and not (
            math.isfinite(value)
            and (self.minimum is None or value >= self.minimum)
            and (self.maximum is None or value <= self.maximum)
        ):
            raise ScenarioError(path, where, value, "is out of range", self._fix())
        if isinstance(value, str) and self.choices and value not in self.choices:
            raise ScenarioError(
                path, where, value, "is not allowed",
                f"{did_you_mean(value, self.choices)}{self._fix()}",
            )
        return value  # type: ignore[return-value]

    def _check_list(self, path: Path, where: str, value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ScenarioError(path, where, value, "is not a list of strings", self._fix())
        if self.minimum is not None and len(value) < self.minimum:
            raise ScenarioError(path, where, value, "is too short", self._fix())
        for position, item in enumerate(value):
            if self.choices and item not in self.choices:
                raise ScenarioError(
                    path, f"{where}[{position}]", item, "is not allowed",
                    f"{did_you_mean(item, self.choices)}{self._fix()}",
                )
        if len(set(value)) != len(value):
            raise ScenarioError(path, where, value, "repeats an item", self._fix())
        return tuple(value)

    def _fix(self) -> str:
        parts = [f"Give {_KIND_NAMES[self.kind]}"]
        if self.minimum is not None and self.maximum is not None and self.kind is not tuple:
            parts.append(f" in [{self.minimum:g}, {self.maximum:g}]")
        elif self.minimum is not None:
            noun = " item(s)" if self.kind is tuple else ""
            parts.append(f" of at least {self.minimum:g}{noun}")
        if self.choices:
            parts.append(f" from {', '.join(self.choices)}")
        return f"{''.join(parts)}: {self.help}."


_KIND_NAMES: Mapping[type, str] = {
    int: "an integer",
    float: "a number",
    str: "a string",
    tuple: "a list of strings",
}


@dataclass(frozen=True, slots=True)
class Context:
    """Everything a generator may depend on; the same context gives the same steps.

    A generator must draw randomness only from :meth:`rng` and names only from
    ``facts``; never from the global ``random``, the time, or the environment.
    """

    scenario: str
    seed: int
    workers: int
    level: Paraphrase
    scale: float
    params: Mapping[str, Any]
    facts: Facts = field(compare=False)
    max_value_bytes: int = DEFAULT_VALUE_BYTES
    """The longest value a write may carry, in bytes of UTF-8; ``facts`` draws plain
    texts up to it."""

    @property
    def levels(self) -> tuple[Paraphrase, ...]:
        """The paraphrase levels this plan may write: up to and including ``level``."""
        return CLAIMABLE_LEVELS[: CLAIMABLE_LEVELS.index(self.level) + 1]

    def rng(self, stream: int | str) -> random.Random:
        """An independent random stream: one per worker (its index), or named.

        Seeding with a string hashes it with SHA-512, so the stream is the same in
        every process, whatever PYTHONHASHSEED is.
        """
        return random.Random(f"{self.scenario}|{self.seed}|{stream}")

    def scaled(self, name: str) -> int:
        """An integer parameter multiplied by ``scale``, rounded, and at least 1."""
        value: int = self.params[name]
        return max(1, round(value * self.scale))


Build = Callable[[Context], Sequence[Sequence[Step]]]


@dataclass(frozen=True, slots=True)
class Generator:
    """A scenario's generator: ``build`` and the parameters it accepts.

    ``build`` returns exactly one step list per worker. It may assume ``params`` holds
    every declared parameter, checked, with defaults filled in.
    """

    build: Build
    params: Mapping[str, GeneratorParam]

    def check_params(self, path: Path, given: object) -> Mapping[str, ParamValue]:
        """The full parameter set for a scenario file's ``[params]`` table."""
        if given is MISSING:
            given = {}
        if not isinstance(given, dict):
            raise ScenarioError(
                path, "params", given, "is not a table",
                "Write the generator's parameters as a [params] table.",
            )
        checked: dict[str, ParamValue] = {}
        for name, value in given.items():
            if name not in self.params:
                raise ScenarioError(
                    path, f"params.{name}", value, "is not a parameter of this generator",
                    f"{did_you_mean(name, self.params)}It takes "
                    f"{', '.join(self.params) or 'no parameters'}.",
                )
            checked[name] = self.params[name].check(path, f"params.{name}", value)
        for name, param in self.params.items():
            checked.setdefault(name, param.default)
        return MappingProxyType(checked)


def generator(**params: GeneratorParam) -> Callable[[Build], Generator]:
    """Declare a build function as a generator taking ``params``."""

    def wrap(build: Build) -> Generator:
        return Generator(build=build, params=MappingProxyType(params))

    return wrap
