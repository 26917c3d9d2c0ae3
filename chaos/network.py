"""What a scenario's ``[network]`` table says: client groups and a nemesis timeline.

This is data, like the rest of a :class:`~chaos.plan.Plan`; :mod:`chaos.nemesis` runs
it. Each worker belongs to a client group (worker *k* to ``groups[k % len(groups)]``),
and each group reaches the service through a fault proxy of its own, so that a toxic can
hit one group and a partition can cut one off. The timeline says what the nemesis does,
and when: each step fires once the scenario is ``at`` of the way through, by steps done
or by time spent, whichever comes first (see :mod:`chaos.nemesis`).

Actions (``do``):

- ``add_toxic``: add a toxic (:class:`chaos.proxy.Toxic`) to the proxies of ``groups``
  (every group if none is named);
- ``remove_toxic``: remove it from every proxy it was added to;
- ``partition``: take the proxies of ``groups`` down; their clients are refused;
- ``heal``: remove every toxic and bring every proxy up;
- ``crash``: SIGKILL the service, wait ``down_s``, restart it on the same database and
  port. Only a service memcert runs itself can be crashed.

Whatever the timeline says, the nemesis heals everything (and restarts a crashed
service) before the final reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from invariants.errors import InvalidArgument

from ._toxics import Toxic

__all__ = ["ACTIONS", "Action", "NemesisStep", "Network"]

Action = Literal["add_toxic", "remove_toxic", "partition", "heal", "crash"]
ACTIONS: tuple[str, ...] = get_args(Action)
_PROXY_ACTIONS = frozenset({"add_toxic", "remove_toxic", "partition", "heal"})
DEFAULT_GROUP = "clients"


@dataclass(frozen=True, slots=True)
class NemesisStep:
    """One action of the nemesis and the point of the scenario where it fires.

    ``at`` is a fraction of the scenario in [0, 1]. ``toxic`` is set for ``add_toxic``;
    ``name`` names the toxic of a ``remove_toxic``; ``groups`` are the groups an
    ``add_toxic`` or a ``partition`` acts on; ``down_s`` is how long a ``crash`` keeps
    the service down before restarting it.
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
        if self.do == "crash":
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
        """Whether any step crashes the service, so memcert must control its process."""
        return any(step.do == "crash" for step in self.timeline)

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
            if step.do == "crash" and not (math.isfinite(step.down_s) and 0 <= step.down_s
                                           <= 600):
                raise InvalidArgument(f"{where}: down_s={step.down_s!r} must be in [0, 600] "
                                      "seconds")
