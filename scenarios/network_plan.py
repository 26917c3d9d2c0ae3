"""What a scenario's ``[network]`` table says, as data: client groups, the toxics and a
nemesis timeline.

This is data, like the rest of a :class:`~scenarios.plan.Plan`; :mod:`chaos.nemesis`
runs it and :mod:`chaos.proxy` acts out the toxics. It lives below :mod:`chaos` so that
a scenario file is checked against these declarations when it is loaded, without
importing the proxies. Each worker belongs to a client group (worker *k* to
``groups[k % len(groups)]``), and each group reaches the service through a fault proxy
of its own, so that a toxic can hit one group and a partition can cut one off. The
timeline says what the nemesis does, and when: each step fires once the scenario is
``at`` of the way through, by steps done or by time spent, whichever comes first (see
:mod:`chaos.nemesis`).

Actions (``do``):

- ``add_toxic``: add a toxic (:class:`Toxic`) to the proxies of ``groups``
  (every group if none is named);
- ``remove_toxic``: remove it from every proxy it was added to;
- ``partition``: take the proxies of ``groups`` down; their clients are refused;
- ``heal``: remove every toxic and bring every proxy up;
- ``crash``: SIGKILL the service, wait ``down_s``, restart it on the same database and
  port. Only a service memcert runs itself can be crashed;
- ``pause``: SIGSTOP the service, wait ``down_s``, SIGCONT it: a stall (a long garbage
  collection, a host under load) with no crash. Only a service memcert runs itself can
  be paused.

Whatever the timeline says, the nemesis heals everything (and restarts a crashed
service) before the final reads.

A toxic is declared as data (:class:`Toxic`, checked when it is built, so a scenario
file fails when it is loaded rather than halfway through a run); its types, attribute
names and units are Toxiproxy's, so a reader who knows Toxiproxy knows these.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from invariants.errors import InvalidArgument

from .ranges import NumberRange

__all__ = [
    "ACTIONS",
    "COMMON_COUNTERS",
    "DEFAULT_GROUP",
    "KINDS",
    "STREAMS",
    "Action",
    "NemesisStep",
    "Network",
    "Stream",
    "Toxic",
    "ToxicKind",
]

# -- toxics -----------------------------------------------------------------------------

Stream = Literal["upstream", "downstream"]
STREAMS: tuple[Stream, ...] = ("upstream", "downstream")
"""``upstream`` carries client bytes to the server, ``downstream`` the answers back."""

_MS = NumberRange(0, 3_600_000, "milliseconds, a whole number in [0, 3600000]", integer=True)
_US = NumberRange(0, 60_000_000, "microseconds, a whole number in [0, 60000000]", integer=True)
_SIZE = NumberRange(1, 1 << 30, "a whole number of bytes in [1, 2**30]", integer=True)
_SIZE_VARIATION = NumberRange(
    0, 1 << 30, "a whole number of bytes below average_size", integer=True
)
_TOXICITY = NumberRange(0.0, 1.0, "a probability in [0, 1]")
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True, slots=True)
class ToxicKind:
    """One toxic type: its attributes (missing ones take ``defaults``; those without a
    default are required), the counters it keeps beyond the common ones, and what it
    does, in a sentence for errors and docs."""

    params: Mapping[str, NumberRange]
    defaults: Mapping[str, int]
    counters: tuple[str, ...]
    summary: str


KINDS: Mapping[str, ToxicKind] = MappingProxyType(
    {
        "latency": ToxicKind(
            MappingProxyType({"latency": _MS, "jitter": _MS}),
            MappingProxyType({"latency": 0, "jitter": 0}),
            ("chunks",),
            "delivers each chunk latency ± jitter ms after it arrived",
        ),
        "timeout": ToxicKind(
            MappingProxyType({"timeout": _MS}),
            MappingProxyType({"timeout": 0}),
            ("closed",),
            "drops every byte; closes the connection after timeout ms (0: holds it open)",
        ),
        "reset_peer": ToxicKind(
            MappingProxyType({"timeout": _MS}),
            MappingProxyType({"timeout": 0}),
            ("resets",),
            "on the first chunk, drops it and resets both sockets (TCP RST) timeout ms later",
        ),
        "bandwidth": ToxicKind(
            MappingProxyType(
                {
                    "rate": NumberRange(
                        1, 1 << 30, "kilobytes (1000 bytes) per second, a whole number >= 1",
                        integer=True,
                    )
                }
            ),
            MappingProxyType({}),
            (),
            "delivers at most rate KB (1000 bytes) per second",
        ),
        "slicer": ToxicKind(
            MappingProxyType(
                {"average_size": _SIZE, "size_variation": _SIZE_VARIATION, "delay": _US}
            ),
            MappingProxyType({"size_variation": 0, "delay": 0}),
            ("slices",),
            "cuts each chunk into slices of average_size ± size_variation bytes, delay µs apart",
        ),
        "limit_data": ToxicKind(
            MappingProxyType(
                {"bytes": NumberRange(0, 1 << 62, "a whole number of bytes >= 0", integer=True)}
            ),
            MappingProxyType({}),
            ("closed",),
            "passes the first bytes bytes, then closes the connection",
        ),
    }
)
"""Every toxic type by name, as Toxiproxy names them."""

COMMON_COUNTERS = ("connections", "fired", "bytes")
"""Kept for every toxic: connections that met it, connections it acted on, bytes it
acted on (delayed, throttled, sliced or dropped)."""


@dataclass(frozen=True, slots=True)
class Toxic:
    """A toxic as data: checked and completed with defaults when built.

    ``attributes`` ends up holding every attribute of the type, defaults included, so a
    report shows exactly what ran.
    """

    name: str
    type: str
    stream: Stream = "downstream"
    toxicity: float = 1.0
    attributes: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InvalidArgument(
                f"toxic name={self.name!r} (type {type(self.name).__name__}) is not a usable "
                "name. Give 1 to 64 letters, digits, '_', '-' or '.'."
            )
        owner = f"toxic {self.name!r}"
        kind = KINDS.get(self.type) if isinstance(self.type, str) else None
        if kind is None:
            raise InvalidArgument(
                f"{owner}: type={self.type!r} is not a toxic type.{_did_you_mean(self.type, KINDS)}"
                f" Give one of {', '.join(KINDS)}."
            )
        owner = f"toxic {self.name!r} ({self.type})"
        if self.stream not in STREAMS:
            raise InvalidArgument(
                f"{owner}: stream={self.stream!r} (type {type(self.stream).__name__}) is not a "
                "stream. Give 'upstream' (client to server) or 'downstream' (server to client)."
            )
        toxicity = _TOXICITY.check(owner, "toxicity", self.toxicity)
        if not isinstance(self.attributes, Mapping):
            raise InvalidArgument(
                f"{owner}: attributes={self.attributes!r} is not a mapping. Give a dict of "
                f"{', '.join(kind.params)}."
            )
        for attribute in self.attributes:
            if attribute not in kind.params:
                raise InvalidArgument(
                    f"{owner}: has no attribute {attribute!r}."
                    f"{_did_you_mean(str(attribute), kind.params)} Its attributes are "
                    f"{', '.join(kind.params)}."
                )
        given = {**kind.defaults, **self.attributes}
        missing = [attribute for attribute in kind.params if attribute not in given]
        if missing:
            raise InvalidArgument(
                f"{owner}: needs {', '.join(missing)}. {kind.summary[0].upper()}"
                f"{kind.summary[1:]}."
            )
        attributes = {
            attribute: int(param.check(owner, attribute, given[attribute]))
            for attribute, param in kind.params.items()
        }
        if self.type == "slicer" and attributes["size_variation"] >= attributes["average_size"]:
            raise InvalidArgument(
                f"{owner}: size_variation={attributes['size_variation']} is not below "
                f"average_size={attributes['average_size']}. Give a size_variation smaller "
                "than average_size, so no slice is empty."
            )
        object.__setattr__(self, "toxicity", toxicity)
        object.__setattr__(self, "attributes", MappingProxyType(attributes))

    def updated(self, toxicity: float | None = None, **attributes: int) -> Toxic:
        """This toxic with some attributes (or its toxicity) changed, checked again."""
        return Toxic(
            self.name,
            self.type,
            self.stream,
            self.toxicity if toxicity is None else toxicity,
            {**self.attributes, **attributes},
        )

    def to_json(self) -> dict[str, Any]:
        """The Toxiproxy API's shape for a toxic."""
        return {
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
            "attributes": dict(self.attributes),
        }


