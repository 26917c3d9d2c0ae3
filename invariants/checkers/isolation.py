"""Isolation: nothing written in one namespace is visible from another. A violation is a
*leak*."""

from __future__ import annotations

from invariants.verdict import Key, LeakExplanation, Violation

from ._base import Checker
from ._trace import Trace
from ._view import LEAK, ReadView

__all__ = ["Isolation"]


class Isolation(Checker):
    """Flags each record of an ok read in namespace N whose value was written (by a
    write that did not fail) only in other namespaces, and never to the read's entity
    in N.

    Unit of ``checked``: a record returned by an ok read while some namespace other
    than the read's own held writes; in a run with one namespace nothing can leak, and
    the verdict is UNKNOWN.
    """

    name = "isolation"
    kind = "leak"
    numerator_name = "leaked records"
    denominator_name = "records read while another namespace held writes"

    def __init__(self, *, trace: Trace | None = None, keep: int = 20) -> None:
        super().__init__(trace=trace, keep=keep)
        self._namespaced_reads = 0

    def _on_read(self, view: ReadView) -> None:
        if view.foreign:
            self._namespaced_reads += 1
            self.checked += len(view.records)
        for t in view.strays:
            if t.origin == LEAK:
                self._add(
                    Violation(
                        kind="leak",
                        key=Key(view.namespace, view.entity_id),
                        witnesses=tuple(sorted((t.others[0].index, view.invoke))),
                        explanation=LeakExplanation(
                            read=view.ref(),
                            record=t.served(),
                            writes=tuple(w.ref(view.t0) for w in t.others),
                        ),
                    )
                )

    def _coverage(self) -> dict[str, int]:
        return {
            "reads_with_other_namespaces": self._namespaced_reads,
            "records_checked": self.checked,
        }

    def _nothing_checked(self) -> str:
        return "no record was read while a second namespace held writes"
