"""Reading a ``[service]`` table, in a scenario or a suite file."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from ._errors import MISSING, ScenarioError
from ._files import reject_unknown
from .service_plan import DEFAULT_START_TIMEOUT_S, Service

__all__ = ["service"]

_FIELDS = ("command", "health_url", "start_timeout_s", "cwd")


def service(path: Path, table: object) -> Service:
    """Check a ``[service]`` table and turn it into a :class:`Service`; a relative ``cwd``
    is taken from the file's folder."""
    if not isinstance(table, dict):
        raise ScenarioError(path, "service", table, "is not a table",
                            "Write how to start your service as a [service] table, e.g. "
                            "command = \"./serve --port {port}\".")
    reject_unknown(path, table, "service.", _FIELDS, "a [service] table")
    command = table.get("command", MISSING)
    if not isinstance(command, str) or not command.strip():
        raise ScenarioError(path, "service.command", command,
                            "is missing" if command is MISSING else "is not a command",
                            'Give the command that starts it, e.g. command = "./serve --port '
                            '{port}"; memcert replaces {port}.')
    try:
        shlex.split(command)
    except ValueError as error:
        raise ScenarioError(path, "service.command", command, f"does not parse ({error})",
                            "Quote it as a shell would.") from None
    health = table.get("health_url", "")
    if not isinstance(health, str) or (health and not health.lower().startswith(
            ("http://", "https://"))):
        raise ScenarioError(path, "service.health_url", health, "is not an http(s) URL",
                            'Give the URL that answers 2xx once it is ready, e.g. health_url = '
                            '"http://127.0.0.1:{port}/healthz".')
    timeout = table.get("start_timeout_s", DEFAULT_START_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
            math.isfinite(timeout) and 0 < timeout <= 600):
        raise ScenarioError(path, "service.start_timeout_s", timeout,
                            "is not a number of seconds in (0, 600]",
                            "Give how long a start may take, e.g. start_timeout_s = 30.")
    cwd = table.get("cwd", "")
    if not isinstance(cwd, str):
        raise ScenarioError(path, "service.cwd", cwd, "is not a folder",
                            'Give the folder to run it in, e.g. cwd = "../my-service".')
    folder = str((path.parent / cwd).resolve()) if cwd else ""
    return Service(command=command, health_url=health, start_timeout_s=float(timeout),
                   cwd=folder)
