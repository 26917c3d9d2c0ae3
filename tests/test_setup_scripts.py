"""The test plumbing itself: the throwaway server and the database fixtures."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
THROWAWAY_PG = REPO / "scripts" / "throwaway-pg"
CONFTEST = Path(__file__).with_name("conftest.py")

# Run by `throwaway-pg run`: proves the URL it exports works, then reports
# where the server lives so the test can check it is gone afterwards.
REPORTING_CHILD = """
import json, os, sys, time
import psycopg
from sqlalchemy.engine import make_url
url = make_url(os.environ["MEMCERT_TEST_PG_URL"])
with psycopg.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as c:
    answer = c.execute("select 1").fetchone()[0]
report = {"dir": os.environ["MEMCERT_PG_DIR"], "port": url.port, "answer": answer}
with open(sys.argv[1] + ".tmp", "w") as out:
    json.dump(report, out)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "sleep":
    time.sleep(120)
sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else 0)
"""


# Where the suite's server runs, the binaries to start another one are there too;
# elsewhere these tests skip or fail exactly as the PostgreSQL tests do.
needs_server_binaries = pytest.mark.usefixtures("pg_url")


def accepts_connections(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def throwaway_run(report: Path, child_arg: str) -> list[str]:
    return [
        sys.executable,
        str(THROWAWAY_PG),
        "run",
        "--",
        sys.executable,
        "-c",
        REPORTING_CHILD,
        str(report),
        child_arg,
    ]


def use_real_conftest(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    postgres: needs the server\n")


@pytest.fixture
def engine(fresh_pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(fresh_pg_url)
    yield engine
    engine.dispose()


def test_fresh_database_is_new_and_answers(engine: sa.Engine, fresh_pg_url: str) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.text("select 1")).scalar_one() == 1
        database = conn.execute(sa.text("select current_database()")).scalar_one()
        tables = conn.execute(
            sa.text("select count(*) from pg_tables where schemaname = 'public'")
        ).scalar_one()
    assert database == make_url(fresh_pg_url).database
    assert database != "memcert"
    assert tables == 0


def test_server_listens_only_on_loopback(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(sa.text("show listen_addresses")).scalar_one() == "127.0.0.1"


def test_server_process_is_not_root(engine: sa.Engine) -> None:
    with engine.connect() as conn:
        data_directory = Path(
            conn.execute(sa.text("select current_setting('data_directory')")).scalar_one()
        )
        server_pid = conn.execute(sa.text("select pg_backend_pid()")).scalar_one()
    postmaster_pid = int((data_directory / "postmaster.pid").read_text().split("\n", 1)[0])
    for pid in (postmaster_pid, server_pid):
        assert Path(f"/proc/{pid}").stat().st_uid != 0
    assert data_directory.stat().st_uid != 0


def test_db_url_is_an_empty_database_on_each_backend(
    db_url: str, request: pytest.FixtureRequest
) -> None:
    expected_dialect = {"sqlite": "sqlite", "postgres": "postgresql"}
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            assert sa.inspect(conn).get_table_names() == []
            conn.execute(sa.text("create table probe (id integer primary key)"))
        assert engine.dialect.name == expected_dialect[request.node.callspec.params["db_url"]]
    finally:
        engine.dispose()


def test_fresh_database_is_dropped_after_the_test(
    pytester: pytest.Pytester, pg_url: str, tmp_path: Path
) -> None:
    names = tmp_path / "names"
    use_real_conftest(pytester)
    pytester.makepyfile(
        f"""
        from sqlalchemy.engine import make_url

        def test_records_name(fresh_pg_url):
            with open({str(names)!r}, "a") as out:
                out.write(make_url(fresh_pg_url).database + "\\n")
        """
    )
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    (name,) = names.read_text().split()
    admin = make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin) as conn:
        row = conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone()
    assert row is None


NO_SERVER = (
    "MEMCERT_TEST_PG_URL is not set: run `make test`, which starts a throwaway PostgreSQL "
    "server and sets it"
)


@pytest.mark.parametrize(
    ("env", "outcome", "line"),
    [
        ({}, "skipped", f"SKIPPED [1] test_needs_pg.py:1: {NO_SERVER}"),
        ({"CI": "true"}, "errors", f"{NO_SERVER} (PostgreSQL tests may not be skipped here)"),
        (
            {"MEMCERT_REQUIRE_PG": "1"},
            "errors",
            f"{NO_SERVER} (PostgreSQL tests may not be skipped here)",
        ),
    ],
    ids=["local-skips", "ci-fails", "required-fails"],
)
def test_missing_server_skips_only_where_allowed(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    outcome: str,
    line: str,
) -> None:
    for name in ("MEMCERT_TEST_PG_URL", "CI", "MEMCERT_REQUIRE_PG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    use_real_conftest(pytester)
    pytester.makepyfile(test_needs_pg="def test_pg(pg_url):\n    pass\n")
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(**{outcome: 1})
    assert line in result.stdout.lines


@needs_server_binaries
def test_run_passes_exit_status_through_and_removes_server(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    result = subprocess.run(
        throwaway_run(report_file, "5"), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 5, result.stderr
    report = json.loads(report_file.read_text())
    assert report["answer"] == 1
    assert not Path(report["dir"]).exists()
    assert not accepts_connections(report["port"])


@needs_server_binaries
def test_run_removes_server_when_interrupted(tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    runner = subprocess.Popen(
        throwaway_run(report_file, "sleep"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not report_file.exists():
            assert runner.poll() is None, runner.communicate()
            assert time.monotonic() < deadline, "the command under throwaway-pg never started"
            time.sleep(0.05)
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 128 + signal.SIGTERM
    report = json.loads(report_file.read_text())
    assert not Path(report["dir"]).exists()
    assert not accepts_connections(report["port"])
