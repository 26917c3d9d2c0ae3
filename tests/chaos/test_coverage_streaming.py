"""Coverage counted in one pass, an entry at a time, says what the whole-history
measurement said: on generated histories, the saved fixture and a real certify run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chaos.certify import CertifyOptions, certify
from chaos.coverage import Coverage, backend_errors, measure
from invariants.backend import Ack, Delete, Record, Restore, Write
from invariants.history import (
    Entry,
    History,
    HistoryRecorder,
    HistoryStream,
    Read,
    WriteMeta,
    find_history,
    read_history,
)
from invariants.levels import CLAIMABLE_LEVELS, PARAPHRASE_LEVELS
from invariants.wording.values import text_classes
from scenarios.conditions import CONDITIONS, VALUE_CONDITIONS

FIXTURE = Path(__file__).parent.parent / "fixtures" / "history-v1.jsonl"


# -- the oracle: chaos/coverage.py's measure and backend_errors before they streamed ------


def oracle_measure(history: History,
                   nemesis: Sequence[Mapping[str, Any]] = ()) -> dict[str, int]:
    pairs = [(inv, done) for inv, done in history.pairs() if done is not None]
    counts: dict[str, int] = {}
    counts["overlapping_same_key_writes"] = _oracle_overlaps(
        (_slot_key(inv), inv.index, done.index) for inv, done in pairs if inv.f == "write"
    )
    counts["attribute_variant_facts"] = _oracle_variant_facts(pairs)
    counts["delete_raced_write"] = _oracle_races(pairs)
    counts["out_of_order_arrival"] = _oracle_out_of_order(pairs)
    counts["seq_digit_boundaries"] = _oracle_digit_boundaries(pairs)
    after = _oracle_reads_after(history)
    counts["read_after_delete"] = after["delete"]
    counts["read_after_restore"] = after["restore"]
    counts["stale_write_after_restore"] = after["stale_write"]
    counts.update({f"paraphrase_writes_{level}": 0 for level in CLAIMABLE_LEVELS})
    for inv, _ in pairs:
        if inv.f == "write" and inv.meta is not None and inv.meta.paraphrase != "none":
            counts[f"paraphrase_writes_{inv.meta.paraphrase}"] += 1
    namespaces = defaultdict(set)
    for inv, _ in pairs:
        namespaces[inv.op.entity_id].add(inv.op.namespace)
    counts["second_namespace"] = sum(1 for spaces in namespaces.values() if len(spaces) > 1)
    counts.update(_oracle_nemesis_conditions(pairs, nemesis))
    counts.update(_oracle_read_back(pairs))
    return {name: counts[name] for name in CONDITIONS} | counts


def _oracle_read_back(pairs) -> dict[str, int]:
    """Per key, its latest applied write by completion; a read of the entity that serves
    that write's value counts the write's classes, once."""
    counts = dict.fromkeys([*VALUE_CONDITIONS.values(), "non_ascii_attribute_read_back"], 0)
    latest: dict[tuple[str, str, str], tuple[str, list[str]] | None] = {}
    for inv, done in sorted(pairs, key=lambda pair: pair[1].index):
        if inv.f == "write" and done.type == "ok" and done.result.applied:
            proves = [VALUE_CONDITIONS[c] for c in text_classes(inv.op.value)]
            proves += [] if inv.op.attribute.isascii() else ["non_ascii_attribute_read_back"]
            latest[_slot_key(inv)] = (inv.op.value, proves) if proves else None
        elif inv.f == "read" and done.type == "ok":
            served = {record.value for record in done.result}
            entity = (inv.op.namespace, inv.op.entity_id)
            for key, pending in latest.items():
                if key[:2] == entity and pending is not None and pending[0] in served:
                    latest[key] = None
                    for name in pending[1]:
                        counts[name] += 1
    return counts


def _no_answer(done: Entry) -> bool:
    return done.type == "info" or (
        done.type == "fail" and isinstance(done.result, str)
        and not done.result.startswith("unsupported: "))


def _oracle_nemesis_conditions(pairs, events):
    toxics, cuts, crashes, resumes = [], [], [], []
    open_toxics: dict[str, tuple[frozenset[int], int]] = {}
    open_cuts: list[tuple[frozenset[int], int]] = []
    down = None
    for event in events:
        workers = frozenset(event.get("workers", ()))
        begin, end = int(event["begin"]), int(event["end"])
        action = event["do"]
        if action == "add_toxic":
            open_toxics[event["toxic"]["name"]] = (workers, begin)
        elif action == "remove_toxic" and event.get("name") in open_toxics:
            hit, start = open_toxics.pop(event["name"])
            toxics.append((hit, start, end))
        elif action == "partition":
            open_cuts.append((workers, begin))
        elif action == "heal":
            toxics += [(hit, start, end) for hit, start in open_toxics.values()]
            cuts += [(hit, start, end) for hit, start in open_cuts]
            open_toxics, open_cuts = {}, []
        elif action == "kill":
            down = (workers, begin)
        elif action == "restart" and down is not None:
            crashes.append((down[0], down[1], end))
            down = None
        elif action == "resume":
            resumes.append((workers, begin))

    def during(windows):
        return sum(1 for inv, done in pairs if _no_answer(done) and any(
            inv.worker in hit and start <= done.index <= stop for hit, start, stop in windows))

    in_flight = sum(1 for inv, done in pairs if _no_answer(done) and any(
        inv.worker in hit and inv.index < start <= done.index for hit, start, _ in crashes))
    read_after: dict[tuple[str, str], int] = {}
    for inv, done in pairs:
        if inv.f == "read" and done.type == "ok":
            key = (inv.op.namespace, inv.op.entity_id)
            read_after[key] = max(read_after.get(key, -1), inv.index)
    survived = sum(1 for inv, done in pairs if inv.f == "write" and done.type == "ok" and any(
        inv.worker in hit and done.index < start
        and read_after.get((inv.op.namespace, inv.op.entity_id), -1) >= back
        for hit, start, back in crashes))
    across = sum(1 for inv, done in pairs if done.type == "ok" and any(
        inv.worker in hit and inv.index < back <= done.index for hit, back in resumes))
    return {"network_fault_during_ops": during(toxics), "partition_cut_ops": during(cuts),
            "crash_lost_in_flight": in_flight, "writes_acked_before_crash": survived,
            "answered_across_pause": across}


def _seq(entry: Entry) -> int:
    return int(getattr(entry.op, "causal_seq", -1))


def _slot_key(entry: Entry) -> tuple[str, str, str]:
    slot = entry.meta.slot if entry.meta is not None else getattr(entry.op, "attribute", "")
    return (entry.op.namespace, entry.op.entity_id, slot)


def _oracle_overlaps(intervals: Iterable[tuple[object, int, int]]) -> int:
    by_key: dict[object, list[tuple[int, int]]] = defaultdict(list)
    for key, start, end in intervals:
        by_key[key].append((start, end))
    found = 0
    for spans in by_key.values():
        spans.sort()
        reach = -1
        for start, end in spans:
            if start < reach:
                found += 1
            reach = max(reach, end)
    return found


def _oracle_variant_facts(pairs) -> int:
    seen: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for inv, done in pairs:
        op = inv.op
        if isinstance(op, Write) and done.type == "ok" and inv.meta is not None:
            spellings, facts = seen.setdefault(_slot_key(inv), (set(), set()))
            spellings.add(op.attribute)
            facts.add(inv.meta.fact)
    return sum(1 for spellings, facts in seen.values() if len(spellings) > 1 and len(facts) > 1)


def _oracle_races(pairs) -> int:
    spans: dict[tuple[str, str], list[tuple[int, int, bool]]] = defaultdict(list)
    for inv, done in pairs:
        if inv.f in ("write", "delete"):
            spans[(inv.op.namespace, inv.op.entity_id)].append(
                (inv.index, done.index, inv.f == "delete")
            )
    found = 0
    for items in spans.values():
        items.sort()
        reach_write = reach_delete = -1
        for start, end, is_delete in items:
            if (is_delete and start < reach_write) or (not is_delete and start < reach_delete):
                found += 1
            if is_delete:
                reach_delete = max(reach_delete, end)
            else:
                reach_write = max(reach_write, end)
    return found


def _oracle_out_of_order(pairs) -> int:
    done_order = sorted(
        (done.index, inv) for inv, done in pairs if inv.f == "write" and done.type in ("ok", "fail")
    )
    highest: dict[tuple[str, str, str], int] = {}
    found = 0
    for _, inv in done_order:
        key = _slot_key(inv)
        seq = _seq(inv)
        if seq < highest.get(key, -1):
            found += 1
        highest[key] = max(seq, highest.get(key, -1))
    return found


def _oracle_digit_boundaries(pairs) -> int:
    seqs: dict[tuple[str, str, str], tuple[int, int]] = {}
    for inv, _ in pairs:
        if inv.f == "write":
            key = _slot_key(inv)
            low, high = seqs.get(key, (_seq(inv), _seq(inv)))
            seqs[key] = (min(low, _seq(inv)), max(high, _seq(inv)))
    crossed = {b for low, high in seqs.values() for b in (10, 100) if low < b <= high}
    return int(crossed == {10, 100})


def _oracle_reads_after(history: History) -> dict[str, int]:
    state: dict[tuple[str, str], tuple[str, int]] = {}
    counts = {"delete": 0, "restore": 0, "stale_write": 0}
    horizon: dict[tuple[str, str], int] = {}
    for entry in history:
        key = (entry.op.namespace, entry.op.entity_id)
        if entry.type == "ok" and entry.f in ("delete", "restore"):
            state[key] = (entry.f, _seq(entry))
            if entry.f == "delete":
                horizon[key] = max(horizon.get(key, -1), _seq(entry))
        elif entry.type == "invoke" and key in state:
            last = state[key][0]
            if entry.f == "read":
                counts[last] += 1
            elif entry.f == "write" and last == "restore" and _seq(entry) <= horizon.get(key, -1):
                counts["stale_write"] += 1
    return counts


def oracle_backend_errors(history: History) -> dict[str, tuple[int, str]]:
    found: dict[str, tuple[int, str]] = {}
    for entry in history:
        text = entry.result if isinstance(entry.result, str) else None
        if text is None or entry.type == "ok" or text.endswith("(injected)"):
            continue
        if text.startswith("unsupported: "):
            continue
        name = text.split(":", 1)[0]
        count, first = found.get(name, (0, text))
        found[name] = (count + 1, first)
    return found


def oracle_restore_unsupported(history: History) -> bool:
    """What ``memcert load`` asked of the whole history before it streamed."""
    return any(e.f == "restore" and e.type == "fail" and isinstance(e.result, str)
               and e.result.startswith("unsupported:") for e in history)


# -- the comparison ----------------------------------------------------------------------


def assert_same_as_oracle(history: History, nemesis: Sequence[Mapping[str, Any]]) -> None:
    coverage = Coverage(nemesis)
    for entry in history:
        coverage.observe(entry)
    expected = oracle_measure(history, nemesis)
    assert list(coverage.counts().items()) == list(expected.items())
    assert list(coverage.errors().items()) == list(oracle_backend_errors(history).items())
    invoked = sum(1 for e in history if e.type == "invoke")
    assert (coverage.entries, coverage.invocations, coverage.completions) == (
        len(history), invoked, len(history) - invoked)
    assert coverage.restore_unsupported == oracle_restore_unsupported(history)
    assert measure(iter(history), nemesis) == expected
    assert backend_errors(iter(history)) == oracle_backend_errors(history)


# -- generated histories -----------------------------------------------------------------

WORKERS = 5
SEQS = (0, 1, 5, 9, 10, 11, 50, 99, 100, 101, 120)
ERRORS = ("TimeoutError: no answer", "OutcomeUnknown: reset", "ValueError: bad",
          "ConnectionError: lag (injected)", "unsupported: restore", "KeyError: 'x'")

NAMESPACES = st.sampled_from(("a", "a", "a", "b"))
ENTITIES = st.sampled_from(("e1", "e1", "e2"))
ops = st.one_of(
    st.tuples(st.just("write"), NAMESPACES, ENTITIES,
              st.sampled_from(("city", "City", "town", "城市")),
              st.sampled_from(SEQS), st.sampled_from(("city", "city", "job")),
              st.sampled_from(("f1", "f2", "f3")), st.sampled_from(PARAPHRASE_LEVELS)),
    st.tuples(st.sampled_from(("delete", "restore", "read", "read")), NAMESPACES, ENTITIES,
              st.sampled_from(SEQS)),
)
outcomes = st.sampled_from(("ok", "ok", "ok", "fail", "fail-text", "info", "info"))
steps = st.lists(st.tuples(st.integers(0, WORKERS - 1), ops, outcomes, st.sampled_from(ERRORS)),
                 min_size=40, max_size=160)
workers_hit = st.frozensets(st.integers(0, WORKERS - 1), min_size=1)
windows = st.lists(st.tuples(st.sampled_from(("toxic", "partition", "crash")),
                             st.integers(0, 80), st.integers(0, 30), workers_hit,
                             st.booleans()), max_size=4)
raw = st.lists(st.tuples(st.sampled_from(("add_toxic", "remove_toxic", "partition", "heal",
                                          "kill", "restart")),
                         st.integers(0, 80), st.integers(0, 10), workers_hit,
                         st.sampled_from(("lag", "cut"))), max_size=4)


def nemesis_of(drawn: list[tuple[str, int, int, frozenset[int], bool]],
               loose: list[tuple[str, int, int, frozenset[int], str]]) -> list[dict[str, Any]]:
    """Nemesis events: each drawn window as the nemesis would act it out (a toxic added
    then removed or healed, a partition then a heal, a kill then a restart), then some
    events in no sensible order, which the measure must take as they come."""
    made: list[dict[str, Any]] = []
    for n, (kind, begin, length, workers, by_heal) in enumerate(drawn):
        hit = sorted(workers)
        start = {"begin": begin, "end": begin + 1, "workers": hit}
        stop = {"begin": begin + length, "end": begin + length + 2, "workers": hit}
        if kind == "toxic":
            made += [{"do": "add_toxic", "toxic": {"name": f"t{n}"}, **start},
                     {"do": "heal", **stop} if by_heal
                     else {"do": "remove_toxic", "name": f"t{n}", **stop}]
        elif kind == "partition":
            made += [{"do": "partition", **start}, {"do": "heal", **stop}]
        else:
            made += [{"do": "kill", **start}, {"do": "restart", **stop}]
    for action, begin, length, workers, name in loose:
        event: dict[str, Any] = {"do": action, "begin": begin, "end": begin + length,
                                 "workers": sorted(workers)}
        if action == "add_toxic":
            event["toxic"] = {"name": name}
        elif action == "remove_toxic":
            event["name"] = name
        made.append(event)
    return made


def build(plan: list[tuple[int, tuple[Any, ...], str, str]]) -> History:
    """A valid history: each step completes its worker's operation in flight, or else
    invokes one; whatever is in flight at the end is never completed."""
    recorder = HistoryRecorder()
    flying: dict[int, Entry] = {}
    written: dict[tuple[str, str], list[str]] = defaultdict(list)
    for n, (worker, spec, outcome, error) in enumerate(plan):
        invocation = flying.pop(worker, None)
        if invocation is None:
            flying[worker] = entry = _invoke(recorder, worker, spec, n)
            if entry.f == "write":
                written[entry.op.namespace, entry.op.entity_id].append(entry.op.value)
        else:
            served = written[invocation.op.namespace, invocation.op.entity_id][-2:]
            _complete(recorder, invocation, outcome, error, served)
    return recorder.history()


_CLASSED = ("", " 👩‍💻", " Café", "\t", " ' \\", "　")
"""Endings that give a write's value one value class or none, by its step number."""


