"""The pytest certification suite: one test per invariant, each run by the stateful machine.

A backend's authors certify it from their own test suite by subclassing
:class:`MemoryBackendCertification` in a test module and providing a ``backend_factory``
fixture::

    from invariants.certification_suite import MemoryBackendCertification

    class TestMyStore(MemoryBackendCertification):
        @pytest.fixture
        def backend_factory(self):
            return "mystore:factory"   # or the factory itself

Or with no code at all: ``pytest --memcert-backend=mystore:factory``.

Capabilities are declared by overriding the ``memcert_level`` fixture (the normalization
level the backend claims; ``lexical`` by default) and the ``memcert_restore`` fixture
(True or False; None, the default, detects it). A capability the backend lacks makes
the tests that need it SKIPPED with the reason, never passed. A test whose checker had
nothing to check fails: an unknown is not a pass.

``pytest --memcert-budget=SECONDS`` bounds the time of the suite's searches, all its
tests together: each test gets an equal share of what is left when it starts.

Every test of the suite must run in every subclass. Leaving one out (``test_x = None``)
or overriding it without ``@pytest.mark.xfail(reason=...)`` raises
:class:`IncompleteSuite` when the subclass is defined, so pytest reports the module as
an error; that is the guard against a certification quietly missing an invariant.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from invariants.backend import BackendFactory
from invariants.checkers import CHECKER_NAMES
from invariants.errors import InvalidArgument, MemcertError
from invariants.levels import CLAIMABLE_LEVELS
from invariants.verdict import ResurrectionExplanation

from ._stateful_run import MachineRun, StatefulFailure, run_machine
from ._stateful_settings import active_settings, scoped
from .factory import resolve_backend

__all__ = [
    "SUITE_TESTS",
    "Certifier",
    "IncompleteSuite",
    "MemoryBackendCertification",
    "SuiteBudget",
]

SUITE_TESTS: tuple[str, ...] = (
    *(f"test_{name}" for name in CHECKER_NAMES),
    "test_deletion_monotonicity_after_restore",
)
"""Every test a certification must run: one per checker, and restores."""


class IncompleteSuite(MemcertError, TypeError):
    """A subclass of the suite leaves a test out, or overrides one without saying why."""


def _xfail_reason(test: object) -> str | None:
    for mark in getattr(test, "pytestmark", ()):
        if mark.name == "xfail":
            reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else "")
            if isinstance(reason, str) and reason.strip():
                return reason
    return None


class SuiteBudget:
    """What is left of ``--memcert-budget`` in one pytest process, shared out among the
    suite tests still to run.

    The clock starts when the first suite test asks for its share. Each test gets an
    equal part of the time left, so a test that skips or ends early leaves its part to
    the tests after it; a test whose checker has had nothing to check by the end of
    its part may go on into the rest, rather than end undecided. Under pytest-xdist
    each worker has its own clock, and counts the tests of every worker as still to
    run, so the whole run stays within the budget.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._deadline: float | None = None

    def share(self, tests_left: int) -> tuple[float, float]:
        """Seconds for the next test, ``tests_left`` (itself included) still to run, and
        the seconds left of the whole budget."""
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + self.seconds
        left = max(0.0, self._deadline - now)
        return left / max(1, tests_left), left


_BUDGET = pytest.StashKey[SuiteBudget]()


