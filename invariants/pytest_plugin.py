"""memcert's pytest plugin: certify a backend from pytest.

``pytest --memcert-backend=package.module:factory`` adds the certification suite
(:mod:`invariants.certification_suite`) to the run, against that backend; ``-m memcert``
runs only the suite. Test modules may instead subclass ``MemoryBackendCertification``.
Settings come from memcert's Hypothesis profiles: ``--hypothesis-profile=memcert-nightly``
for a deep run; ``memcert-ci`` is used when ``CI`` is set, ``memcert-dev`` otherwise.

This module is loaded in every pytest run once memcert is installed, so it imports
nothing heavy: Hypothesis and the suite are imported only when a test needs them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from invariants.levels import CLAIMABLE_LEVELS

_SUITE = "invariants.certification_suite"


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


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the marker and, before Hypothesis loads a ``memcert-`` profile named by
    ``--hypothesis-profile``, the profiles; add the suite when a backend is named."""
    config.addinivalue_line("markers", "memcert: a test of the memcert certification suite")
    profile = config.getoption("hypothesis_profile", None)
    if isinstance(profile, str) and profile.startswith("memcert-"):
        from invariants._stateful_settings import register_profiles

        register_profiles()
    spec = config.getoption("memcert_backend")
    if spec is None:
        return
    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise pytest.UsageError(
            f"--memcert-backend={spec!r} is not of the form package.module:factory; "
            "for example --memcert-backend=reference_store:factory"
        )
    config.args.append(str(Path(__file__).with_name("_suite_from_option.py")))


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