def _invoke(recorder: HistoryRecorder, worker: int, spec: tuple[Any, ...], n: int) -> Entry:
    kind, namespace, entity, *rest = spec
    if kind == "write":
        attribute, seq, slot, fact, paraphrase = rest
        value = f"{fact} {n}{_CLASSED[n % len(_CLASSED)]}"
        return recorder.invoke(worker, Write(namespace, entity, attribute, value, seq,
                                             f"op-{n}"),
                               meta=WriteMeta(fact, slot, paraphrase))
    if kind == "read":
        return recorder.invoke(worker, Read(namespace, entity))
    payload = (Delete if kind == "delete" else Restore)(namespace, entity, rest[0], f"op-{n}")
    return recorder.invoke(worker, payload)


def _complete(recorder: HistoryRecorder, invocation: Entry, outcome: str, error: str,
              served: Sequence[str] = ()) -> None:
    read = invocation.f == "read"
    if outcome == "info":
        recorder.info(invocation, error)
    elif outcome == "fail-text" or (outcome == "fail" and read):
        recorder.fail(invocation, error)
    elif outcome == "fail":
        recorder.fail(invocation, Ack(applied=False))
    elif read:
        recorder.ok(invocation, [Record(invocation.op.entity_id, "city", value, 1, 1)
                                 for value in (*served, "v")])
    else:
        recorder.ok(invocation, Ack(applied=True))


