"""Finding and reading scenario and suite files, and checking their common fields."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any

from invariants.errors import InvalidArgument

from ._errors import MISSING, ScenarioError, did_you_mean, shown

__all__ = ["NAME", "find", "names_in", "read_table", "reject_unknown", "require_str"]

NAME = re.compile(r"[a-z][a-z0-9_]*")


def names_in(directory: Path) -> list[str]:
    """The names of the TOML files in ``directory``, sorted."""
    return sorted(path.stem for path in directory.glob("*.toml") if NAME.fullmatch(path.stem))


def find(name_or_path: object, directory: Path, kind: str) -> Path:
    """The file a name (looked up in ``directory``) or a path stands for.

    A string with a path separator or a ``.toml`` suffix is a path; any other string is
    a name.
    """
    if isinstance(name_or_path, os.PathLike):
        path = Path(name_or_path)
    elif isinstance(name_or_path, str):
        if name_or_path.endswith(".toml") or "/" in name_or_path or os.sep in name_or_path:
            path = Path(name_or_path)
        else:
            path = directory / f"{name_or_path}.toml"
            if not path.is_file():
                known = names_in(directory)
                raise ScenarioError(
                    None, kind, name_or_path, f"is not a known {kind}",
                    f"{did_you_mean(name_or_path, known)}Known {kind}s: "
                    f"{', '.join(known)}; or give the path of a .toml file.",
                )
    else:
        raise InvalidArgument(
            f"{kind}={shown(name_or_path)} is neither a name nor a path. Pass a {kind} "
            "name such as 'mixed', or the path of a .toml file."
        )
    if not path.is_file():
        raise ScenarioError(
            path, "", MISSING, "there is no such file",
            f"Give the path of an existing .toml file, or a {kind} name.",
        )
    if not NAME.fullmatch(path.stem):
        raise ScenarioError(
            path, "name", path.stem, f"is not a {kind} name",
            f"A {kind} is named by its file: rename the file with lowercase letters, "
            "digits and underscores, starting with a letter (e.g. my_scenario.toml).",
        )
    return path


def read_table(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(
            path, "", MISSING, f"the file cannot be read ({exc})", "Give a UTF-8 TOML file."
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(
            path, "", MISSING, f"the file is not valid TOML ({exc})",
            "Fix the syntax; docs/scenarios.md shows a complete example.",
        ) from exc


def reject_unknown(path: Path, table: dict[str, Any], where: str, fields: tuple[str, ...],
                   what: str) -> None:
    """Refuse any key of ``table`` outside ``fields``, suggesting the closest field."""
    for key, value in table.items():
        if key not in fields:
            raise ScenarioError(
                path, f"{where}{key}", value, f"is not a field of {what}",
                f"{did_you_mean(key, fields)}{what.capitalize()} has the fields "
                f"{', '.join(fields)}.",
            )


def require_str(path: Path, table: dict[str, Any], field: str, example: str) -> str:
    value = table.get(field, MISSING)
    if value is MISSING:
        raise ScenarioError(path, field, MISSING, "is missing", f"Add it, e.g. {example}.")
    if not isinstance(value, str) or not value.strip():
        raise ScenarioError(
            path, field, value, "is not a non-empty string", f"Give a string, e.g. {example}."
        )
    return value
