"""The Grafana dashboard: its layout, and a lint of every expression in it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from chaos.metrics import (
    JOB,
    LAST_RESULT,
    LAST_VERDICT,
    VERDICT_VALUES,
    VIOLATION_METRICS,
    sample_names,
)
from chaos.report import INVARIANTS, rate_definition

from .promql import (
    CHAOS,
    GUARD,
    REPO,
    annotations,
    dashboard,
    metric_names,
    panel_targets,
    panels,
    recording_rules,
    substitute,
)

DOCS = REPO / "docs"
PUSH_TIME = "push_time_seconds"
"""The Pushgateway's own gauge: when each group was last pushed."""


def test_variables_are_datasource_then_backend_scenario_cause_then_the_link_bases():
    variables = dashboard()["templating"]["list"]
    assert [v["name"] for v in variables] == [
        "datasource", "backend", "scenario", "cause", "nightly_index", "docs"]
    assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
    for variable in variables[1:4]:
        assert variable["type"] == "query"
        assert variable["multi"] is True and variable["includeAll"] is True
        assert variable["allValue"] == ".*", "All must also match values not listed yet"
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert metric_names(re.sub(r"label_values\((.*), \w+\)", r"\1",
                                   substitute(variable["definition"]))) <= sample_names()
        assert variable["definition"].endswith(f", {variable['name']})")
    for variable in variables[4:]:
        assert variable["type"] == "textbox"
        assert variable["query"].startswith("http") and variable["description"]


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


def test_the_red_row_has_rate_errors_and_p50_p99_and_max_latency_in_seconds():
    title = "Operation latency: p50, p99 and max"
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in row("Operations")}
    assert units == {"Operations per second": "ops", "Error ratio": "percentunit", title: "s"}
    [latency] = [p for p in row("Operations") if p["title"] == title]
    quantiles = [re.match(r"histogram_quantile\(([\d.]+), sum by \(backend, le\) "
                          r"\(rate\(memcert_operation_duration_seconds_bucket\{", t["expr"])
                 for t in latency["targets"]]
    assert [float(q.group(1)) for q in quantiles if q] == [0.5, 0.99, 1.0]
    assert [t["legendFormat"] for t in latency["targets"]] == [
        "{{backend}} p50", "{{backend}} p99", "{{backend}} max (bucket bound)"]
    assert "bucket-based approximation, not a measured maximum" in latency["description"]


def test_the_nightly_row_has_last_result_success_age_and_duration():
    titles = [p["title"] for p in row("Nightly")]
    assert titles[:2] == ["Last result", "Since last success"] and "Run duration" in titles
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in row("Nightly")}
    assert units["Since last success"] == units["Run duration"] == "s"


def test_last_result_shows_certified_failed_and_unknown_as_three_values_and_colours():
    [last] = [p for p in row("Nightly") if p["title"] == "Last result"]
    [mapping] = last["fieldConfig"]["defaults"]["mappings"]
    shown = {float(value): (m["text"], m["color"]) for value, m in mapping["options"].items()}
    assert shown == {VERDICT_VALUES[v]: (v, colour) for v, colour in (
        ("certified", "green"), ("failed", "red"), ("unknown", "orange"))}
    [target] = last["targets"]
    assert target["expr"].startswith(f"min by (job, backend, suite) ({LAST_VERDICT.name}{{")
    assert f"\nor {LAST_RESULT.name}{{" in target["expr"], "older pushes still show"
    assert any(link["url"] == "${nightly_index}/index.html" for link in last["links"])


def stats_in_range(panels: list[dict]) -> dict[str, dict]:
    return {p["title"]: p for p in panels if p["type"] == "stat"}


@pytest.mark.parametrize(("prefix", "source", "title"), [
    ("Absolute violations in range", CHAOS, "{} in range"),
    ("Production (guard)", GUARD, "Guard {} in range")])
