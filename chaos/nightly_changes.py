"""What changed since the previous night: what the index opens with.

Four kinds of news, each from the nights' own data (the index's ``nights``):

- an invariant whose verdict changed (``pass`` to ``fail``, ``unknown`` to ``pass``, ...);
- a cause (:data:`invariants.causes.CAUSES`) found last night and not the night before
  (appeared), or the other way round (vanished);
- a rate that rose beyond its run-to-run noise (:func:`rose`);
- a label added, removed or changed (``--label``, the versions found).

The noise rule. A night's rate is compared with the nights before it, at most
:data:`WINDOW` of them: their median is the baseline, and the noise is the larger of
``MAD_FACTOR`` times their median absolute deviation (scaled by 1.4826, so that it
estimates a standard deviation) and ``FLOOR_SHARE`` of the baseline. With fewer than
:data:`MIN_NIGHTS` nights before it, the deviation says nothing yet, and the floor is
``FEW_NIGHTS_SHARE`` of the baseline instead. A rate rose when it exceeds the baseline
by more than the noise; from a baseline of 0 (the target), any rate above 0 rose.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FEW_NIGHTS_SHARE", "FLOOR_SHARE", "MAD_FACTOR", "MIN_NIGHTS", "WINDOW",
           "Changes", "Rise", "changes", "rose"]

WINDOW = 7
"""Nights before the latest that its rates are judged against."""
MIN_NIGHTS = 3
"""Nights needed before the deviation counts; with fewer, the few-nights floor holds."""
MAD_FACTOR = 3.0
FLOOR_SHARE = 0.25
"""The least noise, as a share of the baseline: a rate must rise by more than a quarter."""
FEW_NIGHTS_SHARE = 0.5
"""The noise with fewer than :data:`MIN_NIGHTS` nights before: half the baseline."""
_MAD_SCALE = 1.4826


@dataclass(frozen=True)
class Rise:
    """A rate that rose beyond its noise: from ``baseline`` (the earlier nights' median)
    to ``rate``, past ``baseline + noise``, judged from ``nights`` nights."""

    invariant: str
    rate: float
    baseline: float
    noise: float
    nights: int

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "rate": self.rate, "baseline": self.baseline,
                "noise": self.noise, "nights": self.nights}


@dataclass(frozen=True)
class Changes:
    """The latest night against the one before it (``previous`` "" when it is the first)."""

    night: str
    previous: str
    verdicts: tuple[tuple[str, str, str], ...] = ()
    """(invariant, before, now) for each verdict that changed; the night's own first."""
    appeared: tuple[tuple[str, str, int], ...] = ()
    """(invariant, cause, violations now) for each cause new since the previous night."""
    vanished: tuple[tuple[str, str, int], ...] = ()
    """(invariant, cause, violations before) for each cause gone since then."""
    rises: tuple[Rise, ...] = ()
    labels: tuple[tuple[str, str | None, str | None], ...] = ()
    """(key, before, now) for each label changed; None where it was absent."""
    uncounted: tuple[str, ...] = field(default=())
    """Invariants whose causes one of the two nights did not count (an older memcert)."""

    @property
    def any(self) -> bool:
        return bool(self.verdicts or self.appeared or self.vanished or self.rises
                    or self.labels)

    def to_dict(self) -> dict[str, Any]:
        return {"night": self.night, "previous": self.previous,
                "verdicts": [list(v) for v in self.verdicts],
                "appeared": [list(a) for a in self.appeared],
                "vanished": [list(v) for v in self.vanished],
                "rises": [r.to_dict() for r in self.rises],
                "labels": [list(c) for c in self.labels],
                "uncounted": list(self.uncounted)}


def rose(rate: float, earlier: Sequence[float]) -> Rise | None:
    """Whether ``rate`` rose beyond the noise of ``earlier`` (oldest first; the last
    :data:`WINDOW` count), under the rule in this module's docstring."""
    window = list(earlier)[-WINDOW:]
    if not window:
        return None
    baseline = statistics.median(window)
    if len(window) < MIN_NIGHTS:
        noise = FEW_NIGHTS_SHARE * baseline
    else:
        mad = statistics.median(abs(r - baseline) for r in window)
        noise = max(MAD_FACTOR * _MAD_SCALE * mad, FLOOR_SHARE * baseline)
    if rate > baseline + noise:
        return Rise("", rate, baseline, noise, len(window))
    return None


def changes(nights: Sequence[Mapping[str, Any]]) -> Changes:
    """What the last of ``nights`` (oldest first, as the index keeps them) changed."""
    if not nights:
        return Changes("", "")
    latest = nights[-1]
    if len(nights) == 1:
        return Changes(latest["night"], "")
    before = nights[-2]
    now_inv, then_inv = latest.get("invariants", {}), before.get("invariants", {})
    verdicts: list[tuple[str, str, str]] = []
    appeared: list[tuple[str, str, int]] = []
    vanished: list[tuple[str, str, int]] = []
    rises: list[Rise] = []
    uncounted: list[str] = []
    if before.get("verdict") != latest.get("verdict"):
        verdicts.append(("overall", str(before.get("verdict", "")),
                         str(latest.get("verdict", ""))))
    for name in dict.fromkeys([*then_inv, *now_inv]):
        now, then = now_inv.get(name, {}), then_inv.get(name, {})
        if now.get("verdict") != then.get("verdict"):
            verdicts.append((name, then.get("verdict") or "absent",
                             now.get("verdict") or "absent"))
        now_causes, then_causes = now.get("causes", {}), then.get("causes", {})
        if now and then and (not now_causes or not then_causes):
            uncounted.append(name)
        else:
            for cause in dict.fromkeys([*then_causes, *now_causes]):
                n, m = int(now_causes.get(cause, 0)), int(then_causes.get(cause, 0))
                if n and not m:
                    appeared.append((name, cause, n))
                elif m and not n:
                    vanished.append((name, cause, m))
        if now:
            earlier = [float(night["invariants"][name]["rate"]) for night in nights[:-1]
                       if name in night.get("invariants", {})]
            found = rose(float(now.get("rate", 0.0)), earlier)
            if found is not None:
                rises.append(Rise(name, found.rate, found.baseline, found.noise, found.nights))
    now_labels, then_labels = latest.get("labels", {}), before.get("labels", {})
    labels = tuple((key, then_labels.get(key), now_labels.get(key))
                   for key in dict.fromkeys([*then_labels, *now_labels])
                   if then_labels.get(key) != now_labels.get(key))
    return Changes(latest["night"], before["night"], tuple(verdicts), tuple(appeared),
                   tuple(vanished), tuple(rises), labels, tuple(uncounted))
