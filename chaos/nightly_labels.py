"""A night's labels: what was tested, so that a red night can be traced to a version.

A label is ``KEY=VALUE``: ``backend_version=1.4.2``, ``commit=abc123``, ``image=reg/x:7``.
They come from ``--label`` (repeatable), from ``MEMCERT_LABELS`` (the same pairs joined
by commas: ``backend_version=1.4.2,commit=abc123``), and from the versions memcert finds
itself: its own (``memcert_version``) and, where the factory's top-level package belongs
to an installed distribution, that distribution's name and version
(``backend_package``, ``backend_package_version``). A ``--label`` replaces the same key
from ``MEMCERT_LABELS``, and either replaces a version found.

Labels are also labels of the pushed metrics (``label_KEY`` on ``memcert_run_info``), so
they follow Prometheus' rules and stay small: a key is a letter or ``_`` then letters,
digits or ``_`` (at most :data:`KEY_MAX` characters, not starting with ``__``); a value
is 1 to :data:`VALUE_MAX` printable characters; a night has at most
:data:`LABELS_MAX` labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from importlib import metadata

from invariants.errors import InvalidArgument

__all__ = ["KEY_MAX", "LABELS_MAX", "VALUE_MAX", "automatic_labels", "check_labels",
           "night_labels", "parse_label", "parse_labels_env"]

KEY_MAX = 48
VALUE_MAX = 128
LABELS_MAX = 16
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRINTABLE = re.compile(r"^[^\x00-\x1f\x7f]+$")


def parse_label(text: str, *, source: str = "--label") -> tuple[str, str]:
    """``KEY=VALUE`` as a pair; anything else is an :class:`InvalidArgument` naming
    ``source`` (the flag or the variable it came from)."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if not sep:
        raise InvalidArgument(f"{source} {text!r} is not KEY=VALUE; e.g. "
                              f"{source} backend_version=1.4.2")
    check_labels({key: value}, source=source)
    return key, value


def parse_labels_env(text: str, *, source: str = "MEMCERT_LABELS") -> dict[str, str]:
    """``MEMCERT_LABELS``: ``KEY=VALUE`` pairs joined by commas, blanks around each
    ignored; an empty variable holds no label."""
    return dict(parse_label(item, source=source) for item in text.split(",") if item.strip())


def check_labels(labels: Mapping[str, str], *, source: str = "labels") -> dict[str, str]:
    """``labels`` as a dict, each key and value checked against the rules above."""
    if len(labels) > LABELS_MAX:
        raise InvalidArgument(f"{source} gives {len(labels)} labels; a night takes at most "
                              f"{LABELS_MAX}, since each is a label of the pushed metrics")
    for key, value in labels.items():
        if not isinstance(key, str) or not _KEY.match(key) or key.startswith("__"):
            raise InvalidArgument(f"{source} key {key!r} is not a label name: use a letter "
                                  "or _ then letters, digits or _ (not starting with __)")
        if len(key) > KEY_MAX:
            raise InvalidArgument(f"{source} key {key!r} is {len(key)} characters; at most "
                                  f"{KEY_MAX}")
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"{source} {key}= has no value; give KEY=VALUE, e.g. "
                                  f"{key}=1.4.2")
        if len(value) > VALUE_MAX or not _PRINTABLE.match(value):
            raise InvalidArgument(f"{source} {key}={value[:40]!r} must be 1 to {VALUE_MAX} "
                                  "printable characters")
    return dict(labels)


def automatic_labels(factory: object) -> dict[str, str]:
    """memcert's version, and the version of the distribution that provides the factory's
    top-level package, when it has one (a ``package.module:callable`` spec, or a
    callable's module; a URL or a package that is no installed distribution has none)."""
    labels = {"memcert_version": _version("memcert") or "unknown"}
    top = _top_package(factory)
    for distribution in metadata.packages_distributions().get(top, []) if top else []:
        version = _version(distribution)
        if version:
            labels["backend_package"] = distribution
            labels["backend_package_version"] = version
            break
    return labels


def night_labels(factory: object, given: Iterable[tuple[str, str]] = (), *,
                 env: str = "") -> dict[str, str]:
    """The night's labels: the versions found, then ``MEMCERT_LABELS`` (``env``), then the
    ``--label`` pairs (``given``), each replacing the same key before it."""
    labels = automatic_labels(factory)
    labels.update(parse_labels_env(env))
    labels.update(given)
    return check_labels(labels)


def _top_package(factory: object) -> str:
    if factory is None:
        return "reference_store"
    if isinstance(factory, str):
        if "://" in factory:
            return ""
        return factory.split(":", 1)[0].split(".", 1)[0]
    module = getattr(factory, "__module__", None) or ""
    return module.split(".", 1)[0]


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""
