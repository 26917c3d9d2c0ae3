"""A named scenario: its file, checked, and how it turns into a plan."""

from __future__ import annotations

import importlib
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, cast

from invariants.errors import InvalidArgument
from invariants.history import Paraphrase
from invariants.levels import CLAIMABLE_LEVELS
from invariants.wording.values import DEFAULT_VALUE_BYTES, check_max_value_bytes

from ._coverage import COVERAGE, PARAPHRASE_CONDITIONS
from ._errors import MISSING, ScenarioError, did_you_mean, shown
from ._faults import fault_spec
from ._files import find, names_in, read_table, reject_unknown, require_str
from ._network import network
from ._processes import processes
from ._service import service
from .generators import Context, Facts, Generator
from .generators._facts import scenario_code
from .network_plan import Network
from .plan import FaultSpec, Plan, Step
from .process_plan import Processes
from .service_plan import Service

__all__ = ["SCENARIO_DIR", "Scenario", "list_scenarios", "load_scenario"]

SCENARIO_DIR = Path(__file__).parent
_FIELDS = ("description", "generator", "params", "faults", "requires", "network", "processes",
           "tag", "service")
_KINDS = ("write", "delete", "restore", "read")


@dataclass(frozen=True)
class Scenario:
    """A scenario file, checked: what to generate, with which faults, to cover what.

    ``name`` is the file's stem. ``params`` holds every parameter of the generator,
    defaults filled in. ``requires`` lists the coverage conditions the plan is built to
    produce (see ``scenarios.COVERAGE``). ``network``, from the ``[network]`` table,
    puts the workers in client groups behind fault proxies under a nemesis timeline
    (:mod:`scenarios.network_plan`). ``processes``, from the ``[processes]`` table, runs
    the workers in worker processes (:mod:`scenarios.process_plan`).
    """

    name: str
    description: str
    generator: str
    params: Mapping[str, Any]
    faults: tuple[FaultSpec, ...]
    requires: tuple[str, ...]
    path: Path = field(compare=False)
    implementation: Generator = field(compare=False, repr=False)
    network: Network | None = None
    processes: Processes | None = None
    service: Service | None = None
    """How memcert starts the service this scenario crashes or pauses, if it says."""
    tag: str = ""
    """What starts every tag its values carry: the ``tag`` field, or the initials of
    its name; two scenarios of one suite must differ in it."""

    def plan(self, *, seed: int, workers: int, level: str, scale: float = 1.0,
             max_value_bytes: int = DEFAULT_VALUE_BYTES) -> Plan:
        """The plan for these arguments; the same arguments always give an equal plan.

        ``level`` is the highest paraphrase level the plan writes; the paraphrase
        conditions above it are dropped from ``requires``. ``scale`` multiplies the
        parameters the generator reads through ``Context.scaled`` (its volume), not its shape.
        ``max_value_bytes`` bounds every value, in bytes of UTF-8 (at most the contract's
        64 KiB).
        """
        _check_arguments(seed, workers, level, scale)
        check_max_value_bytes(max_value_bytes, "max_value_bytes")
        ctx = Context(
            scenario=self.name,
            seed=seed,
            workers=workers,
            level=cast(Paraphrase, level),
            scale=float(scale),
            params=self.params,
            facts=Facts(self.tag or scenario_code(self.name), seed=seed,
                        max_value_bytes=max_value_bytes),
            max_value_bytes=max_value_bytes,
        )
        steps = tuple(tuple(mine) for mine in self.implementation.build(ctx))
        self._check_steps(steps, ctx)
        allowed = ("none", *ctx.levels)
        requires = tuple(
            name for name in self.requires
            if PARAPHRASE_CONDITIONS.get(name, "none") in allowed
        )
        return Plan(
            scenario=self.name, seed=seed, workers=steps, faults=self.faults, requires=requires,
            network=self.network, processes=self.processes,
        )

    def _check_steps(self, workers: Sequence[Sequence[Step]], ctx: Context) -> None:
        """Hold any generator, the shipped ones included, to the ground-truth rules.

        The checkers trace each record back to its write by (namespace, entity_id,
        value) and trust the write's meta, so a text shared by two facts, or a fact
        spread over two keys, would make their verdicts wrong rather than fail loudly.
        """
        if len(workers) != ctx.workers:
            self._broken(f"it returned {len(workers)} step lists for {ctx.workers} workers",
                         "Return exactly one list of steps per worker")
        allowed = ("none", *ctx.levels)
        fact_of_value: dict[str, str] = {}
        key_of_fact: dict[str, tuple[str, str, str]] = {}
        for worker, steps in enumerate(workers):
            for index, step in enumerate(steps):
                where = f"worker {worker}, step {index}"
                if not isinstance(step, Step) or step.kind not in _KINDS:
                    self._broken(f"{where} is {shown(step)}", "Yield chaos.plan.Step objects")
                if not (math.isfinite(step.pause_s) and step.pause_s >= 0):
                    self._broken(f"{where} pauses {step.pause_s!r} s", "Pause 0 s or more")
                if step.kind != "write":
                    if step.meta or step.attribute is not None or step.value is not None:
                        self._broken(f"{where} is a {step.kind} with attribute, value or meta",
                                     "Give only writes an attribute, a value and meta")
                    continue
                meta = step.meta
                fact, slot, value = meta.get("fact"), meta.get("slot"), step.value
                if set(meta) != {"fact", "slot", "paraphrase"} or not fact or not slot:
                    self._broken(f"{where} is a write with meta {dict(meta)!r}",
                                 "Give every write meta with fact, slot and paraphrase")
                if meta["paraphrase"] not in allowed:
                    self._broken(
                        f"{where} is a {meta['paraphrase']!r} paraphrase in a {ctx.level} plan",
                        f"Write only paraphrase levels {', '.join(allowed)}",
                    )
                if not step.attribute or not value:
                    self._broken(f"{where} is a write without attribute or value",
                                 "Give every write an attribute and a value")
                if "\x00" in value or _bytes(value) > ctx.max_value_bytes:
                    self._broken(
                        f"{where} writes a value the contract refuses (NUL, a lone "
                        f"surrogate, or over {ctx.max_value_bytes} bytes of UTF-8)",
                        "Write values of valid UTF-8 without NUL, within max_value_bytes")
                known = fact_of_value.setdefault(value, fact)
                if known != fact:
                    self._broken(
                        f"{where} writes {value!r} for fact {fact!r}, but fact "
                        f"{known!r} also wrote it",
                        "Give each fact texts no other fact uses",
                    )
                key = (step.namespace, step.entity_id, slot)
                if key_of_fact.setdefault(fact, key) != key:
                    self._broken(
                        f"{where} writes fact {fact!r} to {key}, but it was written to "
                        f"{key_of_fact[fact]}",
                        "Give each fact one namespace, entity and slot",
                    )

    def _broken(self, problem: str, fix: str) -> NoReturn:
        raise ScenarioError(self.path, "generator", self.generator,
                            f"broke the ground-truth rules: {problem}", f"{fix}.")


