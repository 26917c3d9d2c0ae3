"""``memcert audit`` on the command line: certify's exit codes, usage errors that name
the file or flag and write nothing, a help that teaches, and output a CI log can hold."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from chaos.audit import AuditOptions, audit_items
from chaos.audit_input import read_items
from chaos.cli import main
from chaos.metrics import MetricsOptions

HINT = "(run 'memcert audit --help' for usage)"


def dump(path: Path, *records: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def record(rid: str, attribute: str, value: str, seq: int) -> dict[str, object]:
    return {"id": rid, "namespace": "ns", "entity_id": "alice", "attribute": attribute,
            "value": value, "causal_seq": seq}


def test_a_clean_file_exits_0_and_says_where_it_saved(tmp_path, capsys):
    source = dump(tmp_path / "d.jsonl", record("r1", "city", "lives in Rome", 1))
    out = tmp_path / "out"
    assert main(["audit", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "verdict: CERTIFIED" in printed
    assert printed.rstrip().endswith(f"output: {out.resolve().as_uri()}")
    assert sorted(p.name for p in out.iterdir()) == [
        "findings.jsonl", "junit.xml", "offending_ids.txt", "results.json"]


def test_a_violation_exits_1_with_the_table_the_fix_and_the_command_again(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short paths, so that the width below is memcert's own
    source = dump(Path("d.jsonl"), record("r1", "city", "lives in Rome", 1),
                  record("r2", "City", "lives in Oslo", 2),
                  {"id": "r3", "entity_id": "bob", "attribute": "a", "value": "v",
                   "causal_seq": 1},
                  {"id": "r4", "namespace": "other", "entity_id": "bob", "attribute": "a",
                   "value": ""})
    out = Path("out")
    assert main(["audit", str(source), "--namespace", "ns", "--namespace", "", "--out",
                 str(out), "--level", "surface"]) == 1
    printed = capsys.readouterr().out
    assert all(len(line) <= 100 for line in printed.splitlines())
    assert "uniqueness              FAIL" in printed
    assert "alias: fold attribute names" in printed
    assert f"reproduce: memcert audit {source} --namespace ns --namespace '' --level surface" \
        in printed
    # r3 has no namespace, so it may be ns's: listed; r4 is other's: left out.
    assert (out / "offending_ids.txt").read_text() == "r1\nr2\nr3\n"
    saved = json.loads((out / "results.json").read_text())
    assert saved["verdict"] == "failed" and saved["level"] == "surface"


def test_every_namespace_of_a_file_by_default_and_defects_named_by_field(tmp_path, capsys):
    source = dump(tmp_path / "d.jsonl", {"id": "r3", "entity_id": "bob", "attribute": "a",
                                         "value": "v", "causal_seq": 1})
    assert main(["audit", str(source), "--out", str(tmp_path / "out")]) == 1
    assert "namespace: 1 record(s); first at line 1: is missing" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["audit", "{missing}"], "memcert audit: {missing} does not exist; give a JSON Lines "
                             "file or a package.module:factory"),
    (["audit", "{folder}"], "memcert audit: {folder} is a folder; give a JSON Lines file"),
    (["audit", "chaos.examples.naive_dict:naive_dict"],
     "memcert audit: a factory is audited one namespace at a time; give --namespace N "
     "(repeat for more)"),
    (["audit", "{file}", "--level", "meaning"],
     "memcert audit: argument --level: invalid choice: 'meaning'"),
    (["audit", "{file}", "--namespaces", "ns"],
     "memcert audit: unrecognized arguments: --namespaces ns. Did you mean --namespace?"),
    (["audit"], "memcert audit: the following arguments are required: "
                "FILE|package.module:factory"),
])
def test_a_usage_error_exits_2_naming_what_is_wrong_and_writes_nothing(
        tmp_path, capsys, args, message):
    names = {"missing": tmp_path / "nope.jsonl", "folder": tmp_path / "dir",
             "file": dump(tmp_path / "d.jsonl", record("r1", "city", "lives in Rome", 1))}
    names["folder"].mkdir()
    out = tmp_path / "out"
    given = [a.format(**names) for a in args]
    assert main([*given, "--out", str(out)] if len(given) > 1 else given) == 2
    err = capsys.readouterr().err
    assert err.startswith(message.format(**names)), err
    assert err.rstrip().endswith(HINT)
    assert not out.exists()


def test_a_factory_that_does_not_import_is_a_usage_error(tmp_path, capsys):
    assert main(["audit", "no_such_module:factory", "--namespace", "ns", "--out",
                 str(tmp_path / "out")]) == 2
    assert "no_such_module" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_nothing_to_audit_or_no_enumeration_exits_3(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["audit", str(empty), "--out", str(tmp_path / "out")]) == 3
    assert "verdict: UNKNOWN" in capsys.readouterr().out
    assert main(["audit", "chaos.examples.passing_dict:passing_dict", "--namespace", "ns",
                 "--out", str(tmp_path / "live")]) == 3
    assert "has no entities(namespace) method" in capsys.readouterr().err
    assert not (tmp_path / "live").exists()


def test_a_live_store_with_entities_is_audited(tmp_path, capsys):
    assert main(["audit", "chaos.examples:in_memory", "--namespace", "ns",
                 "--out", str(tmp_path / "out")]) == 3  # an empty store: nothing to audit
    assert "audited 0 record(s) of 0 entities" in capsys.readouterr().out


def test_the_docs_example_dump_line_audits_clean(tmp_path):
    docs = Path(__file__).parents[2] / "docs"
    [example] = re.findall(r"```json\n(.*?)\n```", (docs / "audit.md").read_text("utf-8"))
    source = tmp_path / "example.jsonl"
    source.write_text(example + "\n", encoding="utf-8")
    assert main(["audit", str(source), "--out", str(tmp_path / "out")]) == 0
    assert len((docs / "production.md").read_text("utf-8").splitlines()) <= 40


def test_the_help_teaches_with_examples_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    out = capsys.readouterr().out
    assert "memcert audit export.jsonl" in out and "--pushgateway" in out and "cron" in out
    assert "Exit codes: 0 nothing found, 1 a violation or field defect, 2 usage error," in out
    assert "docs/audit.md" in out
    assert all(len(line) <= 100 for line in out.splitlines())


def test_the_audit_exports_certifys_metrics_under_suite_audit(tmp_path, capsys):
    registry = CollectorRegistry()
    source = dump(tmp_path / "d.jsonl", record("r1", "city", "lives in Rome", 1),
                  record("r2", "City", "lives in Oslo", 2))
    with source.open("rb") as stream:
        audit_items(read_items(stream), "dump", AuditOptions(
            out=tmp_path / "api", metrics=MetricsOptions(registry=registry)))
    labels = {"backend": "dump", "scenario": "audit", "invariant": "uniqueness"}
    assert registry.get_sample_value("memcert_failed_checks_total", labels) == 1
    assert registry.get_sample_value("memcert_checks_total", labels) == 1
    assert registry.get_sample_value("memcert_conflicts_total",
                                     {"backend": "dump", "scenario": "audit"}) == 1
    assert registry.get_sample_value("memcert_violations_total", {
        **labels, "cause": "alias"}) == 1
    assert registry.get_sample_value("memcert_last_run_success",
                                     {"backend": "dump", "suite": "audit"}) == 0
    # On the command line: the same metrics, served on a loopback port while it runs.
    assert main(["audit", str(source), "--out", str(tmp_path / "cli"),
                 "--metrics-port", "0"]) == 1
    assert "memcert: serving metrics at http://127.0.0.1:" in capsys.readouterr().err
