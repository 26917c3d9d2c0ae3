"""Streaming checks: one pass, nothing held, the same verdict however the entries come.

The checkers consume a history once, in order, and keep only their index of it, so a file
of any length is checked without being held (docs/invariants.md, "What the checkers
keep"). These tests pin that down on histories where every checker has something to
find: a correct store's runs with unknown outcomes, whose reads are then broken in the
ways the checkers exist to catch.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invariants.backend import Record
from invariants.checkers import CheckerSuite, Trace, check_history
from invariants.errors import InvalidArgument
from invariants.history import READ_CHUNK_BYTES, Entry, History, HistoryStream, read_history

from .histbuild import HistoryBuilder
from .test_check_properties import run


def _broken(seed: int, steps: int, workers: int, namespaces: int) -> History:
    """A correct store's run with about one read in five broken: a record dropped,
    doubled, given another write's value or a value nobody wrote, or the records
    reversed."""
    history = run(seed, steps=steps, workers=workers, namespaces=namespaces, faults=True)
    rnd = random.Random(seed)
    values = [e.op.value for e in history if e.f == "write" and e.type == "invoke"]
    entries: list[Entry] = []
    for e in history:
        if e.f == "read" and e.type == "ok" and rnd.random() < 0.2:
            records = list(e.result)  # type: ignore[arg-type]
            how = rnd.randrange(5)
            if how == 0 and records:
                records.pop(rnd.randrange(len(records)))
            elif how == 1 and records:
                records.append(records[0])
            elif how == 2 and records and values:
                at = rnd.randrange(len(records))
                records[at] = replace(records[at], value=rnd.choice(values))
            elif how == 3:
                records.append(Record(e.op.entity_id, "drink", "never written", 10**6, 1))
            else:
                records.reverse()
            e = replace(e, result=tuple(records))
        entries.append(e)
    return History(entries)


def _one_at_a_time(history: History) -> dict[str, object]:
    suite = CheckerSuite()
    for entry in history:
        suite.observe(entry)
    return dict(suite.results())


def _generated(history: History) -> Iterator[Entry]:
    yield from history


histories = st.builds(
    _broken,
    seed=st.integers(0, 2**32),
    steps=st.integers(20, 200),
    workers=st.integers(1, 4),
    namespaces=st.integers(1, 3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories)
def test_entries_fed_one_at_a_time_or_as_one_iterable_give_identical_results(history):
    whole = check_history(history)
    assert _one_at_a_time(history) == whole
    # A bare generator: consumed once, nothing to index into.
    assert check_history(_generated(history)) == whole


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories)
def test_the_trace_yields_the_same_reads_whether_fed_or_observed(history):
    fed = [view.done for view in Trace().feed(history)]
    trace = Trace()
    observed = [view.done for e in history if (view := trace.observe(e)) is not None]
    assert fed == observed
    assert fed == [e.index for e in history if e.f == "read" and e.type == "ok"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(history=histories, compress=st.booleans())
def test_a_file_streamed_gives_what_it_gives_read_whole(tmp_path_factory, history, compress):
    path = tmp_path_factory.mktemp("h") / ("history.jsonl" + (".zst" if compress else ""))
    history.write_jsonl(path)
    assert check_history(HistoryStream(path)) == check_history(read_history(path))


def test_a_streamed_check_keeps_no_entry_of_the_history(tmp_path: Path):
    history = _broken(7, steps=40000, workers=4, namespaces=2)
    path = tmp_path / "history.jsonl"
    history.write_jsonl(path)
    total = len(history)
    per_chunk = total * READ_CHUNK_BYTES // path.stat().st_size + 1
    assert per_chunk < total // 4  # the file spans several chunks
    deletes_and_restores = sum(1 for e in history if e.f in ("delete", "restore"))
    del history
    alive: list[int] = []
    seen = 0

    def count(entry: Entry) -> None:
        nonlocal seen
        seen += 1
        if seen == total:  # the last entry: what the check holds now is all it keeps
            alive.append(sum(1 for o in gc.get_objects() if type(o) is Entry))

    results = check_history(HistoryStream(path), also=(count,))
    assert any(r.violation_count for r in results.values())
    # Deletes and restores keep their two entries; a read or a write keeps none once it
    # has completed. Beyond those: the chunk being decoded.
    assert alive and alive[0] <= deletes_and_restores + per_chunk, (alive, total)


def test_also_sees_every_entry_even_after_every_checker_crashed():
    history = _broken(3, steps=200, workers=2, namespaces=1)
    seen: list[int] = []

    class Boom(Exception):
        pass

    suite = CheckerSuite()
    for checker in suite.checkers.values():
        def explode(view: object) -> None:
            raise Boom("checker broke")

        checker._on_read = explode  # type: ignore[method-assign]
    suite.observe_all(history, also=(lambda e: seen.append(e.index),))
    assert seen == list(range(len(history)))
    assert all("checker broke" in r.notes[-1] for r in suite.results().values())


def test_a_closed_suite_keeps_its_counts_and_refuses_to_judge():
    history = _broken(11, steps=300, workers=3, namespaces=2)
    suite = CheckerSuite()
    suite.observe_all(history)
    counts, terms, causes = suite.violation_counts(), suite.rate_terms(), suite.cause_counts()
    assert any(counts.values())
    suite.close()
    assert (suite.violation_counts(), suite.rate_terms(), suite.cause_counts()) == (
        counts, terms, causes)
    with pytest.raises(InvalidArgument, match=r"results\(\) after close\(\)"):
        suite.results()
    with pytest.raises(InvalidArgument, match=r"observe\(\) after close\(\)"):
        suite.observe(history[0])


def test_a_stream_of_a_crashed_run_carries_its_defects_like_a_history_read_whole(tmp_path):
    history = _broken(5, steps=100, workers=3, namespaces=1)
    path = tmp_path / "history.jsonl"
    history.write_jsonl(path)
    whole = path.read_bytes()
    path.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 20])  # cut the last line
    streamed = check_history(HistoryStream(path, allow_incomplete=True))
    read = check_history(read_history(path, allow_incomplete=True))
    assert streamed == read
    assert any("cut short" in note for r in streamed.values() for note in r.notes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories, idle=st.integers(1, 60))
def test_entities_parked_on_disk_and_brought_back_change_no_result(history, idle):
    parked = CheckerSuite(idle=idle)
    parked.observe_all(history)
    assert parked.results() == check_history(history)


def _rounds(rounds: int) -> History:
    """Several runs one after another, each in namespaces of its own, as chaos rounds
    are; the last round's reads are broken to serve values of the first rounds."""
    entries: list[Entry] = []
    for r in range(rounds):
        part = run(r, steps=150, workers=3, namespaces=2, faults=True)
        base, t = len(entries), (entries[-1].time_ns + 1 if entries else 0)
        for e in part:
            op = replace(e.op, namespace=f"{e.op.namespace}-r{r}")
            entries.append(replace(e, index=base + e.index, time_ns=t + e.time_ns, op=op))
    old_values = [e.op.value for e in entries[: len(entries) // 4]
                  if e.f == "write" and e.type == "invoke"]
    rnd = random.Random(rounds)
    for i in range(len(entries) * 3 // 4, len(entries)):
        e = entries[i]
        if e.f == "read" and e.type == "ok" and e.result:
            leaked = Record(e.op.entity_id, "drink", rnd.choice(old_values), 1, 1)
            entries[i] = replace(e, result=(*e.result, leaked))  # type: ignore[misc]
    return History(entries)


def test_a_run_that_moves_on_to_new_entities_keeps_only_the_recent_ones_in_memory():
    history = _rounds(30)
    entities = {(e.op.namespace, e.op.entity_id) for e in history}
    clean = len(history) * 3 // 4  # before the reads that serve the first rounds' values
    trace = Trace(idle=400)
    most = 0
    for view in trace.feed(history):
        if view.done < clean:
            most = max(most, trace.in_memory)
    assert trace.parked > len(entities) // 2
    assert most < len(entities) // 3, (most, len(entities))
    # The leaked values were written by parked entities: they came back to say so.
    results = check_history(history)
    assert results["isolation"].violation_count > 0
    suite = CheckerSuite(idle=400)
    suite.observe_all(history)
    assert suite.results() == results


def test_an_entity_too_deep_to_pickle_stays_in_memory_and_is_judged_the_same():
    h = HistoryBuilder()
    for seq in range(1, 3001):  # one value written 3,000 times: a chain deeper than pickle goes
        h.write(0, "deep", "drink", "likes tea", seq=seq).ok()
    for n in range(3000):  # then 150 other entities, 20 writes each, never touched again
        h.write(1, f"other-{n // 20}", "drink", f"v{n}", seq=n + 1).ok()
    h.read(2, "deep").ok()  # serves nothing: the acknowledged write of seq 3000 is lost
    history = h.history()
    trace = Trace(idle=500)
    for _ in trace.feed(history):
        pass
    assert trace.parked > 100  # the small entities went to disk; the deep one could not
    parked = CheckerSuite(idle=500)
    parked.observe_all(history)
    results = parked.results()
    assert results == check_history(history)
    assert results["durability"].violation_count == 1
    assert results["durability"].violations[0].explanation.write.causal_seq == 3000


def test_entities_are_parked_alike_whether_entries_come_one_at_a_time_or_together():
    history = _rounds(6)
    fed, observed = Trace(idle=300), Trace(idle=300)
    for _ in fed.feed(history):
        pass
    for entry in history:
        observed.observe(entry)
    assert fed.parked == observed.parked > 0
    assert fed.in_memory == observed.in_memory


@pytest.mark.parametrize("idle", [0, -3, 2.5, True, "64"])
def test_idle_must_be_a_positive_count_of_entries(idle):
    with pytest.raises(InvalidArgument, match=r"idle=.* is not a count of entries"):
        CheckerSuite(idle=idle)
