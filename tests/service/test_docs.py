"""docs/http-protocol.md names every route, error code, metric and option the service has."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from chaos.cli_parser import build_parser
from reference_store.service import openapi_document
from reference_store.service.metrics import SERVICE_METRICS

from .server import ROOT

TEXT = (ROOT / "docs" / "http-protocol.md").read_text()


def test_every_route_error_code_and_metric_is_documented():
    document = openapi_document()
    routes = [path for path in document["paths"]]
    codes = document["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
    names = [*routes, *codes, *SERVICE_METRICS]
    assert [name for name in names if f"`{name}" not in TEXT and f"{name}`" not in TEXT] == []


def test_every_serve_option_is_documented():
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    options = sorted(set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", shown.getvalue())) - {"--help"})
    assert options, "memcert serve --help lists no option"
    assert [flag for flag in options if f"`{flag}" not in TEXT] == []