def test_a_stat_row_counts_every_violation_kind_over_the_range_red_above_zero(
        prefix, source, title):
    stats = stats_in_range(row(prefix))
    kinds = {f"{m.name}_total": m for m in VIOLATION_METRICS.values()}
    assert len(stats) == len(kinds) + 1
    for counter in kinds:
        kind = counter.removeprefix("memcert_").removesuffix("_total").replace("_", " ")
        panel = stats[title.format(kind).capitalize()]
        [target] = panel["targets"]
        assert target["expr"] == (f'sum(increase({counter}{{backend=~"$backend", '
                                  f'scenario=~"$scenario", {source[1:-1]}}}[$__range]))')
        assert target["instant"] is True
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert steps == [{"color": "green", "value": None}, {"color": "red", "value": 0.5}]
        assert panel["options"]["colorMode"] == "background"
    [causes] = [p for p in stats.values() if "chosen causes" in p["title"]]
    assert 'cause=~"$cause"}[$__range]))' in causes["targets"][0]["expr"]


def test_violations_break_down_by_scenario_and_cause():
    shown = {p["type"]: p for p in row("Violations by scenario")}
    assert set(shown) == {"bargauge", "timeseries"}
    [counts], [rate] = shown["bargauge"]["targets"], shown["timeseries"]["targets"]
    assert counts["expr"].startswith(
        "sum by (scenario, invariant, cause) (increase(memcert_violations_total{")
    assert "[$__range]))" in counts["expr"]
    assert rate["expr"].startswith("sum by (backend, scenario) (rate(memcert_violations_total{")
    for target in (counts, rate):
        assert f'scenario=~"$scenario", {CHAOS[1:-1]}, cause=~"$cause"}}' in target["expr"]
    for panel in row("Invariant rates"):
        assert panel["targets"][0]["expr"].count("sum by (backend, scenario) (") == 2


def test_chaos_panels_leave_the_guard_out_and_the_guard_row_has_the_same_panels():
    """Every expression over what chaos runs export picks one source; the guard row
    repeats the violation panels with source="guard", titled apart."""
    grouped = rows()
    guard_title = next(t for t in grouped if t.startswith("Production (guard)"))
    guard = grouped.pop(guard_title)
    chaos = [p for title, ps in grouped.items() if not title.startswith("Nightly") for p in ps]
    for panel in chaos:
        for target in panel["targets"]:
            assert f"{CHAOS[1:-1]}" in target["expr"], panel["title"]
            assert GUARD[1:-1] not in target["expr"], panel["title"]
    for panel in guard:
        for target in panel["targets"]:
            assert f"{GUARD[1:-1]}" in target["expr"], panel["title"]
            assert CHAOS[1:-1] not in target["expr"], panel["title"]
    def canonical(panel: dict) -> list[str]:
        return [t["expr"].replace(GUARD[1:-1], CHAOS[1:-1]) for t in panel["targets"]]
    chaos_exprs = {e for p in chaos for e in canonical(p)}
    assert [p["title"] for p in guard if not set(canonical(p)) <= chaos_exprs] == []
    assert len(guard) == len(row("Absolute violations")) + len(INVARIANTS) + 2


def test_every_panel_links_to_the_docs_and_the_dashboard_to_the_nightly_index():
    for panel in panels():
        if panel["type"] != "row":
            urls = [link["url"] for link in panel["links"]]
            assert any(re.fullmatch(r"\$\{docs\}/[a-z-]+\.md(#[a-z-]+)?", u) for u in urls), (
                panel["title"])
            for url in urls:
                page = re.match(r"\$\{docs\}/([a-z-]+\.md)", url)
                assert page is None or (DOCS / page.group(1)).exists() or (
                    page.group(1) == "production.md"), url
    [nightly] = [link for link in dashboard()["links"] if link["title"] == "Nightly index"]
    assert nightly["url"] == "${nightly_index}/index.html" and nightly["targetBlank"] is True


def test_nightly_runs_are_annotations_at_the_pushgateway_s_push_time():
    [annotation] = annotations()
    assert annotation["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert annotation["expr"] == (
        f'max by (backend, suite) ({PUSH_TIME}{{job="{JOB}", backend=~"$backend"}}) * 1000')
    assert annotation["useValueForTime"] is True, "the push's own time, in ms, places it"
    assert "{{suite}}" in annotation["titleFormat"] and annotation["tagKeys"] == "backend,suite"


def test_expressions_use_only_exported_metrics_and_recording_rules():
    known = sample_names() | set(recording_rules())
    for annotation in annotations():
        assert metric_names(substitute(annotation["expr"])) <= {PUSH_TIME}
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
    expressions += [substitute(a["expr"]) for a in annotations()]
    assert len(expressions) >= 40
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
