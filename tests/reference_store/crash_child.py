"""A writer that a test kills with SIGKILL at random moments.

Before each operation it prints the operation, and after the store acknowledges it, the
acknowledgement, one JSON line each, flushed at once: whatever the parent has read is
exactly what was invoked and what was acknowledged before the kill.
"""

from __future__ import annotations

import json
import random
import sys

from invariants.backend import Delete, Restore, Write
from reference_store import ReferenceStore


def main(url: str, first_seq: int, seed: int) -> None:
    rng = random.Random(seed)
    with ReferenceStore(url) as store:
        print(json.dumps({"ready": True}), flush=True)
        seq = first_seq
        while True:
            seq += 1
            entity = rng.choice(["a", "b"])
            roll = rng.random()
            if roll < 0.08:
                op: Write | Delete | Restore = Delete("crash", entity, seq, f"op{seq}")
            elif roll < 0.16:
                op = Restore("crash", entity, seq, f"op{seq}")
            else:
                op = Write("crash", entity, rng.choice(["k1", "k2", "k3"]), f"v{seq}", seq,
                           f"op{seq}")
            print(json.dumps({"invoke": _fields(op)}), flush=True)
            call = {Write: store.write, Delete: store.delete, Restore: store.restore}[type(op)]
            ack = call(op)
            print(json.dumps({"ack": seq, "applied": ack.applied}), flush=True)


def _fields(op: Write | Delete | Restore) -> dict[str, object]:
    return {"kind": type(op).__name__,
            **{name: getattr(op, name) for name in op.__dataclass_fields__}}


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
