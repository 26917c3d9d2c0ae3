"""A served reference store per test module, on a SQLite file of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("served")
    with Served.start(str(folder / "store.sqlite3")) as running:
        yield running
