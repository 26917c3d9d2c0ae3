"""Coverage conditions counted from a recorded history."""

from __future__ import annotations

from chaos.coverage import measure
from invariants.backend import Ack, Write
from invariants.history import HistoryRecorder, WriteMeta
from scenarios.conditions import CONDITIONS


def _write(recorder: HistoryRecorder, entity: str, attribute: str, fact: str, *,
           applied: bool = True) -> None:
    op = Write("ns", entity, attribute, f"value of {fact} as {attribute} for {entity}",
               len(recorder) + 1, f"op-{len(recorder)}")
    invocation = recorder.invoke(0, op, meta=WriteMeta(fact, "city"))
    (recorder.ok if applied else recorder.fail)(invocation, Ack(applied=applied))


def test_attribute_variant_facts_needs_two_spellings_and_two_facts_acknowledged():
    recorder = HistoryRecorder()
    _write(recorder, "both", "city", "f1")
    _write(recorder, "both", "City", "f1")
    _write(recorder, "both", "city", "f2")          # City f1 and city f2 would coexist
    _write(recorder, "one-spelling", "city", "f1")
    _write(recorder, "one-spelling", "city", "f2")
    _write(recorder, "one-fact", "city", "f1")
    _write(recorder, "one-fact", "town", "f1")
    _write(recorder, "refused", "city", "f1")
    _write(recorder, "refused", "City", "f2", applied=False)
    assert measure(recorder.history())["attribute_variant_facts"] == 1


def test_every_declared_condition_is_counted_and_nothing_else_in_declaration_order():
    assert list(measure(HistoryRecorder().history())) == list(CONDITIONS)


def test_no_writes_no_variant_facts():
    assert measure(HistoryRecorder().history())["attribute_variant_facts"] == 0
