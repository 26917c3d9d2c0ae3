"""The Prometheus rules: promtool accepts them, their unit tests pass, and they follow
the naming conventions."""

from __future__ import annotations

import re
import subprocess

from chaos.metrics import VIOLATION_METRICS, sample_names

from .promql import RULE_TESTS, RULES, alert_expr, alerts, metric_names, recording_rules


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_promtool_accepts_the_rules(promtool):
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    rules = len(recording_rules()) + len(alerts())
    assert f"SUCCESS: {rules} rules found" in result.stdout


def test_the_alert_unit_tests_pass(promtool):
    result = run(promtool, "test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_wrong_expectation_fails_the_unit_tests(promtool, tmp_path):
    """The unit tests can fail: the same file, expecting the wrong severity."""
    broken = tmp_path / "broken.test.yml"
    broken.write_text(RULE_TESTS.read_text().replace(
        "rule_files:\n  - memcert.rules.yml", f"rule_files:\n  - {RULES}").replace(
        "severity: warning", "severity: page"))
    result = run(promtool, "test", "rules", str(broken))
    assert result.returncode == 1
    assert "alertname: MemcertNightlyNoRecentSuccess" in result.stdout + result.stderr


def test_every_alert_has_a_unit_test_that_fires_it():
    tests = RULE_TESTS.read_text()
    tested = set(re.findall(r"alertname: (\S+)\n\s+exp_alerts:\n\s+- exp_labels:", tests))
    assert tested == set(alerts())


def test_alerts_are_camel_case_with_severity_summary_and_description():
    assert alerts()
    for name, block in alerts().items():
        assert re.fullmatch(r"Memcert(?:[A-Z][a-z0-9]+)+", name), name
        assert re.search(r"severity: (critical|warning)\n", block), name
        assert "summary: " in block and "description: " in block, name


def test_recording_rules_are_named_level_metric_operations():
    for name, expr in recording_rules().items():
        level, metric, operations = name.split(":")
        assert re.fullmatch(r"[a-z_]+", level) and level.split("_")[0] == "backend", name
        assert metric.startswith("memcert_") and operations, name
        assert f"by ({level.replace('_', ', ')})" in expr or "/" in expr or (
            "histogram_quantile" in expr), f"{name} does not aggregate to its level"


def test_ratios_divide_aggregated_rates():
    rules = recording_rules()
    for name, expr in rules.items():
        if name.endswith(":ratio_rate5m"):
            numerator, denominator = (part.strip() for part in expr.split("/"))
            assert numerator in rules and denominator in rules, name
            assert rules[numerator].startswith("sum by (backend) (rate(")
            assert rules[denominator].startswith("sum by (backend) (rate(")


def test_each_violation_kind_has_a_ratio_rule_and_an_alert_on_it():
    rules = recording_rules()
    alert_exprs = [alert_expr(block) for block in alerts().values()]
    for metric in VIOLATION_METRICS.values():
        base = metric.name
        ratio = f"backend:{base}_per_reads:ratio_rate5m"
        assert rules[f"backend:{base}:rate5m"] == f"sum by (backend) (rate({base}_total[5m]))"
        assert rules[ratio] == f"backend:{base}:rate5m / backend:memcert_reads:rate5m"
        assert f"{ratio} > 0" in alert_exprs


def test_rules_select_only_exported_metrics_and_other_rules():
    known = sample_names() | set(recording_rules())
    for expr in [*recording_rules().values(), *map(alert_expr, alerts().values())]:
        assert metric_names(expr) <= known, expr
