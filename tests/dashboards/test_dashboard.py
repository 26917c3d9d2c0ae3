"""The Grafana dashboard: its layout, and a lint of every expression in it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from chaos.metrics import sample_names
from chaos.report import INVARIANTS, rate_definition

from .promql import dashboard, metric_names, panel_targets, panels, recording_rules, substitute


def test_variables_are_datasource_then_backend_and_scenario_multi_select():
    variables = dashboard()["templating"]["list"]
    assert [v["name"] for v in variables] == ["datasource", "backend", "scenario"]
    assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
    for variable in variables[1:]:
        assert variable["type"] == "query"
        assert variable["multi"] is True and variable["includeAll"] is True
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert metric_names(re.sub(r"label_values\((.*), \w+\)", r"\1",
                                   substitute(variable["definition"]))) <= sample_names()


def test_every_panel_queries_the_chosen_datasource():
    for panel in panels():
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def rows() -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    current = None
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            current = panel["title"]
            grouped[current] = []
        else:
            assert current is not None, "a panel sits above the first row"
            grouped[current].append(panel)
    return grouped


def row(prefix: str) -> list[dict]:
    [found] = [panels for title, panels in rows().items() if title.startswith(prefix)]
    return found


def test_the_invariant_row_shows_each_invariants_rate_as_percentunit_with_thresholds():
    """One panel per invariant, titled with the definition results.json gives its rate,
    dividing the same two counters."""
    shown = {p["title"]: p for p in row("Invariant rates")}
    assert len(shown) == len(INVARIANTS)
    for invariant in INVARIANTS:
        panel = shown[f"{invariant}: {rate_definition(invariant)}"]
        assert panel["type"] == "timeseries"
        defaults = panel["fieldConfig"]["defaults"]
        assert defaults["unit"] == "percentunit"
        steps = defaults["thresholds"]["steps"]
        assert steps[0]["color"] == "green" and steps[-1]["color"] == "red"
        assert 0 < steps[-1]["value"] < 1e-6, "any violation at all must show red"
        assert defaults["custom"]["thresholdsStyle"]["mode"] != "off"
        [target] = panel["targets"]
        numerator, denominator = target["expr"].split("\n/\n")
        selector = f'invariant="{invariant}"}}'
        assert "(rate(memcert_failed_checks_total{" in numerator and selector in numerator
        assert "(rate(memcert_checks_total{" in denominator and selector in denominator


def test_the_cause_row_counts_violations_by_invariant_and_cause_and_their_rate():
    """The counts keep every cause, 0 included; the rate panel says it is per second,
    not a share of checks, which the invariant row gives."""
    shown = {p["type"]: p for p in row("Violations by cause")}
    assert set(shown) == {"bargauge", "timeseries"}
    counts, rate = shown["bargauge"], shown["timeseries"]
    assert counts["title"].startswith("Violations by cause: count")
    assert rate["title"] == "Violations by cause per second"
    [count_target] = counts["targets"]
    assert count_target["expr"].startswith(
        "sum by (invariant, cause) (memcert_violations_total{")
    assert count_target["instant"] is True
    assert counts["fieldConfig"]["defaults"]["thresholds"]["steps"][-1] == {
        "color": "red", "value": 1}
    [rate_target] = rate["targets"]
    assert rate_target["expr"].startswith(
        "sum by (backend, invariant, cause) (rate(memcert_violations_total{")
    for target in (count_target, rate_target):
        assert 'backend=~"$backend", scenario=~"$scenario"' in target["expr"]
        assert "{{invariant}}: {{cause}}" in target["legendFormat"]


def test_the_red_row_has_rate_errors_and_p99_in_seconds():
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in row("Operations")}
    assert units == {"Operations per second": "ops", "Error ratio": "percentunit",
                     "p99 operation latency": "s"}
    [p99] = [p for p in row("Operations") if p["title"] == "p99 operation latency"]
    assert p99["targets"][0]["expr"].startswith("histogram_quantile(0.99, ")


def test_the_nightly_row_has_last_result_success_age_and_duration():
    titles = [p["title"] for p in row("Nightly")]
    assert titles[:2] == ["Last result", "Since last success"] and "Run duration" in titles
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in row("Nightly")}
    assert units["Since last success"] == units["Run duration"] == "s"


def test_expressions_use_only_exported_metrics_and_recording_rules():
    known = sample_names() | set(recording_rules())
    found = set()
    for panel, target in panel_targets():
        names = metric_names(substitute(target["expr"]))
        assert names, f"{panel['title']}: no metric in {target['expr']!r}"
        assert names <= known, f"{panel['title']}: unknown {sorted(names - known)}"
        found |= names
    assert {"memcert_failed_checks_total", "memcert_checks_total"} <= found


def test_the_name_extractor_finds_what_the_lint_must_reject():
    assert metric_names('sum by (backend, le) (rate(memcert_nope_total{op="read"}[5m]))'
                        ' / on (backend) group_left memcert_reads_total > 1e-3') == {
        "memcert_nope_total", "memcert_reads_total"}
    assert metric_names("time() - max(memcert_last_run_timestamp_seconds) > 26 * 3600") == {
        "memcert_last_run_timestamp_seconds"}


def lint_file(expressions: list[str]) -> str:
    """A rules file (JSON is YAML) with each expression as a recording rule."""
    return json.dumps({"groups": [{"name": "dashboard-lint", "rules": [
        {"record": f"dashboard:lint_{i}:expr", "expr": expr}
        for i, expr in enumerate(expressions)]}]})


def promtool_check(promtool: str, path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)


def test_promtool_parses_every_dashboard_expression(promtool, tmp_path):
    expressions = [substitute(t["expr"]) for _, t in panel_targets()]
    assert len(expressions) >= 13
    path = tmp_path / "dashboard.rules.yml"
    path.write_text(lint_file(expressions))
    result = promtool_check(promtool, path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout


@pytest.mark.parametrize("broken", ["sum by (backend) (rate(memcert_reads_total[5m])",
                                    'rate(memcert_reads_total{backend=~"$backend"}[1m]'])
def test_the_promtool_lint_rejects_a_broken_expression(promtool, tmp_path, broken):
    path = tmp_path / "broken.rules.yml"
    path.write_text(lint_file([substitute(broken)]))
    result = promtool_check(promtool, path)
    assert result.returncode == 1
    assert '"dashboard:lint_0:expr": could not parse expression' in result.stderr
