"""Phantom: every value a read returns was produced by a write. A violation is a
*phantom*."""

from __future__ import annotations

from invariants.verdict import Key, PhantomExplanation, Violation

from ._base import Checker
from ._trace import PHANTOM, ReadView

__all__ = ["Phantom"]


class Phantom(Checker):
    """Flags each record of an ok read whose value traces to no write that could have
    produced it: none to the read's entity in its namespace that was invoked before
    the read completed and did not fail, and none in another namespace either (that
    would be a leak).

    Unit of ``checked``: a record returned by an ok read.
    """

    name = "phantom"
    kind = "phantom"
    numerator_name = "phantom records"
    denominator_name = "records read"

    def _on_read(self, view: ReadView) -> None:
        self.checked += len(view.records)
        for t in view.strays:
            if t.origin == PHANTOM:
                witnesses: tuple[int, ...] = (view.invoke,)
                if t.others:
                    witnesses = tuple(sorted((t.others[0].index, view.invoke)))
                self._add(
                    Violation(
                        kind="phantom",
                        key=Key(view.namespace, view.entity_id),
                        witnesses=witnesses,
                        explanation=PhantomExplanation(
                            read=view.ref(),
                            record=t.served(),
                            candidates=tuple(w.ref() for w in t.others),
                        ),
                    )
                )

    def _coverage(self) -> dict[str, int]:
        return {"ok_reads": self._trace.ok_reads, "records_checked": self.checked}

    def _nothing_checked(self) -> str:
        return "no read returned a record"
