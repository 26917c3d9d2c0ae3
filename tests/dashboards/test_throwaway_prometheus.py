"""scripts/throwaway-prometheus: servers on loopback that are gone when the command ends,
and fixtures that fail rather than skip where the servers are required."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .live import get_json

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "throwaway-prometheus"
CONFTEST = Path(__file__).with_name("conftest.py")

# Run by `throwaway-prometheus run`: proves both servers answer, and reports where.
REPORTING_CHILD = """
import json, os, sys, time, urllib.request
env = {k: v for k, v in os.environ.items()
       if k.startswith(("MEMCERT_PROM", "MEMCERT_PUSH", "MEMCERT_ALERT", "MEMCERT_AMTOOL"))}
for name in ("MEMCERT_PROMETHEUS_URL", "MEMCERT_PUSHGATEWAY_URL"):
    with urllib.request.urlopen(env[name] + "/-/ready", timeout=5) as response:
        env[name + "_READY"] = response.status
with open(sys.argv[1] + ".tmp", "w") as out:
    json.dump(env, out)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "sleep":
    time.sleep(120)
sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else 0)
"""


def run_argv(report: Path, child_arg: str) -> list[str]:
    return [sys.executable, str(SCRIPT), "run", "--", sys.executable, "-c", REPORTING_CHILD,
            str(report), child_arg]


def accepts_connections(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex((host, int(port))) == 0


def assert_gone(env: dict) -> None:
    assert not Path(env["MEMCERT_PROMETHEUS_DIR"]).exists()
    assert not accepts_connections(env["MEMCERT_PROMETHEUS_URL"])
    assert not accepts_connections(env["MEMCERT_PUSHGATEWAY_URL"])


@pytest.mark.usefixtures("promtool")
def test_run_serves_both_on_loopback_then_removes_them_and_passes_the_status(tmp_path):
    report = tmp_path / "report.json"
    result = subprocess.run(run_argv(report, "7"), capture_output=True, text=True, timeout=120)
    assert result.returncode == 7, result.stderr
    env = json.loads(report.read_text())
    assert env["MEMCERT_PROMETHEUS_URL_READY"] == env["MEMCERT_PUSHGATEWAY_URL_READY"] == 200
    assert env["MEMCERT_PROMETHEUS_URL"].startswith("http://127.0.0.1:")
    assert env["MEMCERT_PUSHGATEWAY_URL"].startswith("http://127.0.0.1:")
    assert Path(env["MEMCERT_PROMETHEUS_SD_DIR"]).parent == Path(env["MEMCERT_PROMETHEUS_DIR"])
    for name in ("MEMCERT_PROMETHEUS_BIN", "MEMCERT_PUSHGATEWAY_BIN", "MEMCERT_ALERTMANAGER",
                 "MEMCERT_AMTOOL"):
        assert os.access(env[name], os.X_OK), f"{name}={env[name]} is not a program"
    assert_gone(env)


@pytest.mark.usefixtures("promtool")
def test_run_removes_the_servers_when_interrupted(tmp_path):
    report = tmp_path / "report.json"
    runner = subprocess.Popen(run_argv(report, "sleep"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        env = json.loads(report.read_text())
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.communicate()
    assert_gone(env)


def test_the_suite_s_prometheus_loads_memcert_s_rules(prometheus_url):
    groups = get_json(f"{prometheus_url}/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in groups} >= {"memcert.recording", "memcert.alerts"}
    assert all(rule["health"] == "ok" for g in groups for rule in g["rules"])


NO_SERVER = ("MEMCERT_PROMETHEUS_URL is not set: run `make test`, which installs Prometheus "
             "and starts throwaway servers (scripts/throwaway-prometheus run -- ...)")


@pytest.mark.parametrize(("env", "outcome", "line"), [
    ({}, "skipped", f"SKIPPED [1] test_needs_prometheus.py:1: {NO_SERVER}"),
    ({"CI": "true"}, "errors", f"{NO_SERVER} (these tests may not be skipped here)"),
    ({"MEMCERT_REQUIRE_PG": "1"}, "errors", f"{NO_SERVER} (these tests may not be skipped here)"),
], ids=["local-skips", "ci-fails", "required-fails"])
def test_a_missing_server_skips_only_where_allowed(pytester, monkeypatch, env, outcome, line):
    for name in ("MEMCERT_PROMETHEUS_URL", "CI", "MEMCERT_REQUIRE_PG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_needs_prometheus="def test_it(prometheus_url):\n    pass\n")
    result = pytester.runpytest_inprocess("-rs")
    result.assert_outcomes(**{outcome: 1})
    assert line in result.stdout.lines