# -- the network and its nemesis -------------------------------------------------------

Action = Literal["add_toxic", "remove_toxic", "partition", "heal", "crash", "pause"]
ACTIONS: tuple[str, ...] = get_args(Action)
_PROXY_ACTIONS = frozenset({"add_toxic", "remove_toxic", "partition", "heal"})
DEFAULT_GROUP = "clients"


@dataclass(frozen=True, slots=True)
class NemesisStep:
    """One action of the nemesis and the point of the scenario where it fires.

    ``at`` is a fraction of the scenario in [0, 1]. ``toxic`` is set for ``add_toxic``;
    ``name`` names the toxic of a ``remove_toxic``; ``groups`` are the groups an
    ``add_toxic`` or a ``partition`` acts on; ``down_s`` is how long a ``crash`` keeps
    the service down before restarting it, or a ``pause`` keeps it frozen.
    """

    at: float
    do: Action
    groups: tuple[str, ...] = ()
    toxic: Toxic | None = None
    name: str = ""
    down_s: float = 0.0

    def describe(self) -> dict[str, Any]:
        """The step as plain data, for the events a run records."""
        shown: dict[str, Any] = {"do": self.do, "at": self.at}
        if self.groups:
            shown["groups"] = list(self.groups)
        if self.toxic is not None:
            shown["toxic"] = self.toxic.to_json()
        if self.name:
            shown["name"] = self.name
        if self.do in ("crash", "pause"):
            shown["down_s"] = self.down_s
        return shown


