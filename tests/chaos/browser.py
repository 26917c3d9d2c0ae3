"""Headless Chromium driven over the DevTools protocol, and axe-core to check pages with.

Chromium is Debian's (apt-get installs it where the set-up may); axe-core comes from npm,
pinned, into a cache folder of the project (``.cache/node``) that the first test to
need it fills, under a lock so that xdist workers do not race. A missing browser or npm
fails the test where :func:`tests.conftest.required_here`; axe-core cannot be skipped
anywhere, since a page that was never checked is no page that passed.

The protocol is spoken over one WebSocket to the page's target (the ``websockets``
client): each command waits for its own answer, and events in between are kept for
:meth:`Browser.wait_for`.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from tests.conftest import required_here, skip_or_fail

REPO = Path(__file__).resolve().parents[2]
AXE_VERSION = "4.14.1"
NODE_CACHE = REPO / ".cache" / "node"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--host-resolver-rules=MAP * ~NOTFOUND")


def _apt_install(package: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=env, stdin=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", package],
                   check=True, env=env, stdin=subprocess.DEVNULL)


def find_chromium() -> str:
    """Debian's chromium; installed with apt-get when missing, where the set-up may."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if required_here() and os.geteuid() == 0:
        _apt_install("chromium")
        found = shutil.which("chromium")
        if found:
            return found
    skip_or_fail("chromium is not installed: `apt-get install chromium` (make test does it as "
                 "root)", tests="the report's browser tests")


def axe_source() -> str:
    """axe-core's script, installed from npm into :data:`NODE_CACHE` on first use."""
    script = NODE_CACHE / "node_modules" / "axe-core" / "axe.min.js"
    NODE_CACHE.mkdir(parents=True, exist_ok=True)
    with open(NODE_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _installed(script):
            npm = shutil.which("npm")
            if npm is None and os.geteuid() == 0:
                _apt_install("npm")
                npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not installed, so axe-core cannot be: `apt-get install "
                            "npm` (the accessibility checks may not be skipped)", pytrace=False)
            subprocess.run([npm, "install", "--no-save", "--no-audit", "--no-fund",
                            "--prefix", str(NODE_CACHE), f"axe-core@{AXE_VERSION}"],
                           check=True, stdin=subprocess.DEVNULL, timeout=300)
    return script.read_text(encoding="utf-8")


def _installed(script: Path) -> bool:
    package = script.with_name("package.json")
    return script.is_file() and package.is_file() and json.loads(
        package.read_text(encoding="utf-8")).get("version") == AXE_VERSION


class Browser:
    """One page of a headless Chromium, driven command by command."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        self._socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=120))
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {method} within {timeout_s:g} s")
            self.events.append(json.loads(self._socket.recv(timeout=left)))

    def open(self, page: Path, *, width: int = 1280, height: int = 900) -> None:
        """Load ``page`` at ``width`` CSS pixels and let its scripts run."""
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.events.clear()
        self.send("Page.navigate", url=page.as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str, *, wait: bool = False) -> Any:
        answer = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=wait)
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression[:60]}...: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def console_errors(self) -> list[str]:
        """Errors the page logged or threw since it was opened."""
        found = []
        for event in self.events:
            if event.get("method") == "Runtime.exceptionThrown":
                found.append(str(event["params"]["exceptionDetails"].get("text")))
            elif (event.get("method") == "Runtime.consoleAPICalled"
                  and event["params"].get("type") in ("error", "assert")):
                found.append(str(event["params"].get("args")))
        return found

    def axe(self) -> list[dict[str, Any]]:
        """axe-core's violations on the page: id, impact, help and the nodes' targets."""
        self.evaluate(axe_source())
        found = self.evaluate(
            "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map("
            "v => ({id: v.id, impact: v.impact, help: v.help, "
            "nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))})))", wait=True)
        assert isinstance(found, list)
        return found

    def screenshot(self, path: Path) -> bytes:
        """The whole page, as PNG, also written to ``path``."""
        shot = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return data


@contextmanager
def browser() -> Iterator[Browser]:
    """A fresh headless Chromium on loopback, its own profile, stopped afterwards."""
    binary = find_chromium()
    # Chromium's helper processes may still write into the profile as it shuts down;
    # what they leave there is no failure of the page under test.
    with tempfile.TemporaryDirectory(prefix="memcert-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = _devtools_port(Path(profile), process)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
                targets = json.load(r)
            [target] = [t for t in targets if t.get("type") == "page"][:1]
            with connect(target["webSocketDebuggerUrl"], max_size=None,
                         open_timeout=30) as socket:
                yield Browser(socket)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _devtools_port(profile: Path, process: subprocess.Popen[bytes]) -> int:
    """The port Chromium picked, from the file it writes into its profile."""
    active = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"chromium exited with {process.returncode} before it "
                                 "opened its DevTools port")
        if active.is_file():
            text = active.read_text().split("\n", 1)[0].strip()
            if text:
                return int(text)
        time.sleep(0.1)
    raise AssertionError("chromium did not open its DevTools port within 60 s")
