"""The guard's running parts: it never blocks the caller, never changes an answer,
exports what it found and how much it checked, logs each violation, and refuses bad
options before anything starts."""

from __future__ import annotations

import logging
import threading
import time
import zlib
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from chaos.examples import SharedFactory, known_bad
from chaos.examples.memory import InMemoryBackend
from invariants import metric_defs
from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.errors import InvalidArgument
from invariants.guarding import SHARED_CHECKERS, Guard, GuardedBackend, guard

LABELS = {"backend": "orders", "scenario": "checkout", "source": "guard"}


class SlowReads(InMemoryBackend):
    """A correct backend whose reads take ``read_s``: a store under load."""

    read_s = 0.2

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        time.sleep(self.read_s)
        return super().read(namespace, entity_id)


class Calls(InMemoryBackend):
    """A correct backend that remembers which methods were called on this handle."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.calls: list[str] = []

    def write(self, op: Write) -> Ack:
        self.calls.append("write")
        return super().write(op)

    def delete(self, op: Delete) -> Ack:
        self.calls.append("delete")
        return super().delete(op)

    def restore(self, op: Restore) -> Ack:
        self.calls.append("restore")
        return super().restore(op)

    def read(self, namespace: str, entity_id: str) -> list[Record]:
        self.calls.append("read")
        return super().read(namespace, entity_id)


def stale_pair(handle: GuardedBackend) -> None:
    """A write, then a late one with a lower causal_seq that a bad backend applies; each
    verified before the next, so the stale fact is read once."""
    handle.write(Write("t", "u", "city", "lives in Paris", 5, "a"))
    handle.guard.flush()
    handle.write(Write("t", "u", "city", "lives in Rome", 3, "b"))
    handle.guard.flush()


def test_the_queue_drops_and_never_blocks_when_the_backend_is_slow() -> None:
    factory = SharedFactory(SlowReads)
    registry = CollectorRegistry()
    g = Guard(factory(), sample=1.0, assertion=False, queue_size=20, registry=registry,
              backend_name="orders", scenario="checkout")
    handle = g.wrap(factory())
    handle.write(Write("t", "warm", "city", "lives in Paris", 1, "warm"))
    slowest = 0.0
    started = time.perf_counter()
    for i in range(400):
        t0 = time.perf_counter()
        handle.write(Write("t", f"u{i % 40}", "city", f"lives in town {i}", i + 2, f"w{i}"))
        slowest = max(slowest, time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    # 400 verification reads at read_s each: the caller never waits for one
    assert slowest < SlowReads.read_s
    assert elapsed < 40 * SlowReads.read_s
    dropped = g.dropped()
    assert dropped["queue_full"] > 0
    assert set(dropped) <= {"queue_full", "incomplete"}
    assert registry.get_sample_value("memcert_guard_dropped_operations_total", {
        "backend": "orders", "scenario": "checkout", "reason": "queue_full"}) == dropped[
        "queue_full"]
    depth = registry.get_sample_value("memcert_guard_queue_depth",
                                      {"backend": "orders", "scenario": "checkout"})
    assert depth is not None and depth > 0
    g.close(timeout=30)
    assert sum(g.counts().values()) == 0  # a gap in what it saw accuses nobody


def test_the_counters_are_the_chaos_runs_with_source_guard_and_the_guards_own() -> None:
    factory = SharedFactory(known_bad.LastArrivalWins)
    registry = CollectorRegistry()
    g = Guard(factory(), sample=1.0, assertion=False, registry=registry,
              backend_name="orders", scenario="checkout")
    stale_pair(g.wrap(factory()))
    assert g.flush()
    value = registry.get_sample_value
    assert value("memcert_reorders_total", LABELS) == 1
    assert value("memcert_conflicts_total", LABELS) == 0
    assert value("memcert_violations_total", {
        **LABELS, "invariant": "causal_monotonicity", "cause": "stale_overwrite"}) == 1
    assert value("memcert_violations_total", {
        **LABELS, "invariant": "causal_monotonicity", "cause": "read_order"}) == 0
    assert value("memcert_failed_checks_total", {**LABELS, "invariant": "causal_monotonicity"}
                 ) == 1
    assert value("memcert_checks_total", {**LABELS, "invariant": "causal_monotonicity"}) >= 1
    assert value("memcert_phantoms_total", LABELS) is None  # never checked, never exported
    own = {"backend": "orders", "scenario": "checkout"}
    assert value("memcert_guard_sampled_operations_total", {**own, "op": "write"}) == 2
    assert value("memcert_guard_sampled_operations_total", {**own, "op": "read"}) is None
    assert value("memcert_guard_verifications_total", {**own, "trigger": "ack"}) == 2
    assert value("memcert_guard_queue_depth", own) == 0
    g.close()
    assert value("memcert_reorders_total", LABELS) is None  # a closed guard leaves


def test_each_violation_is_one_structured_log_event(caplog: pytest.LogCaptureFixture) -> None:
    factory = SharedFactory(known_bad.LastArrivalWins)
    with caplog.at_level(logging.WARNING, logger="memcert.guard"), Guard(
            factory(), sample=1.0, assertion=False) as g:
        stale_pair(g.wrap(factory()))
        g.flush()
    [event] = caplog.records
    assert event.getMessage().splitlines()[0] == (
        "memcert guard: reorder (causal_monotonicity, cause stale_overwrite) in t/u")
    fields = event.__dict__
    assert (fields["memcert_source"], fields["memcert_invariant"], fields["memcert_cause"]
            ) == ("guard", "causal_monotonicity", "stale_overwrite")
    assert fields["memcert_fix"].startswith("compare causal_seq first")
    assert [(op["name"], op["value"], op["causal_seq"]) for op in fields[
        "memcert_operations"]] == [("W2", "lives in Paris", 5), ("W1", "lives in Rome", 3)]
    assert [r["value"] for r in fields["memcert_read"]["records"]] == ["lives in Rome"]
    assert fields["memcert_violation"]["cause"] == "stale_overwrite"


def test_answers_are_the_backends_and_the_guard_only_reads() -> None:
    plain, guarded = Calls(), Calls()
    reader = Calls(store=guarded.store)
    ops = [Write("t", "u", "city", "lives in Paris", 2, "a"),
           Write("t", "u", "City", "lives in Rome", 1, "b"),
           Delete("t", "u", 3, "d"), Write("t", "u", "city", "x", 4, "c"),
           Restore("t", "u", 5, "r"), Restore("t", "u", 6, "r2")]
    with Guard(reader, sample=1.0, assertion=False) as g:
        handle = g.wrap(guarded)
        for op in ops:
            sent = {Write: "write", Delete: "delete", Restore: "restore"}[type(op)]
            assert getattr(handle, sent)(op) == getattr(plain, sent)(op)
            assert handle.read("t", "u") == plain.read("t", "u")
        g.flush()
    assert guarded.calls == plain.calls  # forwarded once each, nothing retried
    assert set(reader.calls) == {"read"}  # verification never writes
    assert len(reader.calls) >= len(ops)


def test_sampling_is_per_entity_and_stable_across_guards() -> None:
    factory = SharedFactory(InMemoryBackend)
    with Guard(factory(), sample=0.3) as a, Guard(factory(), sample=0.3) as b:
        ids = [f"user-{i}" for i in range(1000)]
        picked = [e for e in ids if a.sampled(e)]
        assert picked == [e for e in ids if b.sampled(e)]
        assert picked == [e for e in ids if zlib.crc32(e.encode()) < int(0.3 * 2**32)]
        assert 250 < len(picked) < 350
        handle = a.wrap(factory())
        skipped = next(e for e in ids if not a.sampled(e))
        handle.write(Write("t", skipped, "city", "lives in Paris", 1, "s"))
        handle.write(Write("t", picked[0], "city", "lives in Paris", 2, "p"))
        handle.read("t", picked[0])
        a.flush()
        assert a._judge.counts()[3] == {"write": 1, "read": 1}


def test_the_handle_made_by_guard_closes_its_guard() -> None:
    factory = SharedFactory(known_bad.LastArrivalWins)
    before = threading.active_count()
    with guard(factory(), sample=1.0, assertion=False) as handle:
        assert threading.active_count() == before + 1
        stale_pair(handle)
    assert threading.active_count() == before
    assert handle.guard.counts()["causal_monotonicity"] == 1  # checked before it closed
    handle.write(Write("t", "u", "city", "lives in Oslo", 1, "late"))  # forwarded, unchecked


def test_with_writers_it_does_not_watch_it_runs_no_durability_check() -> None:
    factory = SharedFactory(known_bad.DropsWrites)
    with Guard(factory(), sample=1.0, assertion=False, exclusive=False) as g:
        handle = g.wrap(factory())
        for i in range(30):
            handle.write(Write("t", "u", "city", f"lives in town {i}", i + 1, f"w{i}"))
        g.flush()
        assert tuple(g.counts()) == SHARED_CHECKERS
        assert "durability" not in g.counts()


def test_a_reset_starts_a_fresh_history() -> None:
    factory = SharedFactory(InMemoryBackend)
    with Guard(factory(), sample=1.0) as g:
        handle = g.wrap(factory())
        handle.write(Write("t", "u", "city", "lives in Paris", 1, "a"))
        handle.reset()
        assert handle.read("t", "u") == []  # no lost write: the store was emptied
        handle.write(Write("t", "u", "city", "lives in Rome", 1, "a2"))
        assert [r.value for r in handle.read("t", "u")] == ["lives in Rome"]
        assert sum(g.counts().values()) == 0


@pytest.mark.parametrize(("option", "value", "named"), [
    ("sample", 1.5, "sample=1.5"),
    ("sample", True, "sample=True"),
    ("queue_size", 0, "queue_size=0"),
    ("recheck_s", -1, "recheck_s=-1"),
    ("scenario", "", "scenario=''"),
    ("on_violation", "print", "on_violation='print'"),
    ("assertion", "yes", "assertion='yes'"),
    ("level", "phonetic", "level='phonetic'"),
])
def test_a_bad_option_is_named_and_nothing_starts(option: str, value: object,
                                                  named: str) -> None:
    registry = CollectorRegistry()
    before = threading.active_count()
    with pytest.raises(InvalidArgument, match=named.replace("(", r"\(")):
        Guard(InMemoryBackend(), registry=registry, **{option: value})  # type: ignore[arg-type]
    assert threading.active_count() == before
    assert list(registry.collect()) == []


def test_a_reader_that_is_no_backend_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="reader=42"):
        Guard(42)  # type: ignore[arg-type]


def test_every_metric_the_guard_exports_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "guard.md").read_text(
        encoding="utf-8")
    guard_only = (metric_defs.GUARD_SAMPLED, metric_defs.GUARD_CHECKS,
                  metric_defs.GUARD_DROPS, metric_defs.GUARD_QUEUE_DEPTH)
    shared = (*metric_defs.VIOLATION_METRICS.values(), metric_defs.CHECKS,
              metric_defs.FAILED_CHECKS, metric_defs.VIOLATIONS_BY_CAUSE)
    assert [m.samples[0] for m in (*guard_only, *shared)
            if f"`{m.samples[0]}`" not in text] == []
