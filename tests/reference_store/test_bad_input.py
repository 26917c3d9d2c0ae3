"""Bad input gets a typed error naming the field, and nothing is written."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from invariants.backend import Delete, Restore, Write
from invariants.errors import InvalidInput, MemcertError, ValueTooLarge
from reference_store import ReferenceStore, StoreConfig, WriteOptions
from reference_store.schema import entities, memories, operations, tombstones


@pytest.fixture
def store(db_url):
    with ReferenceStore(db_url, StoreConfig(max_value_bytes=1024)) as handle:
        handle.write(Write("ns", "seed", "city", "lives in Oslo", 1, "seed-op"))
        yield handle


def table_sizes(store: ReferenceStore) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (memories, entities, operations, tombstones)}


GOOD = {"namespace": "ns", "entity_id": "e1", "attribute": "city", "value": "lives in Oslo",
        "causal_seq": 2, "op_id": "op-2"}

BAD_WRITES = [
    ("entity_id", "", "entity_id='' (type str) is empty or whitespace-only. "
                      "Give a non-blank value."),
    ("entity_id", " \t\n", None),
    ("attribute", "   ", None),
    ("op_id", "", None),
    ("namespace", "", None),
    ("namespace", "a b", "namespace='a b' (type str) contains a forbidden character. Use 1-128 "
                         "of A-Z a-z 0-9 and _ . : / @ -, starting with a letter or digit."),
    ("namespace", "ns*", None),
    ("namespace", "../etc", None),
    ("namespace", "名字", None),
    ("causal_seq", "7", "causal_seq='7' (type str) is not an integer. "
                        "Assign it from a Lamport clock when the operation starts."),
    ("causal_seq", 7.0, None),
    ("causal_seq", True, None),
    ("causal_seq", None, None),
    ("causal_seq", -1, "causal_seq=-1 (type int) is outside 0..9223372036854775807. "
                       "Use a non-negative 64-bit counter."),
    ("causal_seq", 2**63, None),
    ("value", "x" * 1025, None),
    ("value", "nul\x00inside", "value='nul\\x00inside' (type str) contains a NUL byte. "
                               "Remove the \\x00 characters."),
    ("entity_id", "bad\ud800surrogate", "entity_id='bad\\ud800surrogate' (type str) is not "
     "valid UTF-8 (it holds a lone surrogate). Decode the source bytes with errors='strict' "
     "and fix the input."),
    ("value", b"\xff\xfe", "value=b'\\xff\\xfe' (type bytes) is bytes. Decode it to str "
                           "(UTF-8) first."),
    ("value", 42, None),
    ("source", "", None),
]


@pytest.mark.parametrize(("field", "bad", "message"), BAD_WRITES)
def test_a_bad_write_field_is_named_and_nothing_is_written(store, field, bad, message):
    before = table_sizes(store)
    with pytest.raises(InvalidInput) as caught:
        store.write(Write(**{**GOOD, field: bad}))
    assert caught.value.field == field
    assert isinstance(caught.value, ValueError | MemcertError)
    if message is not None:
        assert str(caught.value) == message
    assert table_sizes(store) == before


def test_an_oversized_value_is_a_value_too_large_error(store):
    with pytest.raises(ValueTooLarge) as caught:
        store.write(Write(**{**GOOD, "value": "é" * 513}))
    assert str(caught.value).endswith(
        "is 1026 bytes of UTF-8, over the limit of 1024. "
        "Shorten it, or open the store with a larger max_value_bytes.")


def test_the_default_value_limit_is_64_kib(db_url):
    with ReferenceStore(db_url) as store:
        assert store.write(Write(**{**GOOD, "value": "v" * 65536})).applied
        with pytest.raises(ValueTooLarge):
            store.write(Write(**{**GOOD, "op_id": "op-3", "value": "v" * 65537}))


@pytest.mark.parametrize(("op", "field"), [
    (Delete("ns", "", 3, "d1"), "entity_id"),
    (Delete("ns", "seed", -3, "d1"), "causal_seq"),
    (Delete("ns", "seed", 3, "d1", reason="\x00"), "reason"),
    (Restore("bad ns", "seed", 3, "r1"), "namespace"),
    (Restore("ns", "seed", 3, " "), "op_id"),
])
def test_bad_deletes_and_restores_change_nothing(store, op, field):
    before = table_sizes(store)
    call = store.delete if isinstance(op, Delete) else store.restore
    with pytest.raises(InvalidInput) as caught:
        call(op)
    assert caught.value.field == field
    assert table_sizes(store) == before
    assert [x.value for x in store.read("ns", "seed")] == ["lives in Oslo"]


def test_an_unknown_memory_type_is_rejected(store):
    before = table_sizes(store)
    with pytest.raises(InvalidInput) as caught:
        store.remember(Write(**GOOD), WriteOptions(memory_type="dream"))
    assert str(caught.value) == ("memory_type='dream' (type str) is not a known memory type. "
                                 "Use one of episodic, semantic, procedural.")
    assert table_sizes(store) == before


@pytest.mark.parametrize(("options", "field"), [
    (WriteOptions(score=float("nan")), "score"),
    (WriteOptions(score=-0.1), "score"),
    (WriteOptions(score=float("inf")), "score"),
    (WriteOptions(half_life_seconds=0), "half_life_seconds"),
    (WriteOptions(half_life_seconds=-5.0), "half_life_seconds"),
    (WriteOptions(half_life_seconds=float("nan")), "half_life_seconds"),
])
def test_bad_strength_options_are_rejected(store, options, field):
    before = table_sizes(store)
    with pytest.raises(InvalidInput) as caught:
        store.remember(Write(**GOOD), options)
    assert caught.value.field == field
    assert table_sizes(store) == before
