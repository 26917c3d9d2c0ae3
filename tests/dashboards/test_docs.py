"""docs/metrics.md and docs/nightly.md name what the code does."""

from __future__ import annotations

import argparse
from pathlib import Path

from chaos.cli_parser import build_parser
from chaos.metrics import METRICS
from reference_store.metrics import STORE_METRICS

from .promql import alerts

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_metric_and_alert_is_documented():
    text = (DOCS / "metrics.md").read_text()
    names = [m.samples[0] if m.kind != "histogram" else m.name for m in METRICS]
    names += [f"{name}_total" for name in STORE_METRICS]
    names += list(alerts())
    assert [name for name in names if f"`{name}`" not in text] == []


def test_every_nightly_option_is_documented_with_three_ready_examples():
    text = (DOCS / "nightly.md").read_text()
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    options = [flag for action in commands.choices["nightly"]._actions
               for flag in action.option_strings if flag.startswith("--") and flag != "--help"]
    assert [flag for flag in options if f"`{flag}" not in text] == []
    assert "```cron" in text and "on:\n  schedule:" in text and "kind: CronJob" in text
