"""Each invariant of the contract, case by case, on SQLite and on PostgreSQL: the shared
cases (tests/contract_cases.py), then what only a store with rows can show."""

from __future__ import annotations

import pytest

from reference_store import ReferenceStore
from tests.contract_cases import ContractCases, d, w


@pytest.fixture
def store(db_url):
    with ReferenceStore(db_url) as handle:
        yield handle


class TestReferenceStore(ContractCases):
    pass


def test_a_superseded_fact_stays_as_a_superseded_row(store):
    store.write(w("alice", "city", "lives in Hangzhou", 1))
    store.write(w("alice", "city", "lives in Nanjing", 2))
    assert store.count_rows(status="superseded") == 1


def test_tombstone_version_is_higher_than_every_version_of_the_entity(store):
    versions = [store.write(w("erin", f"a{i}", f"value {i}", i)).version for i in range(3)]
    tomb = store.delete(d("erin", 5))
    assert tomb.version is not None and tomb.version > max(v for v in versions if v)


def test_a_retry_writes_no_second_row(store):
    store.write(w("jo", "city", "lives in Turin", 5, op_id="op-1"))
    store.write(w("jo", "city", "lives in Milan", 6))
    store.write(w("jo", "city", "lives in Turin", 5, op_id="op-1"))
    assert store.count_rows() == 2


def test_a_merge_adds_no_row_and_a_negation_supersedes(store):
    store.write(w("ned", "drink", "Likes Americano.", 1))
    store.write(w("ned", "drink", "likes americano", 3))
    assert store.count_rows() == 1
    store.write(w("ned", "drink", "does not like americano", 4))
    assert store.count_rows(status="superseded") == 1


def test_reset_leaves_no_rows(store):
    store.write(w("pam", "city", "lives in Oslo", 1, ns="a"))
    store.delete(d("pam", 2, ns="b"))
    store.reset()
    assert store.count_rows() == 0