@settings(max_examples=200, deadline=None)
@given(plan=steps, drawn=windows, loose=raw)
def test_coverage_an_entry_at_a_time_equals_the_whole_history_measure(plan, drawn, loose):
    assert_same_as_oracle(build(plan), nemesis_of(drawn, loose))


def test_a_write_overlapped_only_by_one_never_completed_does_not_count():
    """The overlap needs both intervals: a running write that never completes is none."""
    recorder = HistoryRecorder()
    meta = WriteMeta("f1", "city")
    recorder.invoke(0, Write("ns", "e", "city", "v0", 1, "op-0"), meta=meta)
    late = recorder.invoke(1, Write("ns", "e", "city", "v1", 2, "op-1"), meta=meta)
    recorder.ok(late, Ack(applied=True))
    history = recorder.history()
    coverage = Coverage()
    for entry in history:
        coverage.observe(entry)
    assert coverage.counts()["overlapping_same_key_writes"] == 0
    assert oracle_measure(history)["overlapping_same_key_writes"] == 0


def test_a_write_counts_once_the_write_it_overlapped_completes_after_it():
    recorder = HistoryRecorder()
    meta = WriteMeta("f1", "city")
    early = recorder.invoke(0, Write("ns", "e", "city", "v0", 1, "op-0"), meta=meta)
    late = recorder.invoke(1, Write("ns", "e", "city", "v1", 2, "op-1"), meta=meta)
    recorder.ok(late, Ack(applied=True))
    coverage = Coverage()
    for entry in recorder.history():
        coverage.observe(entry)
    assert coverage.counts()["overlapping_same_key_writes"] == 0, "op 0 is still running"
    coverage.observe(recorder.ok(early, Ack(applied=True)))
    assert coverage.counts()["overlapping_same_key_writes"] == 1


