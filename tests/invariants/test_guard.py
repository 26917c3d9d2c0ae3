"""The production guard catches every known-bad backend it can see, with its cause.

Each known-bad backend of ``chaos.examples`` runs a realistic mixed workload
(``guard_workload``) behind the guard, in assertion mode (``sample=1.0``) and sampled at
5 %, and the guard must find the checker and root cause that ``KNOWN_BAD_CAUSES`` names.
The one backend it cannot see by design is listed in :data:`BLIND`, with why, and
tested for that too.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from chaos.examples import KNOWN_BAD, KNOWN_BAD_CAUSES, SharedFactory, known_bad
from invariants.backend import Ack, Delete, Write
from invariants.guarding import GUARD_CHECKERS, Finding, Guard, InvariantViolated
from tests.invariants.guard_workload import run_threads

ROOT = Path(__file__).resolve().parents[2]

BLIND = {
    "chaos.examples:phantom_records": (
        "a record no guarded write produced is, in production, most often one written "
        "before the guard started or by a process it does not watch; the guard runs no "
        "phantom checker"),
}
"""Known-bad backends the guard cannot see by design, and why (docs/guard.md)."""

SEEN = sorted(set(KNOWN_BAD) - set(BLIND))
MANGLED = ("chaos.examples:truncates_values", "chaos.examples:normalizes_values",
           "chaos.examples:strips_whitespace")
GUARD_SEES: dict[str, dict[str, str]] = {
    **{name: {"durability": "never_visible"} for name in MANGLED},
}
"""Where the guard sees a backend's bug otherwise than certify: a value the backend
changed is, to certify, a phantom record (no write produced it) and a write never
seen; the guard runs no phantom checker (BLIND), so it sees the write never seen."""


def expected(name: str) -> dict[str, str]:
    """The checkers and causes the guard must find for known-bad backend ``name``."""
    return GUARD_SEES.get(name, dict(KNOWN_BAD_CAUSES[name]))


def expected_checkers(name: str) -> set[str]:
    if name in GUARD_SEES:
        return set(GUARD_SEES[name])
    return set(KNOWN_BAD[name])
THREADS = 4
OPS_ASSERTING = 300
"""Operations per thread in assertion mode: 1,200 in all, over 6 entities x 2 tenants."""
OPS_SAMPLED = 5000
"""Operations per thread at sample=0.05: each known-bad backend is caught within
20,000 operations over 120 entities x 2 tenants, of which the sample picks 7."""
SAMPLED_ENTITIES = [f"user-{i}" for i in range(120)]


def fresh(name: str) -> SharedFactory:
    """A factory of the known-bad class ``name`` names, onto a store of its own."""
    cls = getattr(known_bad, "".join(p.title() for p in name.split(":")[1].split("_")))
    return SharedFactory(cls)


@pytest.fixture(autouse=True)
def quiet_guard_log() -> Iterator[None]:
    """Thousands of violations are expected here; their log lines are tested once."""
    logger = logging.getLogger("memcert.guard")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def run(factory: SharedFactory, *, sample: float, ops: int, entities: list[str],
        registry: CollectorRegistry | None = None
        ) -> tuple[collections.Counter[tuple[str, str]], list[BaseException], Guard]:
    found: collections.Counter[tuple[str, str]] = collections.Counter()

    def note(finding: Finding) -> None:
        found[(finding.checker, finding.cause)] += 1

    guard = Guard(factory(), sample=sample, recheck_s=0.05, on_violation=note,
                  registry=registry, backend_name="known-bad")
    handles = [guard.wrap(factory()) for _ in range(THREADS)]
    errors = run_threads(handles, ops, 7, entities,
                         on_error=lambda e: isinstance(e, InvariantViolated))
    assert guard.flush()
    guard.close()
    return found, errors, guard


@pytest.mark.parametrize("name", SEEN)
def test_assertion_mode_catches_each_known_bad_backend_with_its_cause(name: str) -> None:
    found, errors, _ = run(fresh(name), sample=1.0, ops=OPS_ASSERTING,
                           entities=[f"u{i}" for i in range(6)])
    assert errors and all(isinstance(e, InvariantViolated) for e in errors)
    raised = {(f.checker, f.cause) for e in errors for f in e.findings}  # type: ignore[attr-defined]
    for checker, cause in expected(name).items():
        assert (checker, cause) in found, (checker, cause, dict(found))
        assert any(c == checker for c, _ in raised)
    assert expected_checkers(name) <= {checker for checker, _ in found}


@pytest.mark.parametrize("name", SEEN)
def test_at_five_percent_each_known_bad_backend_is_caught_within_the_bound(name: str) -> None:
    registry = CollectorRegistry()
    found, errors, guard = run(fresh(name), sample=0.05, ops=OPS_SAMPLED,
                               entities=SAMPLED_ENTITIES, registry=registry)
    assert errors == []  # sampled below 1.0, the guard only reports
    assert expected_checkers(name) <= {checker for checker, _ in found}, dict(found)
    assert sum(1 for e in SAMPLED_ENTITIES if guard.sampled(e)) == 7


@pytest.mark.parametrize("name", sorted(BLIND))
def test_a_backend_the_guard_cannot_see_by_design_is_stated_and_found_clean(name: str) -> None:
    assert "phantom" not in GUARD_CHECKERS
    assert name.split(":")[1] in (ROOT / "docs" / "guard.md").read_text(encoding="utf-8")
    found, errors, _ = run(fresh(name), sample=1.0, ops=OPS_ASSERTING,
                           entities=[f"u{i}" for i in range(6)])
    assert not errors and not found, BLIND[name]


def test_a_violation_raises_from_the_call_whose_verification_read_showed_it() -> None:
    factory = SharedFactory(known_bad.LastArrivalWins)
    seen: list[Finding] = []
    with Guard(factory(), sample=1.0, on_violation=seen.append) as guard:
        handle = guard.wrap(factory())
        assert handle.write(Write("t", "u", "city", "lives in Paris", 5, "a")) == Ack(
            True, version=1)
        with pytest.raises(InvariantViolated) as caught:
            handle.write(Write("t", "u", "city", "lives in Rome", 3, "b"))
    error = caught.value
    assert error.result == Ack(True, version=2)
    assert [(f.checker, f.cause) for f in error.findings] == [
        ("causal_monotonicity", "stale_overwrite")]
    assert str(error).splitlines()[0] == (
        "memcert guard: reorder (causal_monotonicity, cause stale_overwrite) in t/u")
    assert seen == list(error.findings)


def test_a_resurrection_the_scheduled_reread_finds_raises_before_the_next_call() -> None:
    factory = SharedFactory(known_bad.ExpiringTombstone)
    with Guard(factory(), sample=1.0, recheck_s=0.02) as guard:
        handle = guard.wrap(factory())
        handle.write(Write("t", "gone", "city", "lives in Paris", 1, "w"))
        handle.delete(Delete("t", "gone", 2, "d"))
        assert handle.write(Write("t", "gone", "city", "lives in Rome", 3, "x")) == Ack(
            False, reason="tombstoned")
        for i in range(12):  # store operations that age the tombstone past its life
            handle.write(Write("t", "other", "city", f"lives in town {i}", 4 + i, f"o{i}"))
        guard.flush()
        # the re-read comes from the guard's schedule, not from a call of the handle
        for _ in range(1000):  # up to 10 s on a loaded host
            if guard.counts()["deletion_monotonicity"]:
                break
            time.sleep(0.01)
        with pytest.raises(InvariantViolated) as caught:
            handle.write(Write("t", "next", "city", "lives in Oslo", 100, "n"))
    assert caught.value.result is None
    assert caught.value.findings[0].cause == "tombstone_expired"
    assert factory().read("t", "next") == []  # the call that raised was not forwarded
