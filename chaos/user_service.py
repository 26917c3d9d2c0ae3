"""A user's HTTP service that memcert starts itself, so that it can crash and stall it.

``memcert certify http://127.0.0.1:{port} --service-cmd './serve --port {port}'`` (or a
``[service]`` table) makes memcert the service's supervisor for the run: it picks a
free port for ``{port}``, starts the command in a process group of its own (so a shell
wrapper and the server it runs are signalled together), waits until the service
answers, certifies it, and stops it at the end. In between, ``crash_restart`` freezes
it (SIGSTOP) with operations in flight, kills it (SIGKILL) and starts the same command
again on the same port and data; ``pause`` freezes it for a moment and lets it go on
(SIGCONT). What the service prints goes to a log file, whose last lines explain a start
that failed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from invariants.adapters.http import DEFAULT_TIMEOUT_S, HttpFactory
from invariants.errors import FactoryError, InvalidArgument
from scenarios.service_plan import Service

from .freeze import freeze, thaw

__all__ = ["PORT", "ServiceFactory", "UserService", "controlled_service", "free_port"]

PORT = "{port}"
"""What memcert replaces with the service's port, in the URL and in the command."""
_LOG_LINES = 20
"""How many of the service's last lines an error about it quotes."""


class ServiceStartFailed(FactoryError):
    """The service exited, or did not answer within its start timeout."""


def free_port() -> int:
    """A TCP port nobody listens on now, on 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class UserService:
    """One user's service process: start, freeze, thaw, kill, restart, stop."""

    def __init__(self, spec: Service, url: str, port: int) -> None:
        self.spec = spec
        self.url = url
        self.port = port
        self.argv = [part.replace(PORT, str(port)) for part in shlex.split(spec.command)]
        if not self.argv:
            raise InvalidArgument("--service-cmd is empty; give the command that starts your "
                                  "service, e.g. --service-cmd './serve --port {port}'")
        self.log = Path(tempfile.mkstemp(prefix="memcert-service-", suffix=".log")[1])
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        """Start the command and return once the service answers, or raise
        :class:`ServiceStartFailed` with its exit code and last lines."""
        with open(self.log, "ab") as out:
            try:
                self.process = subprocess.Popen(
                    self.argv, cwd=self.spec.cwd or None, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as error:
                raise ServiceStartFailed(
                    f"--service-cmd {self.spec.command!r} could not start: {error}") from None
        deadline = time.monotonic() + self.spec.start_timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise ServiceStartFailed(
                    f"the service exited with code {self.process.returncode} before it "
                    f"answered; its last lines:\n{self.tail()}")
            if self._answers():
                return
            time.sleep(0.05)
        self.kill()
        raise ServiceStartFailed(
            f"the service did not answer {self._ready_url()} within "
            f"{self.spec.start_timeout_s:g} s (--service-timeout); its last lines:\n"
            f"{self.tail()}")

    def freeze(self) -> None:
        if self.running:
            freeze(self.pid, group=True)

    def thaw(self) -> None:
        if self.running:
            thaw(self.pid, group=True)

    def kill(self) -> None:
        """SIGKILL the whole process group, as a crash would; the data stays as it was."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()

    def restart(self) -> None:
        """Start the same command on the same port; the port may be held a moment after
        a kill, so a start that fails is tried again until the start timeout is over."""
        deadline = time.monotonic() + self.spec.start_timeout_s
        while True:
            try:
                self.start()
                return
            except ServiceStartFailed:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the group (after SIGCONT, in case it is frozen), then SIGKILL."""
        if not self.running:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGCONT)
            os.killpg(self.pid, signal.SIGTERM)
        assert self.process is not None
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(f"  {line}" for line in lines[-_LOG_LINES:]) or "  (nothing)"

    def _ready_url(self) -> str:
        return self.spec.health_url.replace(PORT, str(self.port)) or f"{self.url} (a read)"

    def _answers(self) -> bool:
        if self.spec.health_url:
            try:
                with urllib.request.urlopen(self.spec.health_url.replace(PORT, str(self.port)),
                                            timeout=1.0) as answer:
                    status: int = answer.status
                    return 200 <= status < 300
            except (OSError, urllib.error.URLError):
                return False
        try:
            HttpFactory(self.url, token=os.environ.get("MEMCERT_TOKEN") or None,
                        timeout_s=1.0).check()
        except FactoryError:
            return False
        return True


class ServiceFactory(HttpFactory):
    """The HTTP factory of a user's service that memcert runs: the nemesis reaches its
    process through ``service``; ``command_args`` name it in the reproducing command."""

    def __init__(self, service: UserService, url_given: str, *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(service.url, token=os.environ.get("MEMCERT_TOKEN") or None,
                         timeout_s=timeout_s)
        self.service = service
        spec = service.spec
        args = [url_given, "--service-cmd", spec.command]
        if spec.health_url:
            args += ["--service-health", spec.health_url]
        if spec.cwd:
            args += ["--service-cwd", spec.cwd]
        self.command_args: tuple[str, ...] = tuple(args)

    def __repr__(self) -> str:
        return f"ServiceFactory({self.url!r}, {self.service.spec.command!r})"


@contextlib.contextmanager
def controlled_service(spec: Service, url: str) -> Iterator[ServiceFactory]:
    """Start the user's service for ``url`` (a ``{port}`` in it is a free port) and yield
    its factory; the service is stopped on exit, whatever happened."""
    if not url.lower().startswith(("http://", "https://")):
        raise InvalidArgument(f"--service-cmd needs the URL the service will answer at, e.g. "
                              f"http://127.0.0.1:{PORT}, but the backend is {url!r}")
    port = free_port() if PORT in url else _port_of(url)
    service = UserService(spec, url.replace(PORT, str(port)), port)
    try:
        service.start()
        yield ServiceFactory(service, url)
    finally:
        service.stop()
        service.log.unlink(missing_ok=True)


def _port_of(url: str) -> int:
    parts = urlsplit(url)
    if parts.port is not None:
        return parts.port
    return 443 if parts.scheme.lower() == "https" else 80
