"""A ``memcert serve`` process that memcert runs itself, and can kill and restart.

``memcert certify --serve`` certifies the reference store the way its users run it: as
a service, over HTTP. Because memcert owns the process, the ``crash_restart`` scenario
can SIGKILL it during concurrent writes and start it again on the same database and
port, which no user-given URL allows. The tests start services the same way::

    with ManagedService.start(db_url) as service:
        ...  # service.url, service.process
    # stopped with SIGTERM, or call service.kill() / service.restart()

The service announces its URL on stderr once it accepts requests; stderr is drained by
a thread, so a chatty server can never block on a full pipe, and kept in ``lines`` for
error messages.

Serving needs the ``serve`` extra (Starlette and uvicorn), which the base install leaves
out; :func:`require_serve_extra` says so, naming the command and the pip line, before
anything starts. Nothing here imports the service itself: it runs in its own process.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from invariants.adapters.http import DEFAULT_TIMEOUT_S, HttpFactory
from invariants.errors import FactoryError, MemcertError

from .freeze import freeze, thaw

__all__ = ["SERVE_EXTRA", "ManagedService", "MissingExtra", "ServeFailed", "ServedFactory",
           "managed_service", "require_serve_extra", "serve_command"]

SERVE_EXTRA = ("starlette", "uvicorn")
"""The modules the ``serve`` extra installs that serving cannot do without (httptools and
uvloop, also in the extra, only make it faster)."""

_PACKAGES = Path(__file__).resolve().parents[1]
"""The folder holding the ``chaos`` package, which the service's interpreter must import."""
_SERVE_ENV = ("MEMCERT_TOKEN", "MEMCERT_HOST", "MEMCERT_PORT", "MEMCERT_SERVE_HANDLES",
              "MEMCERT_DB_URL")
"""Variables that would change what ``memcert serve`` does; the command line says it all."""
_ANNOUNCED = re.compile(r"^memcert: serving the reference store at (\S+)$")


class ServeFailed(FactoryError):
    """The service exited, or stayed silent, instead of announcing its URL."""


class MissingExtra(MemcertError, ImportError):
    """A command needs an optional extra that is not installed; nothing was started."""


def require_serve_extra(command: str) -> None:
    """Raise :class:`MissingExtra` naming ``command`` and the pip line if the ``serve``
    extra is missing, so a base install fails at once with the fix, not with a traceback
    from the service's process."""
    missing = [name for name in SERVE_EXTRA if not _importable(name)]
    if missing:
        names = " and ".join(missing)
        raise MissingExtra(
            f"{command} needs {names}, which {'is' if len(missing) == 1 else 'are'} not "
            "installed. Install the serve extra: pip install 'memcert[serve]'"
        )


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def serve_command(db_url: str, *, host: str = "127.0.0.1", port: int = 0,
                  token: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The argv of ``memcert serve`` run by this interpreter."""
    command = [sys.executable, "-m", "chaos.cli", "serve", "--db", db_url, "--host", host,
               "--port", str(port)]
    if token is not None:
        command += ["--token", token]
    return [*command, *extra]


class ManagedService:
    """One running ``memcert serve`` process and the URL it announced."""

    def __init__(self, command: list[str], env: dict[str, str],
                 process: subprocess.Popen[str], token: str | None = None) -> None:
        self.command = command
        self.env = env
        self.process = process
        self.token = token
        self.lines: list[str] = []
        self.url = ""
        self._announced = threading.Event()
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    @classmethod
    def start(cls, db_url: str, *, host: str = "127.0.0.1", port: int = 0,
              token: str | None = None, extra: Sequence[str] = (),
              env: dict[str, str] | None = None, timeout_s: float = 30.0) -> ManagedService:
        """Start the service and wait until it announces its URL."""
        command = serve_command(db_url, host=host, port=port, token=token, extra=extra)
        environment = {name: value for name, value in os.environ.items()
                       if name not in _SERVE_ENV}
        environment["PYTHONPATH"] = os.pathsep.join(
            part for part in (str(_PACKAGES), environment.get("PYTHONPATH", "")) if part)
        environment.update(env or {})
        service = cls(command, environment, _spawn(command, environment), token)
        service.wait_announced(timeout_s)
        return service

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def wait_announced(self, timeout_s: float) -> None:
        if not self._announced.wait(timeout_s) or not self.url:
            self.kill()
            raise ServeFailed(f"memcert serve did not announce a URL within {timeout_s:g} s; "
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
                              f"{timeout_s:g} s; stderr:\n{self.stderr()}") from None
        self._drain.join(5)
        return code

    def freeze(self) -> None:
        """SIGSTOP, and return once the process has stopped: from then on it answers
        nothing, as if it had crashed at that instant, until :meth:`kill` ends it. What
        the nemesis uses to be sure a crash cuts an operation short. Where there is no
        SIGSTOP (Windows), nothing happens."""
        if self.process.poll() is None:
            freeze(self.process.pid)

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`: the process goes on as if it had stalled."""
        if self.process.poll() is None:
            thaw(self.process.pid)

    def kill(self) -> None:
        """SIGKILL, as a crash would; the database is left as the crash left it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._drain.join(5)

    def restart(self, timeout_s: float = 30.0) -> None:
        """Start the same command again on the same port (after :meth:`stop` or :meth:`kill`).

        The port may still be held for a moment after a kill, so a start that fails is
        tried again until ``timeout_s`` is over.
        """
        command = list(self.command)
        command[command.index("--port") + 1] = str(self.port)
        deadline = time.monotonic() + timeout_s
        while True:
            fresh = ManagedService(command, self.env, _spawn(command, self.env), self.token)
            try:
                fresh.wait_announced(max(1.0, deadline - time.monotonic()))
                break
            except ServeFailed:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
        self.process, self.lines, self.url = fresh.process, fresh.lines, fresh.url
        self._drain, self._announced = fresh._drain, fresh._announced

    def __enter__(self) -> ManagedService:
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


class ServedFactory(HttpFactory):
    """The HTTP factory of a service memcert runs: scenarios that crash the service
    reach its process through ``service``.

    ``command_args`` is how ``memcert certify`` names this backend in the command that
    reproduces a run: ``--serve``, with ``--db`` when a database was given (its password
    hidden, since the command is written to reports).
    """

    def __init__(self, service: ManagedService, *, db_url: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        super().__init__(service.url, token=service.token, timeout_s=timeout_s)
        self.service = service
        self.command_args: tuple[str, ...] = (
            ("--serve",) if db_url is None else ("--serve", "--db", _without_password(db_url)))

    def __repr__(self) -> str:
        return f"ServedFactory({self.url!r})"


@contextmanager
def managed_service(db_url: str | None = None, *, token: str | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> Iterator[ServedFactory]:
    """Serve the reference store on ``db_url`` (None: a SQLite file in a fresh temporary
    folder, removed afterwards) on a free loopback port, and yield its factory; the
    service is stopped on exit. Without the ``serve`` extra, :class:`MissingExtra`."""
    require_serve_extra("serving the reference store")
    folder = None if db_url is not None else Path(tempfile.mkdtemp(prefix="memcert-serve-"))
    try:
        database = str(folder / "store.sqlite3") if folder is not None else str(db_url)
        with ManagedService.start(database, token=token) as service:
            factory = ServedFactory(service, db_url=db_url, timeout_s=timeout_s)
            factory.check()
            yield factory
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _without_password(db_url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@/]*@", r"\1***@", db_url)


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
