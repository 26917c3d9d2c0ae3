"""The contract's cases over HTTP: the served reference store, through the adapter, makes
the same decisions as the store in process (tests/contract_cases.py)."""

from __future__ import annotations

import pytest

from invariants.adapters.http import HttpBackend
from tests.contract_cases import ContractCases


@pytest.fixture
def store(served):
    handle = HttpBackend(served.url)
    handle.reset()
    yield handle
    handle.close()


class TestHttpService(ContractCases):
    pass
