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

from invariants.backend import BackendFactory, MemoryBackend
from invariants.errors import FactoryError

__all__ = ["REFERENCE", "http_factory", "load_factory", "probe"]

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
        raise FactoryError(
            f"backend {spec!r}: cannot import {module_name!r} ({error}). Install the package "
            "or run memcert from the folder that contains it."
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


TOKEN_ENV = "MEMCERT_TOKEN"
HTTP_TIMEOUT_ENV = "MEMCERT_HTTP_TIMEOUT"


def http_factory(url: str) -> BackendFactory:
    """The HTTP adapter's factory for ``url``, checked by one read before any run.

    The token comes from ``MEMCERT_TOKEN`` (``--token`` sets it), never from the URL,
    which is written to reports; worker processes inherit it from the environment.
    """
    from invariants.adapters.http import DEFAULT_TIMEOUT_S, HttpFactory

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
