"""A temporary file for the parts of a trace no recent entry has touched.

A long run keeps writing to new entities (each chaos round, each nightly scenario has
namespaces of its own), and a checker cannot know that an entity will never be read
again: a backend may serve any value it was ever given, at any later time, and only that
entity's writes say what such a record means. So nothing of an entity can be forgotten;
but an entity nobody has touched for a while can wait on disk. :class:`Spill` keeps each
one as a pickle, appended to an unnamed temporary file, and gives it back, whole, the
moment an entry touches it again. The file goes when the trace does.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Hashable
from typing import Any

__all__ = ["Spill"]


class Spill:
    """Objects parked in a temporary file, by key; each is taken back at most once."""

    def __init__(self) -> None:
        self._file: Any = None
        self._where: dict[Hashable, tuple[int, int]] = {}
        self._end = 0
        self.parked = 0
        """Objects parked so far, for the notes and the benchmarks."""

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def put(self, key: Hashable, obj: object) -> bool:
        """Park ``obj`` under ``key``; False, and nothing written, if it cannot be
        pickled here (a chain of writes deeper than the recursion limit), in which case
        the caller keeps it in memory."""
        try:
            data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        except RecursionError:
            return False
        if self._file is None:
            # Lives as long as the trace; unnamed, the system removes it when closed.
            self._file = tempfile.TemporaryFile(prefix="memcert-trace-")  # noqa: SIM115
        self._file.seek(self._end)
        self._file.write(data)
        self._where[key] = (self._end, len(data))
        self._end += len(data)
        self.parked += 1
        return True

    def take(self, key: Hashable) -> Any:
        """The object parked under ``key``, no longer parked; None if there is none."""
        where = self._where.pop(key, None)
        if where is None:
            return None
        offset, size = where
        self._file.seek(offset)
        return pickle.loads(self._file.read(size))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._where.clear()