class Certifier:
    """What one suite test needs: the backend, its declared capabilities, the options.

    ``check`` runs the machine judging one checker and turns its conclusion into a
    pytest outcome: a violation fails with the shrunk program, an absent capability
    skips, a checker with nothing to check fails as undecided. ``within`` bounds the
    search to that many seconds, and ``grace`` more while the checker has had nothing
    to check (see :func:`invariants.stateful.run_machine`).
    """

    def __init__(
        self,
        backend: BackendFactory | str,
        *,
        level: str,
        restore: bool | None,
        node: str,
        out: Path | None,
        within: float | None = None,
        grace: float = 0.0,
    ) -> None:
        if level not in CLAIMABLE_LEVELS:
            raise InvalidArgument(
                f"memcert_level returned {level!r}; return one of {', '.join(CLAIMABLE_LEVELS)}"
            )
        resolved = resolve_backend(backend)
        self.factory, self.name = resolved.factory, resolved.name
        self.backend = backend
        self.level = level
        self.declared_restore = restore
        self.node = node
        self.out = out
        self.within = within
        self.grace = grace

    def restore_supported(self) -> bool:
        if self.declared_restore is not None:
            return self.declared_restore
        from .stateful import restore_supported

        with self._exclusive():
            return restore_supported(self.factory)

    def check(self, checker: str, *, level: str | None = None, restore: bool | None = None) -> None:
        """Judge ``checker``; ``level`` overrides the declared one (it may not exceed it),
        ``restore`` forces restores on (the test needs them) or off."""
        judged = level or self.level
        if CLAIMABLE_LEVELS.index(judged) > CLAIMABLE_LEVELS.index(self.level):
            pytest.skip(
                f"{self.name} declares normalization level {self.level!r}; "
                f"{judged} paraphrases are not required of it"
            )
        can_restore = restore is not False and self.restore_supported()
        if restore and not can_restore:
            pytest.skip(self._no_restore())
        with self._exclusive():
            run = run_machine(
                self.backend,
                level=judged,
                checkers=(checker,),
                restore=can_restore if restore is None else restore,
                settings=scoped(active_settings(), f"{self.node}|{self.name}|{judged}"),
                within=self.within,
                grace=self.grace,
            )
        self._conclude(checker, judged, run, needs_restore=bool(restore))

    def _no_restore(self) -> str:
        how = "declared by memcert_restore" if self.declared_restore is False else (
            "restore raised NotImplementedError")
        return f"{self.name} does not implement restore ({how}); restore checks skipped"

    def _conclude(self, checker: str, level: str, run: MachineRun, *, needs_restore: bool) -> None:
        failures = run.failures
        if needs_restore:
            failures = tuple(f for f in failures if _after_restore(f))
        if failures:
            pytest.fail(self._report(checker, level, failures), pytrace=False)
        if needs_restore and not run.restore_supported:
            pytest.skip(self._no_restore())
        if run.failures:
            pytest.fail(
                f"memcert could not decide {checker} after a restore for {self.name}: the "
                f"search stopped at a program that breaks {checker} with no restore "
                "(test_deletion_monotonicity shows it), before any program that breaks it "
                "after one. Nothing after a restore was decided, so this is not a pass; "
                f"fix that {checker} failure first.",
                pytrace=False,
            )
        why = run.undecided.get(checker)
        if why is not None:
            budget = ("" if self.within is None else
                      f" in the {self.within + self.grace:.1f} s --memcert-budget left "
                      "this test")
            pytest.fail(
                f"memcert could not decide {checker} for {self.name}: {why}{budget}. "
                "Nothing was checked, so this is not a pass.",
                pytrace=False,
            )

    def _report(self, checker: str, level: str, failures: tuple[StatefulFailure, ...]) -> str:
        parts = [f"memcert: {self.name} breaks {checker} (level {level})."]
        for number, failure in enumerate(failures):
            parts += list(failure.explanations)
            timing = (" Its operations race, so a run may show it otherwise, or not at all."
                      if failure.concurrent else "")
            parts.append(f"The shortest program found that shows it (run it with python):{timing}")
            parts.append(failure.program.rstrip("\n"))
            parts += list(failure.notes)
            if self.out is not None:
                suffix = f"-{number}" if number else ""
                path = self.out / "stateful" / f"{_file_name(self.node)}{suffix}.py"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(failure.program, encoding="utf-8")
                parts.append(f"Saved as {path}")
        return "\n\n".join(parts)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold a lock per backend across processes while the store is in use.

        Each program resets the whole store. Under pytest-xdist two workers certifying
        one backend whose store is shared between processes (a database) would reset
        each other's data mid-program, so their tests take turns. Factories whose
        store lives in one process say so with ``shares_across_processes = False``.
        """
        if not getattr(self.factory, "shares_across_processes", True):
            yield
            return
        digest = hashlib.sha256(self.name.encode()).hexdigest()[:16]
        path = Path(tempfile.gettempdir()) / f"memcert-{digest}.lock"
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _after_restore(failure: StatefulFailure) -> bool:
    """Whether ``failure``'s program restores, and a violation it shows cites a restore
    that could have taken effect: what the after-restore test is about."""
    return failure.restores > 0 and any(
        isinstance(v.explanation, ResurrectionExplanation) and v.explanation.restore is not None
        for v in failure.violations
    )


def _in_suite(item: pytest.Item) -> bool:
    cls = getattr(item, "cls", None)
    return isinstance(cls, type) and issubclass(cls, MemoryBackendCertification)


def _tests_left(request: pytest.FixtureRequest) -> int:
    """The suite tests from this one on, in the session's order."""
    suite = [item for item in request.session.items if _in_suite(item)]
    node = request.node
    return len(suite) - suite.index(node) if node in suite else 1


