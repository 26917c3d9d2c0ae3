"""The certification suite against the backend named by ``--memcert-backend``.

The plugin adds this file to the run only when that option is given.
"""

from __future__ import annotations

import pytest

from invariants.certification_suite import MemoryBackendCertification


class TestMemcertBackend(MemoryBackendCertification):
    @pytest.fixture
    def backend_factory(self, request: pytest.FixtureRequest) -> str:
        spec: str = request.config.getoption("memcert_backend")
        return spec

    @pytest.fixture
    def memcert_level(self, request: pytest.FixtureRequest) -> str:
        level: str = request.config.getoption("memcert_level")
        return level
