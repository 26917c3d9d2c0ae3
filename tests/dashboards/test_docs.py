"""docs/metrics.md, docs/nightly.md and docs/invariants.md name what the code does."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from chaos.cli_parser import build_parser
from chaos.metrics import METRICS
from invariants.causes import CAUSES
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


def test_invariants_md_lists_every_cause_in_order_linking_its_fix():
    """One row per cause, in CAUSES order, each linking its anchor on the fix page."""
    text = (DOCS / "invariants.md").read_text()
    section = text[text.index("\n## Causes\n"):text.index("\n## Soundness")]
    rows = re.findall(r"^\| (\w+) \| \[`(\w+)`\]\(fix-your-backend\.md#(\w+)\) \| .+ \|$",
                      section, re.M)
    assert [(checker, cause) for checker, cause, _ in rows] == [
        (checker, cause) for checker, causes in CAUSES.items() for cause in causes]
    assert all(cause == anchor for _, cause, anchor in rows)


def test_the_scheduling_recipes_keep_the_nights_and_push_the_metrics():
    """A systemd timer, cron and a GitHub Actions schedule, each complete: where the
    nights are kept, and where the metrics go."""
    text = (DOCS / "nightly.md").read_text()
    section = text[text.index("\n## Scheduling\n"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    service, timer = re.findall(r"```ini\n(.*?)```", section, re.S)[:2]
    assert "ExecStart=" in service and "--out /var/lib/memcert/nightly" in service
    assert "MEMCERT_PUSHGATEWAY=" in service and "SuccessExitStatus=1 3" in service
    assert "OnCalendar=" in timer and "Persistent=true" in timer
    [workflow] = [block for block in re.findall(r"```yaml\n(.*?)```", section, re.S)
                  if "on:\n  schedule:" in block]
    for step in ("actions/cache/restore@", "actions/cache/save@", "actions/upload-artifact@",
                 "MEMCERT_PUSHGATEWAY:", "--out nightly"):
        assert step in workflow, step
    assert "--pushgateway" in section.split("```cron")[1].split("```")[0]
