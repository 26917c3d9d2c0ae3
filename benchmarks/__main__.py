"""Run every benchmark and print their tables (``make bench``)."""

from __future__ import annotations

from . import store_write


def main() -> None:
    for synchronous in ("NORMAL", "FULL"):
        store_write.run(n=2000 if synchronous == "FULL" else 4000, synchronous=synchronous)


if __name__ == "__main__":
    main()
