"""Many threads and several processes on the same keys never break an invariant.

Every operation draws its causal_seq from one shared Lamport counter when it starts,
then sleeps a random moment before it reaches the store, so operations arrive out of
causal order. Afterwards the applied operations are replayed through the sequential
model in the order of the versions the store handed out: each decision the store made
must be the one the model makes, and the final state must be the model's.
"""

from __future__ import annotations

import itertools
import multiprocessing
import queue
import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from invariants.backend import Delete, Restore, Write
from reference_store import ReferenceStore
from tests.reference_store.model import EntityModel

ENTITIES = ("u1", "u2", "u3")
ATTRIBUTES = ("city", "job", "drink")


def _op(rng: random.Random, seq: int, tag: str) -> Write | Delete | Restore:
    entity = rng.choice(ENTITIES)
    roll = rng.random()
    if roll < 0.12:
        return Delete("ns", entity, seq, f"{tag}-d")
    if roll < 0.24:
        return Restore("ns", entity, seq, f"{tag}-r")
    return Write("ns", entity, rng.choice(ATTRIBUTES), f"value {tag}", seq, f"{tag}-w")


def hammer(url: str, worker: str, n_ops: int, seed: int, counter: Any) -> list[tuple]:
    """One worker: returns (op, ack, reads) for every operation and read it made."""
    rng = random.Random(seed)
    log: list[tuple] = []
    with ReferenceStore(url) as store:
        for i in range(n_ops):
            with counter.get_lock():
                counter.value += 1
                seq = counter.value
            op = _op(rng, seq, f"{worker}-{i}")
            time.sleep(rng.random() * 0.002)
            call = {Write: store.write, Delete: store.delete, Restore: store.restore}[type(op)]
            ack = call(op)
            reads = store.read("ns", op.entity_id)
            log.append((op, ack, reads))
    return log


def _threads(url: str, n_threads: int, n_ops: int, counter: Any, tag: str) -> list[tuple]:
    logs: list[list[tuple]] = [[] for _ in range(n_threads)]

    def run(k: int) -> None:
        logs[k] = hammer(url, f"{tag}t{k}", n_ops, seed=hash((tag, k)) & 0xFFFF, counter=counter)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [entry for log in logs for entry in log]


def _process_main(url: str, n_threads: int, n_ops: int, counter: Any, tag: str,
                  out: Any) -> None:
    out.put(_threads(url, n_threads, n_ops, counter, tag))


def verify(url: str, log: list[tuple]) -> None:
    with ReferenceStore(url) as store:
        key = store.normalizer.attribute_key
        for op, _ack, reads in log:
            keys = [key(record.attribute) for record in reads]
            assert len(keys) == len(set(keys)), f"conflict in read after {op}: {reads}"
            seqs = [record.causal_seq for record in reads]
            assert seqs == sorted(seqs), f"reorder in read after {op}: {reads}"

        applied: dict[str, list[tuple[int, Any]]] = defaultdict(list)
        for op, ack, _ in log:
            if ack.applied:
                applied[op.entity_id].append((ack.version, op))
        for entity in ENTITIES:
            model = EntityModel()
            for _, op in sorted(applied[entity], key=lambda pair: pair[0]):
                attr = key(op.attribute) if isinstance(op, Write) else None
                refusal = model.apply(op, attr)
                assert refusal is None, f"store applied {op}, which the model refuses: {refusal}"
            final = store.read("ns", entity)
            assert {r.value for r in final} == model.values(), f"final state of {entity}"
        refused = [(op, ack) for op, ack, _ in log if not ack.applied]
        assert refused, "no operation was refused: the test did not exercise the guards"
        assert {ack.reason for _, ack in refused} >= {"stale", "tombstoned"}


@pytest.mark.slow
def test_32_threads_on_the_same_keys(db_url):
    counter = multiprocessing.Value("q", 0)
    with ReferenceStore(db_url):
        pass
    log = _threads(db_url, 32, 40, counter, "x")
    assert len(log) == 32 * 40
    verify(db_url, log)


@pytest.mark.slow
def test_4_processes_with_threads_on_the_same_keys(db_url):
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("q", 0)
    out = ctx.Queue()
    with ReferenceStore(db_url):
        pass
    procs = [ctx.Process(target=_process_main, args=(db_url, 4, 40, counter, f"p{k}", out))
             for k in range(4)]
    for proc in procs:
        proc.start()
    log: list[tuple] = []
    for _ in procs:
        while True:
            try:
                log.extend(out.get(timeout=1))
                break
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                assert not dead, f"a worker process died with exit code {dead[0]}"
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert len(log) == 4 * 4 * 40
    verify(db_url, log)


def test_one_handle_shared_by_16_threads_keeps_every_invariant(db_url: str) -> None:
    seqs, seq_lock = itertools.count(1), threading.Lock()
    logs: list[list[tuple]] = [[] for _ in range(16)]
    errors: list[BaseException] = []

    with ReferenceStore(db_url) as store:
        calls = {Write: store.write, Delete: store.delete, Restore: store.restore}

        def work(k: int) -> None:
            rng = random.Random(k)
            try:
                for i in range(40):
                    with seq_lock:
                        seq = next(seqs)
                    op = _op(rng, seq, f"t{k}-{i}")
                    ack = calls[type(op)](op)
                    assert calls[type(op)](op) == ack, f"a replay of {op} changed its outcome"
                    logs[k].append((op, ack, store.read("ns", op.entity_id)))
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    verify(db_url, [entry for log in logs for entry in log])