# -- real histories ----------------------------------------------------------------------


def synthetic_nemesis(length: int, workers: Iterable[int]) -> list[dict[str, Any]]:
    """Windows over a real history that had no nemesis: a toxic, a partition and two
    crashes, each hitting every worker, at fixed fractions of its length."""
    hit = sorted(set(workers))

    def at(fraction: float) -> int:
        return int(length * fraction)

    return [
        {"do": "add_toxic", "begin": at(0.1), "end": at(0.1), "workers": hit,
         "toxic": {"name": "lag"}},
        {"do": "remove_toxic", "begin": at(0.2), "end": at(0.25), "workers": hit,
         "name": "lag"},
        {"do": "partition", "begin": at(0.3), "end": at(0.3), "workers": hit[::2]},
        {"do": "heal", "begin": at(0.4), "end": at(0.4), "workers": hit},
        {"do": "kill", "begin": at(0.5), "end": at(0.5), "workers": hit},
        {"do": "restart", "begin": at(0.55), "end": at(0.6), "workers": hit},
        {"do": "kill", "begin": at(0.8), "end": at(0.8), "workers": hit[1::2]},
        {"do": "restart", "begin": at(0.85), "end": at(0.9), "workers": hit[1::2]},
    ]


def test_the_saved_fixture_history_measures_the_same():
    history = read_history(FIXTURE)
    assert_same_as_oracle(history, ())
    assert_same_as_oracle(history, synthetic_nemesis(len(history), (e.worker for e in history)))
    assert measure(HistoryStream(FIXTURE)) == oracle_measure(history)