def _bytes(value: str) -> float:
    """The size of ``value`` in UTF-8, infinite for a lone surrogate, which has none."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return math.inf


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """Load and check a scenario: a name from :func:`list_scenarios`, or a file's path."""
    path = find(name_or_path, SCENARIO_DIR, "scenario")
    table = read_table(path)
    if "name" in table:
        raise ScenarioError(
            path, "name", table["name"], "is not a field of a scenario",
            f"A scenario is named by its file's stem ({path.stem!r}); remove the field.",
        )
    reject_unknown(path, table, "", _FIELDS, "a scenario")
    description = require_str(path, table, "description", 'description = "What it does."')
    spec = require_str(
        path, table, "generator", 'generator = "scenarios.generators:concurrent_writes"'
    )
    implementation = _resolve(path, spec)
    params = implementation.check_params(path, table.get("params", MISSING))
    return Scenario(
        name=path.stem,
        description=description,
        generator=spec,
        params=params,
        faults=_faults(path, table.get("faults", [])),
        requires=_requires(path, table.get("requires", [])),
        path=path,
        implementation=implementation,
        network=network(path, table["network"]) if "network" in table else None,
        processes=processes(path, table["processes"]) if "processes" in table else None,
        tag=_tag(path, table.get("tag", MISSING)) or scenario_code(path.stem),
        service=service(path, table["service"]) if "service" in table else None,
    )


def _tag(path: Path, value: object) -> str:
    if value is MISSING:
        return ""
    if not isinstance(value, str) or not re.fullmatch(r"[a-z]{1,8}", value):
        raise ScenarioError(path, "tag", value, "is not 1 to 8 lowercase ASCII letters",
                            'Give the prefix of its values\' tags, e.g. tag = "cwk".')
    return value


def list_scenarios() -> list[str]:
    """The names of the shipped scenarios, sorted."""
    return names_in(SCENARIO_DIR)


def _resolve(path: Path, spec: str) -> Generator:
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "generator"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ScenarioError(
            path, "generator", spec, f"names a module that cannot be imported ({exc})",
            "Give 'package.module:attribute', e.g. 'scenarios.generators:mixed'.",
        ) from exc
    found = getattr(module, attribute, MISSING)
    if found is MISSING:
        candidates = sorted(name for name, value in vars(module).items()
                            if isinstance(value, Generator))
        raise ScenarioError(
            path, "generator", spec, f"names no attribute {attribute!r} of {module_name}",
            f"{did_you_mean(attribute, candidates)}Generators there: "
            f"{', '.join(candidates) or 'none'}.",
        )
    if not isinstance(found, Generator):
        raise ScenarioError(
            path, "generator", spec, f"names {shown(found)}, not a generator",
            "Declare it with @scenarios.generators.generator(...).",
        )
    return found


def _faults(path: Path, value: object) -> tuple[FaultSpec, ...]:
    if not isinstance(value, list):
        raise ScenarioError(
            path, "faults", value, "is not an array of tables",
            'Write each fault as a [[faults]] table, e.g. name = "delay", mean_s = 0.001.',
        )
    return tuple(fault_spec(path, f"faults[{n}]", table) for n, table in enumerate(value))


def _requires(path: Path, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ScenarioError(
            path, "requires", value, "is not a list of strings",
            'Give coverage conditions, e.g. requires = ["overlapping_same_key_writes"].',
        )
    for position, name in enumerate(value):
        if name not in COVERAGE:
            raise ScenarioError(
                path, f"requires[{position}]", name, "is not a coverage condition",
                f"{did_you_mean(name, COVERAGE)}Conditions: {', '.join(COVERAGE)}.",
            )
    if len(set(value)) != len(value):
        raise ScenarioError(path, "requires", value, "repeats a condition",
                            "List each condition once.")
    return tuple(value)


def _check_arguments(seed: object, workers: object, level: object, scale: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgument(f"seed={shown(seed)} is not an integer. Pass e.g. seed=0.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgument(
            f"workers={shown(workers)} is not a positive integer. Pass e.g. workers=4."
        )
    if level not in CLAIMABLE_LEVELS:
        raise InvalidArgument(
            f"level={shown(level)} is not a paraphrase level. Pass one of "
            f"{', '.join(CLAIMABLE_LEVELS)}."
        )
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise InvalidArgument(
            f"scale={shown(scale)} is not a positive number. Pass e.g. scale=1.0."
        )
