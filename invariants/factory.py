"""Turn ``package.module:callable`` into a working backend factory, or say exactly why not.

A person certifying their own backend will mistype the spec, forget to put their
package on the path, or ship a factory that raises. Each of those gets a
:class:`~invariants.errors.FactoryError` that names the spec and the fix, never a
traceback from deep inside the harness.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import dataclass

from invariants.adapters.http import DEFAULT_TIMEOUT_S, HttpFactory
from invariants.backend import BackendFactory, MemoryBackend
from invariants.errors import FactoryError, InvalidArgument

__all__ = [
    "REFERENCE",
    "ResolvedBackend",
    "http_factory",
    "load_factory",
    "probe",
    "resolve_backend",
]

REFERENCE = "reference_store:factory"

_REQUIRED = ("write", "delete", "restore", "read", "reset", "close")


def load_factory(spec: str) -> BackendFactory:
    """Import the callable a spec names; the working directory is importable, as in pytest.

    A spec that is an ``http://`` or ``https://`` URL names a service speaking memcert's
    HTTP protocol instead, reached through :mod:`invariants.adapters.http`.
    """
    if spec.lower().startswith(("http://", "https://")):
        return http_factory(spec)
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise FactoryError(
            f"backend {spec!r} is not of the form package.module:callable; "
            f"for example {REFERENCE}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        if _names_the_module(error, module_name):
            raise FactoryError(
                f"backend {spec!r}: cannot import {module_name!r} ({error}). Install the "
                "package or run memcert from the folder that contains it."
            ) from error
        raise FactoryError(
            f"backend {spec!r}: importing {module_name!r} failed{_where(error)}: "
            f"{type(error).__name__}: {error}"
        ) from error
    except Exception as error:
        raise FactoryError(
            f"backend {spec!r}: importing {module_name!r} raised "
            f"{type(error).__name__}: {error}"
        ) from error
    target = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            names = sorted(n for n in dir(module) if not n.startswith("_"))
            raise FactoryError(
                f"backend {spec!r}: module {module_name!r} has no attribute {attr!r}; "
                f"it has {', '.join(names[:12]) or 'no public names'}"
            ) from None
    if not callable(target):
        raise FactoryError(f"backend {spec!r} names a {type(target).__name__}, not a callable")
    return target


def _names_the_module(error: ImportError, module_name: str) -> bool:
    """Whether the module a spec names (or a package above it) is what was not found, as
    against an import inside that module failing, e.g. on a dependency not installed."""
    if not isinstance(error, ModuleNotFoundError) or error.name is None:
        return False
    return module_name == error.name or module_name.startswith(f"{error.name}.")


def _where(error: BaseException) -> str:
    """`` in FILE, line N``: the last line of the user's code that the import went
    through, not importlib's frames; "" when there is none (``--debug`` shows all)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if not frame.filename.startswith("<frozen ")
              and os.path.dirname(frame.filename) != os.path.dirname(importlib.__file__)]
    if not frames:
        return ""
    return f" in {frames[-1].filename}, line {frames[-1].lineno}"


@dataclass(frozen=True)
class ResolvedBackend:
    """A backend as every part of the harness names it, resolved once.

    ``factory`` makes the handles. ``name`` is what reports show (the ``backend`` field
    of ``results.json``) and what worker processes load. ``spec`` imports the same
    backend back, for the programs the stateful phase prints; it is None when nothing
    can (a closure, a lambda), and those programs then ask for the factory instead.
    """

    factory: BackendFactory
    name: str
    spec: str | None


def resolve_backend(backend: BackendFactory | str | ResolvedBackend | None) -> ResolvedBackend:
    """The one place a backend argument becomes a factory, a name and a spec.

    ``None`` is the reference store (:data:`REFERENCE`); a string is a
    ``package.module:callable`` or ``http://`` spec, loaded by :func:`load_factory`
    (so a bad one is a :class:`FactoryError`); a resolved backend is passed through, so
    a caller that resolved it once hands it down without importing anything twice.
    """
    if isinstance(backend, ResolvedBackend):
        return backend
    if backend is None or isinstance(backend, str):
        spec = backend or REFERENCE
        return ResolvedBackend(load_factory(spec), spec, spec)
    if not callable(backend):
        raise InvalidArgument(
            f"backend={backend!r} (type {type(backend).__name__}) is not a backend factory; "
            "pass a zero-argument callable or its 'package.module:callable' name"
        )
    if isinstance(backend, HttpFactory):
        return ResolvedBackend(backend, backend.url, backend.url)
    module = getattr(backend, "__module__", None)
    qualname = getattr(backend, "__qualname__", None)
    if not module or not qualname:
        return ResolvedBackend(backend, repr(backend), None)
    name = f"{module}:{qualname}"
    importable = _imports_back(backend, module, qualname)
    return ResolvedBackend(backend, name, name if importable else None)


def _imports_back(backend: BackendFactory, module: str, qualname: str) -> bool:
    """Whether importing ``module`` and walking ``qualname`` finds ``backend`` itself."""
    try:
        target: object = importlib.import_module(module)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError):
        return False
    return target is backend


TOKEN_ENV = "MEMCERT_TOKEN"
HTTP_TIMEOUT_ENV = "MEMCERT_HTTP_TIMEOUT"


def http_factory(url: str) -> BackendFactory:
    """The HTTP adapter's factory for ``url``, checked by one read before any run.

    The token comes from ``MEMCERT_TOKEN`` (``--token`` sets it), never from the URL,
    which is written to reports; worker processes inherit it from the environment.
    """
    timeout = os.environ.get(HTTP_TIMEOUT_ENV, "").strip()
    try:
        timeout_s = float(timeout) if timeout else DEFAULT_TIMEOUT_S
    except ValueError:
        raise FactoryError(f"{HTTP_TIMEOUT_ENV}={timeout!r} is not a number of seconds") from None
    factory = HttpFactory(url, token=os.environ.get(TOKEN_ENV) or None, timeout_s=timeout_s)
    factory.check()
    return factory


def probe(factory: BackendFactory, spec: str) -> MemoryBackend:
    """Call the factory once and check the handle has the contract's methods."""
    try:
        backend = factory()
    except Exception as error:
        raise FactoryError(
            f"backend {spec!r}: calling the factory raised {type(error).__name__}: {error}"
        ) from error
    missing = [name for name in _REQUIRED if not callable(getattr(backend, name, None))]
    if missing:
        raise FactoryError(
            f"backend {spec!r} returned a {type(backend).__name__}, which lacks "
            f"{', '.join(missing)}; implement invariants.backend.MemoryBackend"
        )
    return backend
