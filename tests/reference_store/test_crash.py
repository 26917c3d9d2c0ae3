"""SIGKILL a writer at random moments: no acknowledged write is ever lost.

After every kill the store is reopened and read whole. It must equal the model of the
acknowledged operations, with the one operation that was in flight at the kill either
applied or not. The observed state then becomes the model, settling that ambiguity
before the next run.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from invariants.backend import Delete, Restore, Write
from reference_store import ReferenceStore
from reference_store.schema import entities
from tests.reference_store.model import EntityModel

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
KILLS = 20


def _op(fields: dict) -> Write | Delete | Restore:
    kind = fields.pop("kind")
    return {"Write": Write, "Delete": Delete, "Restore": Restore}[kind](**fields)


def _state(models: dict[str, EntityModel]) -> dict[str, set[str]]:
    return {entity: model.values() for entity, model in models.items()}


def _copy(models: dict[str, EntityModel]) -> dict[str, EntityModel]:
    return {entity: EntityModel(dict(m.records), m.deleted, m.delete_seq, m.restore_seq)
            for entity, m in models.items()}


def _observed(store: ReferenceStore) -> dict[str, tuple[set[str], bool]]:
    with store.engine.connect() as conn:
        deleted = dict(conn.execute(select(entities.c.entity_id, entities.c.deleted)
                                    .where(entities.c.namespace == "crash")).all())
    return {entity: ({r.value for r in store.read("crash", entity)}, bool(deleted.get(entity)))
            for entity in ("a", "b")}


def _expected(models: dict[str, EntityModel]) -> dict[str, tuple[set[str], bool]]:
    return {entity: (model.values(), model.deleted) for entity, model in models.items()}


@pytest.mark.slow
def test_sigkill_never_loses_an_acknowledged_write(db_url):
    rng = random.Random(20261129)
    models = {"a": EntityModel(), "b": EntityModel()}
    with ReferenceStore(db_url) as store:
        attr = store.normalizer.attribute_key
    seq, acked, in_flight_applied = 0, 0, 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), db_url, str(seq), str(rng.randrange(2**32))],
            stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        assert json.loads(child.stdout.readline()) == {"ready": True}
        time.sleep(rng.uniform(0.05, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        pending: Write | Delete | Restore | None = None
        for line in child.stdout.read().splitlines():
            if not line.endswith("}"):
                break
            message = json.loads(line)
            if "invoke" in message:
                pending = _op(message["invoke"])
                seq = pending.causal_seq
                continue
            assert pending is not None and message["ack"] == pending.causal_seq
            model = models[pending.entity_id]
            key = attr(pending.attribute) if isinstance(pending, Write) else None
            assert (model.apply(pending, key) is None) == message["applied"], pending
            acked += 1
            pending = None
        child.stdout.close()

        with ReferenceStore(db_url) as store:
            observed = _observed(store)
        if observed != _expected(models):
            assert pending is not None, "state differs although nothing was in flight"
            candidate = _copy(models)
            key = attr(pending.attribute) if isinstance(pending, Write) else None
            candidate[pending.entity_id].apply(pending, key)
            assert observed == _expected(candidate), (
                f"lost or invented data: observed {observed}, acknowledged model "
                f"{_expected(models)}, with the in-flight {pending} {_expected(candidate)}")
            models = candidate
            in_flight_applied += 1
    assert acked >= KILLS * 5, f"only {acked} operations were acknowledged in {KILLS} runs"
