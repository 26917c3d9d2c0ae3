"""A night's labels, and what the index says changed since the night before: the rules,
without running a night (test_nightly_pages.py runs real ones)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from chaos.cli_parser import build_parser
from chaos.nightly import NightlyOptions
from chaos.nightly_changes import FEW_NIGHTS_SHARE, WINDOW, changes, rose
from chaos.nightly_index import render_index
from chaos.nightly_labels import (
    LABELS_MAX,
    VALUE_MAX,
    automatic_labels,
    check_labels,
    night_labels,
    parse_label,
    parse_labels_env,
)
from invariants.errors import InvalidArgument

REPO = Path(__file__).resolve().parents[2]


def test_a_label_is_key_equals_value_and_the_env_joins_them_with_commas():
    assert parse_label("backend_version=1.4.2") == ("backend_version", "1.4.2")
    assert parse_label(" image = reg.example/x:7 ") == ("image", "reg.example/x:7")
    assert parse_label("url=http://h/?a=b") == ("url", "http://h/?a=b")
    assert parse_labels_env("backend_version=1.4.2, commit=abc123,") == {
        "backend_version": "1.4.2", "commit": "abc123"}
    assert parse_labels_env("") == {}


@pytest.mark.parametrize(("text", "says"), [
    ("commit", "--label 'commit' is not KEY=VALUE"),
    ("commit=", "--label commit= has no value"),
    ("=abc", "--label key '' is not a label name"),
    ("9lives=x", "--label key '9lives' is not a label name"),
    ("__name__=x", "--label key '__name__' is not a label name"),
    ("git-sha=x", "--label key 'git-sha' is not a label name"),
    ("note=a\tb", "must be 1 to 128 printable characters"),
    (f"long={'x' * (VALUE_MAX + 1)}", "must be 1 to 128 printable characters"),
])
def test_a_bad_label_is_refused_naming_where_it_came_from(text, says):
    with pytest.raises(InvalidArgument) as error:
        parse_label(text)
    assert says in str(error.value)
    with pytest.raises(InvalidArgument) as error:
        parse_labels_env(text)
    assert "MEMCERT_LABELS" in str(error.value)


def test_a_night_takes_a_bounded_number_of_labels():
    with pytest.raises(InvalidArgument, match=f"at most {LABELS_MAX}"):
        check_labels({f"k{i}": "v" for i in range(LABELS_MAX + 1)})
    with pytest.raises(InvalidArgument, match="labels key 'bad key'"):
        NightlyOptions(labels={"bad key": "v"})


def test_memcerts_version_and_the_factorys_distribution_are_found():
    memcert = metadata.version("memcert")
    assert automatic_labels("chaos.examples:in_memory") == {
        "memcert_version": memcert, "backend_package": "memcert",
        "backend_package_version": memcert}
    hypothesis = metadata.version("hypothesis")
    found = automatic_labels("hypothesis.strategies:integers")
    assert (found["backend_package"], found["backend_package_version"]) == (
        "hypothesis", hypothesis)
    assert automatic_labels("http://127.0.0.1:8765") == {"memcert_version": memcert}
    assert automatic_labels("no_such_package_here.x:f") == {"memcert_version": memcert}


def test_given_labels_replace_the_env_which_replaces_the_versions_found():
    labels = night_labels("chaos.examples:in_memory", [("commit", "cli")],
                          env="commit=env,memcert_version=pinned,image=x")
    assert labels["commit"] == "cli" and labels["memcert_version"] == "pinned"
    assert labels["image"] == "x" and labels["backend_package"] == "memcert"


def test_the_flag_is_repeatable_and_documented():
    args = build_parser().parse_args(["nightly", "--label", "a=1", "--label", "b=2"])
    assert args.label == [("a", "1"), ("b", "2")]
    helps = build_parser()._subparsers._group_actions[0].choices["nightly"].format_help()
    assert "--label KEY=VALUE" in helps and "MEMCERT_LABELS" in helps


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--label", "commit"], {}, "--label 'commit' is not KEY=VALUE"),
    ([], {"MEMCERT_LABELS": "ok=1,bad"}, "MEMCERT_LABELS 'bad' is not KEY=VALUE"),
])
def test_a_bad_label_is_a_usage_error_before_anything_runs(tmp_path, argv, env, says):
    out = tmp_path / "nights"
    result = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "nightly", "chaos.examples:in_memory",
         "--out", str(out), "--budget", "1", "--quiet", *argv],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env={**os.environ, **env})
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert not out.exists() or not any(out.iterdir()), "nothing may be written"


@pytest.mark.slow
def test_the_command_records_the_env_s_labels_and_the_flag_replaces_the_same_key(tmp_path):
    out = tmp_path / "nights"
    result = subprocess.run(
        [sys.executable, "-m", "chaos.cli", "nightly", "chaos.examples:in_memory",
         "--out", str(out), "--suite", "quick", "--budget", "2", "--quiet",
         "--label", "commit=from-flag"],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={**os.environ, "MEMCERT_LABELS": "commit=from-env, image=reg/x:7"})
    assert result.returncode in (0, 3), result.stderr
    [folder] = [f for f in out.iterdir() if f.is_dir()]
    labels = json.loads((folder / "results.json").read_text())["labels"]
    assert labels["commit"] == "from-flag" and labels["image"] == "reg/x:7"
    assert labels["memcert_version"] == metadata.version("memcert")
    assert "<code>image=reg/x:7</code>" in (out / "index.html").read_text()


def night(name: str, verdict: str, rate: float, causes: dict[str, int], labels=None):
    return {"night": name, "verdict": "certified" if verdict == "pass" else "failed",
            "labels": labels or {},
            "invariants": {"uniqueness": {"verdict": verdict, "rate": rate, "causes": causes}}}


def test_a_rate_rises_past_the_median_by_more_than_the_noise_of_the_nights_before():
    assert rose(0.0001, [0.0, 0.0, 0.0]) is not None, "from zero, any rate rose"
    assert rose(0.0, [0.0, 0.0]) is None
    steady = [0.010, 0.012, 0.011, 0.009, 0.010, 0.011, 0.010]
    assert rose(0.0125, steady) is None, "within the nights' own spread"
    rise = rose(0.02, steady)
    assert rise is not None and rise.baseline == 0.010 and rise.nights == WINDOW
    assert rise.noise == pytest.approx(max(3 * 1.4826 * 0.001, 0.25 * 0.010))
    few = [0.010, 0.012]
    assert rose(0.011 * (1 + FEW_NIGHTS_SHARE) - 1e-6, few) is None
    assert rose(0.011 * (1 + FEW_NIGHTS_SHARE) + 1e-6, few) is not None
    assert rose(0.5, []) is None, "the first night has nothing to rise from"
    old_spike = [0.9] * WINDOW + steady
    assert rose(0.02, old_spike) is not None, f"only the last {WINDOW} nights count"


def test_since_the_previous_night_names_verdicts_causes_rates_and_labels():
    nights = [night("2026-11-27T020000Z", "pass", 0.0, {"race": 0, "alias": 0}, {"commit": "a"}),
              night("2026-11-28T020000Z", "pass", 0.0, {"race": 0, "alias": 0},
                    {"commit": "a", "gone": "x"}),
              night("2026-11-29T020000Z", "fail", 0.25, {"race": 3, "alias": 0},
                    {"commit": "b", "image": "i"})]
    found = changes(nights)
    assert (found.night, found.previous) == ("2026-11-29T020000Z", "2026-11-28T020000Z")
    assert found.verdicts == (("overall", "certified", "failed"),
                              ("uniqueness", "pass", "fail"))
    assert found.appeared == (("uniqueness", "race", 3),) and found.vanished == ()
    assert [r.invariant for r in found.rises] == ["uniqueness"]
    assert found.labels == (("commit", "a", "b"), ("gone", "x", None), ("image", None, "i"))
    back = changes([*nights, night("2026-11-30T020000Z", "pass", 0.0, {"race": 0, "alias": 0},
                                   {"commit": "b", "image": "i"})])
    assert back.vanished == (("uniqueness", "race", 3),) and back.rises == ()
    page = render_index([(n["night"], {"verdict": n["verdict"], "labels": n["labels"],
                                       "invariants": {"uniqueness": {
                                           "verdict": n["invariants"]["uniqueness"]["verdict"],
                                           "rate": n["invariants"]["uniqueness"]["rate"]}},
                                       "checks": {"uniqueness": {
                                           "causes": n["invariants"]["uniqueness"]["causes"]}}})
                         for n in nights], prefix="")
    since = page[page.index('<section id="since"'):page.index("</section>")]
    assert "<b>uniqueness</b>: verdict <b>pass</b> → <b>fail</b>" in since
    assert 'new cause: <b>uniqueness</b> <a href="2026-11-29T020000Z/report.html#cause-race">' \
           "race</a> (3 violation(s))" in since
    assert "rate rose: <b>uniqueness</b> 0.2500" in since
    assert "label <code>commit</code>: a → b" in since
    assert "label <code>gone</code>: x → (absent)" in since
    data = json.loads(page.split('id="data">', 1)[1].split("</script>", 1)[0])
    assert data["since"]["appeared"] == [["uniqueness", "race", 3]]


def test_nothing_changed_says_so_and_the_first_night_has_nothing_to_compare():
    same = [night("2026-11-27T020000Z", "pass", 0.0, {"race": 0}),
            night("2026-11-28T020000Z", "pass", 0.0, {"race": 0})]
    assert not changes(same).any
    first = render_index([("2026-11-27T020000Z", {"verdict": "certified"})], prefix="")
    assert "The first night kept: nothing to compare yet." in first


def test_causes_are_not_compared_with_a_night_that_did_not_count_them():
    nights = [night("2026-11-27T020000Z", "fail", 0.5, {}),
              night("2026-11-28T020000Z", "fail", 0.5, {"race": 2})]
    found = changes(nights)
    assert found.appeared == () and found.uncounted == ("uniqueness",)
