"""memcert's pytest plugin: certify a backend from pytest.

``pytest --memcert-backend=package.module:factory`` adds the certification suite
(:mod:`invariants.certification_suite`) to the run, against that backend; ``-m memcert``
runs only the suite. Test modules may instead subclass ``MemoryBackendCertification``.
``--memcert-budget=SECONDS`` bounds the time the suite's searches take, all tests together.
Settings come from memcert's Hypothesis profiles: ``--hypothesis-profile=memcert-nightly``
for a deep run; ``memcert-ci`` is used when ``CI`` is set, ``memcert-dev`` otherwise.

This module is loaded in every pytest run once memcert is installed, so it imports
nothing heavy: Hypothesis and the suite are imported only when a test needs them.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from invariants.levels import CLAIMABLE_LEVELS

_SUITE = "invariants.certification_suite"
_SUITE_FILE = Path(__file__).with_name("_suite_from_option.py")
"""The module the plugin adds to the run for ``--memcert-backend``."""

SUITE_ID = "memcert-suite"
"""The path part of the node ids of the suite ``--memcert-backend`` adds: its tests are
``memcert-suite::TestMemcertBackend::test_uniqueness`` and so on, and pytest takes
those back as arguments, with ``--memcert-backend``, from any folder and any install."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memcert", "memcert backend certification")
    group.addoption(
        "--memcert-backend",
        metavar="package.module:factory",
        help="certify this backend factory: adds the memcert certification suite to the run",
    )
    group.addoption(
        "--memcert-level",
        choices=CLAIMABLE_LEVELS,
        default="lexical",
        help="the normalization level the --memcert-backend claims (default: lexical); "
        "tests of higher levels are skipped",
    )
    group.addoption(
        "--memcert-out",
        metavar="DIR",
        help="also save each failure's shrunk program as DIR/stateful/<test>.py",
    )
    group.addoption(
        "--memcert-budget",
        metavar="SECONDS",
        help="bound the time the certification suite's searches take, all its tests "
        "together (default: no bound; the Hypothesis profile's programs are all run)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and, before Hypothesis loads a ``memcert-`` profile named by
    ``--hypothesis-profile``, the profiles; check ``--memcert-budget``; when a backend
    is named, add the suite, or point the arguments that name its tests (by
    :data:`SUITE_ID`) at its module."""
    config.addinivalue_line("markers", "memcert: a test of the memcert certification suite")
    profile = config.getoption("hypothesis_profile", None)
    if isinstance(profile, str) and profile.startswith("memcert-"):
        from invariants._stateful_settings import register_profiles

        register_profiles()
    budget = config.getoption("memcert_budget")
    if budget is not None:
        config.option.memcert_budget = _seconds(budget)
    spec = config.getoption("memcert_backend")
    if spec is None:
        suite_args = [arg for arg in config.args if _suite_arg(config, arg) is not None]
        if suite_args:
            raise pytest.UsageError(
                f"{suite_args[0]} is a test of the memcert certification suite, which "
                "runs against a backend: add --memcert-backend=package.module:factory"
            )
        return
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise pytest.UsageError(
            f"--memcert-backend={spec!r} is not of the form package.module:factory; "
            "for example --memcert-backend=reference_store:factory"
        )
    named = [(i, rest) for i, arg in enumerate(config.args)
             if (rest := _suite_arg(config, arg)) is not None]
    for i, rest in named:
        config.args[i] = f"{_SUITE_FILE}{rest}"
    if not named:
        config.args.append(str(_SUITE_FILE))


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise pytest.UsageError(
            f"--memcert-budget={value!r} must be a positive number of seconds; "
            "for example --memcert-budget=120"
        )
    return seconds


def _suite_arg(config: pytest.Config, arg: str) -> str | None:
    """The rest of ``arg`` after :data:`SUITE_ID`'s path (``""`` for the whole suite,
    ``"::TestMemcertBackend::test_x"`` for one test); None if ``arg`` is not of it. A
    real file of that name is left to pytest."""
    path, sep, rest = arg.partition("::")
    if path != SUITE_ID or (config.invocation_params.dir / path).exists():
        return None
    return sep + rest


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Module | None:
    """Give the suite's module :data:`SUITE_ID` as node id.

    pytest names a file outside the rootdir relative to the argument that named it;
    the plugin names the module itself, so its tests' ids would start with ``::``
    (``::TestMemcertBackend::test_uniqueness``), which pytest cannot take back. A real
    path could be taken back, but the module's path differs between installs, and
    naming it would move pytest's rootdir there and leave the project's conftest and
    ini file out of the re-run.
    """
    if module_path != _SUITE_FILE:
        return None
    return pytest.Module.from_parent(parent, path=module_path, nodeid=SUITE_ID)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the suite's tests ``memcert``, so that ``-m memcert`` selects them."""
    suite = sys.modules.get(_SUITE)
    if suite is None:  # no test module used the suite
        return
    base = suite.MemoryBackendCertification
    for item in items:
        cls = getattr(item, "cls", None)
        if cls is not None and issubclass(cls, base):
            item.add_marker(pytest.mark.memcert)
