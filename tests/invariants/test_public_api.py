"""The public surface of ``invariants``: its names, its light import, its Python API."""

from __future__ import annotations

import subprocess
import sys

import invariants


def test_exported_names_are_exactly_these():
    assert sorted(invariants.__all__) == [
        "Ack", "BackendFactory", "Delete", "FactoryError", "InvalidArgument", "InvalidInput",
        "MemcertError", "MemoryBackend", "Record", "Restore", "ValueTooLarge", "Write",
        "certify", "guard",
    ]


def test_importing_invariants_starts_no_database_runner_or_load_tool():
    code = ("import sys, invariants, invariants.checkers, invariants.history, "
            "invariants.factory, invariants.wording, invariants.stateful, "
            "invariants.guarding; "
            "heavy = [m for m in ('sqlalchemy', 'chaos', 'scenarios', 'reference_store', "
            "'memcert', 'locust', 'prometheus_client', 'torch', 'starlette', 'uvicorn') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_python_api_certifies_a_factory(tmp_path):
    from chaos.examples import in_memory

    report = invariants.certify(in_memory, seed=3, budget_s=30, out=tmp_path / "run",
                                suite="quick")
    assert report.verdict == "certified"
    assert report.seed == 3
    assert (tmp_path / "run" / "results.json").is_file()


def test_the_python_api_names_a_bad_option(tmp_path):
    import pytest

    with pytest.raises(invariants.InvalidArgument, match="level='phonetic'"):
        invariants.certify(None, level="phonetic", out=tmp_path)
