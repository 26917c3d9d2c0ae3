"""The Prometheus servers and tools these tests run against.

`make test` starts a throwaway Prometheus and Pushgateway (scripts/throwaway-prometheus)
and exports where they are. Without them local runs skip; CI (or MEMCERT_REQUIRE_PG=1,
which `make test` sets) fails instead, because a skipped test there would hide that the
dashboards and rules were never checked against the real thing.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

from tests.conftest import skip_or_fail


def _missing(what: str) -> NoReturn:
    skip_or_fail(f"{what}: run `make test`, which installs Prometheus and starts throwaway "
                 "servers (scripts/throwaway-prometheus run -- ...)", tests="these tests")


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        _missing(f"{name} is not set")
    return str(value)


@pytest.fixture(scope="session")
def promtool() -> str:
    """promtool: from the throwaway servers' set-up, or on PATH."""
    found = os.environ.get("MEMCERT_PROMTOOL") or shutil.which("promtool")
    if not found:
        _missing("promtool is not installed")
    return str(found)


def _binary(variable: str, name: str) -> str:
    """A server binary the throwaway set-up installs: a missing one fails, never skips,
    since the Alertmanager test is the only proof that an alert reaches anyone."""
    found = os.environ.get(variable) or shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: run `make test`, whose "
                    "scripts/throwaway-prometheus installs it with apt-get (as root), or "
                    f"`apt-get install prometheus prometheus-pushgateway "
                    f"prometheus-alertmanager`, or set {variable}")
    return str(found)


@pytest.fixture(scope="session")
def alerting_binaries() -> dict[str, str]:
    """Prometheus, the Pushgateway, Alertmanager and amtool, for servers a test runs."""
    return {"prometheus": _binary("MEMCERT_PROMETHEUS_BIN", "prometheus"),
            "pushgateway": _binary("MEMCERT_PUSHGATEWAY_BIN", "prometheus-pushgateway"),
            "alertmanager": _binary("MEMCERT_ALERTMANAGER", "prometheus-alertmanager"),
            "amtool": _binary("MEMCERT_AMTOOL", "amtool")}


@pytest.fixture(scope="session")
def prometheus_url() -> str:
    return _env("MEMCERT_PROMETHEUS_URL")


@pytest.fixture(scope="session")
def pushgateway_url() -> str:
    return _env("MEMCERT_PUSHGATEWAY_URL")


@pytest.fixture(scope="session")
def prometheus_targets() -> str:
    """The folder whose *.json files list the targets the throwaway Prometheus scrapes."""
    return _env("MEMCERT_PROMETHEUS_SD_DIR")
