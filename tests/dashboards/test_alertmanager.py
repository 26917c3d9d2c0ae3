"""dashboards/alertmanager.yml: amtool accepts it and routes by severity, and a real
Alertmanager delivers a failing night's MemcertNightlyFailed to a webhook.

The end-to-end test runs everything on loopback, in servers of its own: a Pushgateway,
a Prometheus evaluating memcert's rules every second and sending alerts to an
Alertmanager that runs the example configuration with its webhook URLs pointed at a
stdlib HTTP server in this test, and its waits cut to a second. A real `memcert
nightly` of a known-bad backend pushes there; the page must arrive.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from .promql import REPO, RULES

ALERTMANAGER_CONFIG = REPO / "dashboards" / "alertmanager.yml"
HOST = "127.0.0.1"
BAD = ("chaos.examples", "restore_revives")
READY_S = 60
DELIVERY_S = 90
EXAMPLE_URLS = {"critical": "http://pager.example.internal/memcert/critical",
                "warning": "http://tickets.example.internal/memcert/warning"}


def amtool(binaries: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binaries["amtool"], *args], capture_output=True, text=True,
                          timeout=60)


def test_amtool_accepts_the_example(alerting_binaries):
    result = amtool(alerting_binaries, "check-config", str(ALERTMANAGER_CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and " - 2 receivers" in result.stdout


@pytest.mark.parametrize(("labels", "receiver"), [
    (["severity=critical", "alertname=MemcertNightlyFailed"], "memcert-page"),
    (["severity=critical", "alertname=MemcertGuardViolation"], "memcert-page"),
    (["severity=warning", "alertname=MemcertNightlyNoRecentSuccess"], "memcert-ticket"),
    (["alertname=SomethingElse"], "memcert-ticket"),
])
def test_the_example_routes_critical_to_the_pager_and_the_rest_to_tickets(
        alerting_binaries, labels, receiver):
    result = amtool(alerting_binaries, "config", "routes", "test",
                    f"--config.file={ALERTMANAGER_CONFIG}", *labels)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_every_severity_the_rules_use_has_a_route():
    severities = set(re.findall(r"severity: (\w+)\n", RULES.read_text()))
    routed = set(re.findall(r"""matchers: \['severity="(\w+)"'\]""",
                            ALERTMANAGER_CONFIG.read_text()))
    assert severities == routed == set(EXAMPLE_URLS)


class Webhook:
    """A stdlib HTTP server on loopback that keeps every notification posted to it."""

    def __init__(self) -> None:
        self.received: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.put((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                """Quiet: the test reports what it received."""

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class Servers:
    """Servers started for one test, each logging to a file, all stopped at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, argv: list[str]) -> str:
        port = free_port()
        log = self.workdir / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen([a.replace("{port}", str(port)) for a in argv],
                                       stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, cwd=self.workdir)
        self.processes.append(process)
        url = f"http://{HOST}:{port}"
        deadline = time.monotonic() + READY_S
        while not ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{name} did not start; its log:\n{log.read_text()}")
            time.sleep(0.1)
        return url

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


def alertmanager_config(webhook_url: str) -> str:
    """The example, its receivers pointed at the webhook, its waits cut to a second."""
    text = ALERTMANAGER_CONFIG.read_text()
    for severity, url in EXAMPLE_URLS.items():
        assert text.count(f"url: {url}\n") == 1, url
        text = text.replace(url, f"{webhook_url}/{severity}")
    for key in ("group_wait", "group_interval"):
        text, n = re.subn(rf"^(\s+){key}: \S+$", rf"\1{key}: 1s", text, flags=re.M)
        assert n == 1, key
    return text


def prometheus_config(gateway: str, alertmanager: str) -> str:
    """Scrape the Pushgateway and evaluate memcert's rules every second; alert to ours."""
    return json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [alertmanager.removeprefix("http://")]}]}]},
        "scrape_configs": [{"job_name": "pushgateway", "honor_labels": True,
                            "static_configs": [{"targets": [gateway.removeprefix("http://")]}]}],
    })


def firing(payload: dict[str, Any], alertname: str, backend: str) -> list[dict[str, Any]]:
    return [a for a in payload["alerts"] if a["status"] == "firing"
            and a["labels"].get("alertname") == alertname
            and a["labels"].get("backend") == backend]


@pytest.mark.slow
def test_a_failing_nightly_pages_through_a_real_alertmanager(tmp_path, alerting_binaries,
                                                              webhook):
    started = time.monotonic()
    module = f"paged_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(f"from {BAD[0]} import {BAD[1]} as backend\n")
    backend = f"{module}:backend"
    (tmp_path / "alertmanager.yml").write_text(alertmanager_config(webhook.url))
    servers = Servers(tmp_path)
    nightly: subprocess.Popen[str] | None = None
    try:
        gateway = servers.start("pushgateway", [
            alerting_binaries["pushgateway"], f"--web.listen-address={HOST}:{{port}}",
            "--persistence.file=", "--log.level=warn"])
        nightly = subprocess.Popen(
            [sys.executable, "-m", "chaos.cli", "nightly", backend, "--out",
             str(tmp_path / "nights"), "--budget", "3", "--seed", "20261202", "--quiet",
             "--pushgateway", gateway],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        alertmanager = servers.start("alertmanager", [
            alerting_binaries["alertmanager"], f"--config.file={tmp_path / 'alertmanager.yml'}",
            f"--storage.path={tmp_path / 'alertmanager'}", "--cluster.listen-address=",
            f"--web.listen-address={HOST}:{{port}}", "--log.level=warn"])
        (tmp_path / "prometheus.yml").write_text(prometheus_config(gateway, alertmanager))
        servers.start("prometheus", [
            alerting_binaries["prometheus"], f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'prometheus'}",
            f"--web.listen-address={HOST}:{{port}}", "--log.level=warn"])
        out, err = nightly.communicate(timeout=300)
        assert nightly.returncode == 1, out + err
        deadline = time.monotonic() + DELIVERY_S
        pages: list[dict[str, Any]] = []
        while not pages and time.monotonic() < deadline:
            try:
                path, payload = webhook.received.get(timeout=1)
            except queue.Empty:
                continue
            if path == "/critical":
                pages = [payload] if firing(payload, "MemcertNightlyFailed", backend) else []
        assert pages, f"no page for {backend} within {DELIVERY_S}s"
        [page] = pages
        assert page["receiver"] == "memcert-page"
        assert page["groupLabels"] == {"backend": backend, "severity": "critical"}
        [alert] = firing(page, "MemcertNightlyFailed", backend)
        assert alert["labels"]["suite"] == "nightly" and alert["labels"]["job"] == "memcert"
        assert alert["annotations"]["summary"] == f"memcert's nightly run of {backend} failed"
    finally:
        if nightly is not None and nightly.poll() is None:
            nightly.kill()
            nightly.communicate()
        servers.stop()
    print(f"a failing night paged through Alertmanager in {time.monotonic() - started:.1f}s")