def test_a_real_certify_run_measures_the_same_streamed_from_its_file(tmp_path: Path):
    out = tmp_path / "out"
    # One scenario, so that the synthetic windows below fall inside one scenario's
    # traffic, with reads of the same entities on both sides of each crash.
    suite = tmp_path / "mixed.toml"
    suite.write_text('description = "mixed"\nbudget_s = 3\n'
                     '[[scenarios]]\nname = "mixed"\nshare = 1.0\n', encoding="utf-8")
    report = certify("chaos.examples:last_arrival_wins", CertifyOptions(
        budget_s=3.0, seed=20261202, out=out, stateful_share=0.0, suite=str(suite)))
    path = find_history(out)
    assert path is not None
    history = read_history(path)
    assert len(history) > 1000
    nemesis = [e for s in report.scenarios for e in s.nemesis]
    assert_same_as_oracle(history, nemesis)
    assert measure(HistoryStream(path), nemesis) == report.coverage
    workers = {e.worker for e in history}
    made = synthetic_nemesis(len(history), workers)
    assert_same_as_oracle(history, made)
    counts = measure(HistoryStream(path), made)
    assert counts == oracle_measure(history, made)
    assert counts["writes_acked_before_crash"] > 0 and counts["crash_lost_in_flight"] >= 0
