"""The Prometheus rules: promtool accepts them, their unit tests pass, and they follow
the naming conventions."""

from __future__ import annotations

import re
import subprocess

from chaos.metrics import (
    CHECKS,
    FAILED_CHECKS,
    VIOLATION_METRICS,
    VIOLATIONS_BY_CAUSE,
    sample_names,
)

from .promql import (
    CHAOS,
    GUARD,
    RULE_TESTS,
    RULES,
    alert_expr,
    alerts,
    metric_names,
    recording_rules,
)


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


def test_ratios_divide_rates_aggregated_to_the_ratios_own_level():
    rules = recording_rules()
    ratios = [name for name in rules if name.endswith(":ratio_rate5m")]
    assert ratios
    for name in ratios:
        by = f"sum by ({name.split(':')[0].replace('_', ', ')}) (rate("
        quotient = rules[name]
        clamped = re.fullmatch(r"clamp_max\((.+), 1\)", quotient)
        if clamped:  # a rate of failed checks per check, which never passes 1
            quotient = clamped.group(1)
        numerator, denominator = (part.strip() for part in quotient.split("/"))
        assert numerator in rules and denominator in rules, name
        assert rules[numerator].startswith(by), name
        assert rules[denominator].startswith(by), name


def test_each_invariants_rate_is_its_failed_checks_per_check():
    """The one rate of each invariant, as results.json gives it; no rule divides
    violations by reads any more."""
    rules = recording_rules()
    checks, failed = "backend_invariant:memcert_checks:rate5m", (
        "backend_invariant:memcert_failed_checks:rate5m")
    assert rules[checks] == (
        f"sum by (backend, invariant) (rate({CHECKS.name}_total{CHAOS}[5m]))")
    assert rules[failed] == (
        f"sum by (backend, invariant) (rate({FAILED_CHECKS.name}_total{CHAOS}[5m]))")
    assert rules["backend_invariant:memcert_failed_checks_per_checks:ratio_rate5m"] == (
        f"clamp_max({failed} / {checks}, 1)")
    assert not [name for name in rules if "per_reads" in name]


def test_each_violation_kind_has_a_rate_rule_and_an_alert_on_it():
    rules = recording_rules()
    alert_exprs = [alert_expr(block) for block in alerts().values()]
    for metric in VIOLATION_METRICS.values():
        base = metric.name
        rule = f"backend:{base}:rate5m"
        assert rules[rule] == f"sum by (backend) (rate({base}_total{CHAOS}[5m]))"
        assert f"{rule} > 0" in alert_exprs


def test_no_alert_calls_a_count_a_percentage():
    """A violation count over reads is no share of anything: alerts give it per second."""
    for name, block in alerts().items():
        assert "humanizePercentage" not in block, name


def test_rules_select_only_exported_metrics_and_other_rules():
    known = sample_names() | set(recording_rules())
    for expr in [*recording_rules().values(), *map(alert_expr, alerts().values())]:
        assert metric_names(expr) <= known, expr


def test_violations_by_cause_keep_the_cause_label_and_have_a_unit_test():
    rule = "backend_invariant_cause:memcert_violations:rate5m"
    assert recording_rules()[rule] == (
        f"sum by (backend, invariant, cause) (rate({VIOLATIONS_BY_CAUSE.name}_total{CHAOS}[5m]))")
    assert f"- expr: {rule}\n" in RULE_TESTS.read_text()


def test_chaos_rules_leave_out_the_guard_and_guard_rules_take_only_the_guard():
    """A production violation must not read as a chaos finding, nor the reverse: every
    rule over memcert's violation and check counters picks one source."""
    counters = {f"{m.name}_total" for m in (*VIOLATION_METRICS.values(), CHECKS,
                                              FAILED_CHECKS, VIOLATIONS_BY_CAUSE)}
    picked = 0
    for name, expr in recording_rules().items():
        for counter in counters & metric_names(expr):
            source = GUARD if ":memcert_guard_" in name else CHAOS
            assert f"{counter}{source}[5m]" in expr, name
            picked += 1
    assert picked >= len(counters) + 3


def test_the_cause_breakdown_has_rules_by_scenario_and_alerts_naming_the_fix():
    rules = recording_rules()
    for name, source in (("memcert_violations", CHAOS), ("memcert_guard_violations", GUARD)):
        rule = f"backend_scenario_invariant_cause:{name}:rate5m"
        assert rules[rule] == ("sum by (backend, scenario, invariant, cause) "
                               f"(rate({VIOLATIONS_BY_CAUSE.name}_total{source}[5m]))")
        [block] = [b for b in alerts().values() if f"expr: {rule} > 0\n" in b]
        assert "docs/fix-your-backend.md#{{ $labels.cause }}" in block
