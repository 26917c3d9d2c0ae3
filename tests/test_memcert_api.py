"""``import memcert``, the front door: its names, its light import, its Python API."""

from __future__ import annotations

import subprocess
import sys

import pytest

import invariants
import memcert
from invariants.backend import MemoryBackend
from invariants.checkers import check_history
from invariants.stateful import machine_for


def test_exported_names_are_exactly_these():
    assert sorted(memcert.__all__) == [
        "Ack", "BackendFactory", "Delete", "FactoryError", "HistoryError", "InvalidArgument",
        "InvalidInput", "MemcertError", "MemoryBackend", "Record", "Restore", "ValueTooLarge",
        "Write", "certify", "check_history", "machine_for", "replay",
    ]


def test_every_exported_name_is_there_and_is_the_layers_own():
    exported = {name: getattr(memcert, name) for name in memcert.__all__}
    assert exported["MemoryBackend"] is MemoryBackend
    assert exported["check_history"] is check_history
    assert exported["machine_for"] is machine_for
    assert all(issubclass(exported[name], memcert.MemcertError) for name in (
        "FactoryError", "HistoryError", "InvalidArgument", "InvalidInput", "ValueTooLarge"))


def test_invariants_certify_is_memcerts():
    assert invariants.certify is memcert.certify
    with pytest.raises(AttributeError, match="has no attribute 'certified'"):
        _ = invariants.certified


def test_importing_memcert_starts_no_database_runner_load_tool_or_hypothesis():
    code = ("import sys, memcert; "
            "heavy = [m for m in ('sqlalchemy', 'chaos', 'scenarios', 'reference_store', "
            "'locust', 'prometheus_client', 'torch', 'starlette', 'uvicorn', 'hypothesis') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_front_door_certifies_and_replays(tmp_path):
    from chaos.examples import in_memory

    report = memcert.certify(in_memory, seed=3, budget_s=20, out=tmp_path / "run",
                             stateful_share=0.0, suite="quick")
    again = memcert.replay(str(tmp_path / "run"))
    assert report.verdict == again.verdict == "certified"
    assert again.seed == 3


def test_an_unknown_option_is_named_with_the_closest_one(tmp_path):
    with pytest.raises(memcert.InvalidArgument,
                       match=r"unknown option 'budget'; did you mean 'budget_s'\?"):
        memcert.certify(None, budget=5, out=tmp_path)
