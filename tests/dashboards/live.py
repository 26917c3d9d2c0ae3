"""Talking to the throwaway Prometheus and Pushgateway over their HTTP APIs."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector: [{"metric": {...}, "value": [t, "v"]}, ...]."""
    reply = get_json(f"{prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert reply["status"] == "success", reply
    assert reply["data"]["resultType"] == "vector", (expr, reply["data"]["resultType"])
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result


def by_label(result: list[dict[str, Any]], label: str = "backend") -> dict[str, float]:
    return {series["metric"].get(label, ""): float(series["value"][1]) for series in result}