def _file_name(node: str) -> str:
    name = node.rsplit("::", 1)[-1]
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name).strip("_")


class MemoryBackendCertification:
    """The certification suite; subclass it as ``TestSomething`` with a
    ``backend_factory`` fixture. See the module docstring."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in SUITE_TESTS:
            test = getattr(cls, name, None)
            if not callable(test):
                raise IncompleteSuite(
                    f"{cls.__name__} leaves out {name} of the memcert certification suite. "
                    "A certification runs every test; to record a known failure, override "
                    f"it with @pytest.mark.xfail(reason=...) instead."
                )
            if test is not getattr(MemoryBackendCertification, name) and not _xfail_reason(test):
                raise IncompleteSuite(
                    f"{cls.__name__} overrides {name} of the memcert certification suite "
                    "without an xfail reason. Mark the override "
                    '@pytest.mark.xfail(reason="why it fails"), or remove it.'
                )

    @pytest.fixture
    def backend_factory(self) -> BackendFactory | str:
        """The backend: a factory, or its ``package.module:callable`` name (which also
        makes printed programs runnable as they stand). Subclasses must provide it."""
        raise IncompleteSuite(
            f"{type(self).__name__} has no backend_factory fixture; define one that returns "
            "your backend factory or its 'package.module:callable' name"
        )

    @pytest.fixture
    def memcert_level(self) -> str:
        """The normalization level the backend claims: surface, lexical or semantic."""
        return "lexical"

    @pytest.fixture
    def memcert_restore(self) -> bool | None:
        """Whether the backend implements restore; None detects it."""
        return None

    @pytest.fixture
    def memcert(
        self,
        request: pytest.FixtureRequest,
        backend_factory: BackendFactory | str,
        memcert_level: str,
        memcert_restore: bool | None,
    ) -> Certifier:
        out = request.config.getoption("memcert_out", None)
        seconds: float | None = request.config.getoption("memcert_budget", None)
        within, left = None, 0.0
        if seconds is not None:
            budget = request.config.stash.setdefault(_BUDGET, SuiteBudget(seconds))
            within, left = budget.share(_tests_left(request))
        return Certifier(
            backend_factory,
            level=memcert_level,
            restore=memcert_restore,
            node=request.node.nodeid,
            out=None if out is None else Path(out),
            within=within,
            grace=max(0.0, left - (within or 0.0)),
        )

    def test_uniqueness(self, memcert: Certifier) -> None:
        """A read never serves two facts for one slot (a conflict)."""
        memcert.check("uniqueness")

    def test_causal_monotonicity(self, memcert: Certifier) -> None:
        """An older write never replaces a newer one; reads list records in causal
        order (a reorder)."""
        memcert.check("causal_monotonicity")

    def test_deletion_monotonicity(self, memcert: Certifier) -> None:
        """A deleted entity serves nothing and takes no writes (a resurrection); no
        restores are sent, so this holds for a backend without them too."""
        memcert.check("deletion_monotonicity", restore=False)

    def test_deletion_monotonicity_after_restore(self, memcert: Certifier) -> None:
        """A restore revives nothing from before the delete, late writes included."""
        memcert.check("deletion_monotonicity", restore=True)

    @pytest.mark.parametrize("level", CLAIMABLE_LEVELS)
    def test_semantic_normalization(self, memcert: Certifier, level: str) -> None:
        """Paraphrases of one fact, up to ``level``, leave one record (a duplicate)."""
        memcert.check("semantic_normalization", level=level)

    def test_durability(self, memcert: Certifier) -> None:
        """An acknowledged write stays readable until superseded or deleted (lost)."""
        memcert.check("durability")

    def test_isolation(self, memcert: Certifier) -> None:
        """Nothing written in one namespace is visible from another (a leak)."""
        memcert.check("isolation")

    def test_phantom(self, memcert: Certifier) -> None:
        """Every value a read returns was written (a phantom)."""
        memcert.check("phantom")

