"""Start ``memcert serve`` as a real subprocess on a free port, for tests and harnesses.

Importable on its own (no pytest needed), so the fault proxy, the network and crash
scenarios and the Locust tests can start, kill and restart the service the same way:

    with Served.start(db_url) as served:
        ...  # served.url, served.process
    # stopped with SIGTERM, or call served.kill() / served.restart()

The service announces its URL on stderr once it accepts requests; stderr is drained by
a thread, so a chatty server can never block on a full pipe, and kept in ``lines`` for
failure messages.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ROOT", "ServeFailed", "Served", "serve_command"]

ROOT = Path(__file__).resolve().parents[2]
_SERVE_ENV = ("MEMCERT_TOKEN", "MEMCERT_HOST", "MEMCERT_PORT", "MEMCERT_SERVE_HANDLES",
              "MEMCERT_DB_URL")
"""Variables that would change what ``memcert serve`` does; a test passes them explicitly."""
_ANNOUNCED = re.compile(r"^memcert: serving the reference store at (\S+)$")


class ServeFailed(AssertionError):
    """The service exited or stayed silent instead of announcing its URL."""


def serve_command(db_url: str, *, host: str = "127.0.0.1", port: int = 0,
                  token: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The argv of ``memcert serve`` run by this interpreter from the repository root."""
    command = [sys.executable, "-m", "chaos.cli", "serve", "--db", db_url, "--host", host,
               "--port", str(port)]
    if token is not None:
        command += ["--token", token]
    return [*command, *extra]


class Served:
    """One running ``memcert serve`` process and the URL it announced."""

    def __init__(self, command: list[str], env: dict[str, str], process: subprocess.Popen[str]
                 ) -> None:
        self.command = command
        self.env = env
        self.process = process
        self.lines: list[str] = []
        self.url = ""
        self._announced = threading.Event()
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    @classmethod
    def start(cls, db_url: str, *, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None, extra: Sequence[str] = (),
              env: dict[str, str] | None = None, timeout_s: float = 30.0) -> Served:
        """Start the service and wait until it announces its URL."""
        command = serve_command(db_url, host=host, port=port, token=token, extra=extra)
        environment = {name: value for name, value in os.environ.items()
                       if name not in _SERVE_ENV}
        environment.update(env or {})
        served = cls(command, environment, _spawn(command, environment))
        served.wait_announced(timeout_s)
        return served

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def wait_announced(self, timeout_s: float) -> None:
        if not self._announced.wait(timeout_s) or not self.url:
            self.kill()
            raise ServeFailed(f"memcert serve did not announce a URL within {timeout_s}s; "
                              f"exit code {self.process.poll()}, stderr:\n" + self.stderr())

    def stderr(self) -> str:
        return "\n".join(self.lines)

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM, then wait: a graceful stop exits 0."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServeFailed("memcert serve ignored SIGTERM for "
                              f"{timeout_s}s; stderr:\n{self.stderr()}") from None
        self._drain.join(5)
        return code

    def kill(self) -> None:
        """SIGKILL, as a crash would; the database is left as the crash left it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._drain.join(5)

    def restart(self, timeout_s: float = 30.0) -> None:
        """Start the same command again on the same port (after :meth:`stop` or :meth:`kill`)."""
        command = list(self.command)
        command[command.index("--port") + 1] = str(self.port)
        deadline = time.monotonic() + timeout_s
        while True:
            fresh = Served(command, self.env, _spawn(command, self.env))
            try:
                fresh.wait_announced(max(1.0, deadline - time.monotonic()))
                break
            except ServeFailed:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        self.process, self.lines, self.url = fresh.process, fresh.lines, fresh.url
        self._drain, self._announced = fresh._drain, fresh._announced

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process.poll() is None:
            self.stop()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            line = line.rstrip("\n")
            self.lines.append(line)
            found = _ANNOUNCED.match(line)
            if found and not self.url:
                self.url = found.group(1)
                self._announced.set()
        self._announced.set()


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