@dataclass(frozen=True, slots=True)
class Network:
    """Client groups, the clients' timeout and back-off, and the nemesis timeline.

    ``timeout_s`` is the HTTP clients' timeout for this scenario, so a blackhole ends
    in an ``info`` within it. ``backoff_s`` is how long a client waits after an
    operation that got no answer before its next one, as a real client backs off, so
    a cut-off group does not spend its whole plan on refused connections.
    """

    groups: tuple[str, ...] = (DEFAULT_GROUP,)
    timeline: tuple[NemesisStep, ...] = ()
    timeout_s: float = 2.0
    backoff_s: float = 0.05

    def __post_init__(self) -> None:
        if not self.groups or len(set(self.groups)) != len(self.groups):
            raise InvalidArgument(f"groups={list(self.groups)!r} must name at least one "
                                  "group, each once")
        for group in self.groups:
            if not isinstance(group, str) or not group or "/" in group:
                raise InvalidArgument(f"groups: {group!r} is not a usable group name. Give a "
                                      "non-empty string without '/'.")
        if not (math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 600):
            raise InvalidArgument(f"timeout_s={self.timeout_s!r} must be in (0, 600] seconds")
        if not (math.isfinite(self.backoff_s) and 0 <= self.backoff_s <= 60):
            raise InvalidArgument(f"backoff_s={self.backoff_s!r} must be in [0, 60] seconds")
        self._check_timeline()

    @property
    def uses_proxies(self) -> bool:
        """Whether any step acts on the network, so the groups need proxies."""
        return any(step.do in _PROXY_ACTIONS for step in self.timeline)

    @property
    def crashes(self) -> bool:
        """Whether any step crashes the service."""
        return any(step.do == "crash" for step in self.timeline)

    @property
    def signals_service(self) -> bool:
        """Whether any step crashes or pauses the service, so memcert must control its
        process."""
        return any(step.do in ("crash", "pause") for step in self.timeline)

    def group_of(self, worker: int) -> str:
        """The group of the plan's worker number ``worker`` (counted from 0)."""
        return self.groups[worker % len(self.groups)]

    def _check_timeline(self) -> None:
        """Refuse a timeline that could not run as written: out of order, naming an
        unknown group, or adding and removing toxics that do not match."""
        active: set[str] = set()
        previous = 0.0
        for position, step in enumerate(self.timeline):
            where = f"nemesis[{position}]"
            if step.do not in ACTIONS:
                raise InvalidArgument(f"{where}: do={step.do!r} is not an action. Give one of "
                                      f"{', '.join(ACTIONS)}.")
            if not (math.isfinite(step.at) and 0 <= step.at <= 1):
                raise InvalidArgument(f"{where}: at={step.at!r} is not a fraction of the "
                                      "scenario. Give a number in [0, 1].")
            if step.at < previous:
                raise InvalidArgument(f"{where}: at={step.at:g} comes before the previous "
                                      f"step's {previous:g}. List the steps in time order.")
            previous = step.at
            unknown = [group for group in step.groups if group not in self.groups]
            if unknown:
                raise InvalidArgument(f"{where}: groups {unknown!r} are not client groups. "
                                      f"The groups are {', '.join(self.groups)}.")
            if step.do == "partition" and not step.groups:
                raise InvalidArgument(f"{where}: a partition needs the groups it cuts off")
            if step.do == "add_toxic":
                if step.toxic is None:
                    raise InvalidArgument(f"{where}: add_toxic needs a toxic")
                if step.toxic.name in active:
                    raise InvalidArgument(f"{where}: toxic {step.toxic.name!r} is already in "
                                          "force. Remove it first, or give another name.")
                active.add(step.toxic.name)
            elif step.do == "remove_toxic":
                if step.name not in active:
                    raise InvalidArgument(
                        f"{where}: removes toxic {step.name!r}, which no earlier step added "
                        f"or which was removed already. Toxics in force: "
                        f"{', '.join(sorted(active)) or 'none'}.")
                active.discard(step.name)
            elif step.do == "heal":
                active.clear()
            if step.do in ("crash", "pause") and not (
                    math.isfinite(step.down_s) and 0 <= step.down_s <= 600):
                raise InvalidArgument(f"{where}: down_s={step.down_s!r} must be in [0, 600] "
                                      "seconds")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
