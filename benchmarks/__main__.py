"""Run every benchmark and print their tables (``make bench``)."""

from __future__ import annotations

from . import store_write


def main() -> None:
    store_write.run()


if __name__ == "__main__":
    main()
