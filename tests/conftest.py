"""Database fixtures shared by the whole suite.

`make test` starts a throwaway PostgreSQL server (scripts/throwaway-pg) and
exports its URL as MEMCERT_TEST_PG_URL. Every test that touches a database gets
a database of its own, so tests never see each other's rows, under xdist too.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

pytest_plugins = ["pytester"]

PG_URL_ENV = "MEMCERT_TEST_PG_URL"
REQUIRE_PG_ENV = "MEMCERT_REQUIRE_PG"


def required_here() -> bool:
    """In CI, and under `make test` (which sets MEMCERT_REQUIRE_PG=1), every part a test
    needs is installed by the set-up, so a missing one is a failure, never a skip."""
    return bool(os.environ.get("CI")) or os.environ.get(REQUIRE_PG_ENV) == "1"


def skip_or_fail(reason: str, *, tests: str, module_level: bool = False) -> NoReturn:
    """Skip with ``reason`` on a developer's machine; fail with it where
    :func:`required_here`, since a skip there would hide a part never exercised."""
    if required_here():
        pytest.fail(f"{reason} ({tests} may not be skipped here)", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that needs the server, so `-m "not postgres"` deselects them."""
    for item in items:
        if "pg_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def minilm() -> ModuleType:
    """``reference_store.normalize.minilm``, its model loaded: the semantic extra's tests
    skip without it on a developer's machine and fail where it is required."""
    from reference_store.normalize import minilm

    try:
        minilm.load()
    except ImportError as error:
        skip_or_fail(str(error), tests="the semantic tests")
    return minilm


@pytest.fixture(scope="session")
def pg_url() -> str:
    """The SQLAlchemy URL of the throwaway server's `memcert` database.

    Without a server, local runs skip; CI (or MEMCERT_REQUIRE_PG=1, which
    `make test` sets) fails instead, because a skipped PostgreSQL test there
    would hide that the backend was never exercised.
    """
    url = os.environ.get(PG_URL_ENV)
    if url:
        return url
    reason = (
        f"{PG_URL_ENV} is not set: run `make test`, which starts a throwaway PostgreSQL "
        "server and sets it"
    )
    skip_or_fail(reason, tests="PostgreSQL tests")


@pytest.fixture
def fresh_pg_url(pg_url: str) -> Iterator[str]:
    """A brand-new, empty PostgreSQL database for one test, dropped afterwards."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"t_{worker}_{uuid.uuid4().hex[:16]}"
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    database = sql.Identifier(name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(database))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file URL in this test's own temporary folder."""
    return f"sqlite:///{tmp_path / 'memcert.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    """A fresh database URL on each backend in turn: ask for this to test both."""
    fixture = "sqlite_url" if request.param == "sqlite" else "fresh_pg_url"
    url: str = request.getfixturevalue(fixture)
    return url
