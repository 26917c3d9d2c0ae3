"""Compressed histories in the commands: certify ``--compress`` writes
``history.jsonl.zst``, and replay reads either form to the same verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from chaos.certify import CertifyOptions, Recording, replay
from chaos.cli import main
from chaos.cli_parser import build_parser
from invariants.errors import InvalidArgument
from invariants.history import read_history

SEED = "20261129"


@pytest.mark.slow
def test_certify_compress_writes_zst_and_replay_reads_it_to_the_same_verdict(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["certify", "chaos.examples:last_arrival_wins", "--compress", "--budget", "6",
                 "--seed", SEED, "--stateful-share", "0", "--out", str(out), "--quiet"])
    assert code == 1, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == [
        "history.jsonl.zst", "junit.xml", "results.json"]
    assert (out / "history.jsonl.zst").read_bytes()[:4] == zstandard.FRAME_HEADER
    saved = json.loads((out / "results.json").read_text())
    assert saved["reproduce"].endswith(" --compress")
    assert saved["history_entries"] == len(read_history(out / "history.jsonl.zst"))
    capsys.readouterr()

    assert main(["replay", str(out)]) == 1
    assert "causal_monotonicity     FAIL" in capsys.readouterr().out
    again = replay(out)
    assert again.verdict == saved["verdict"] == "failed"
    assert {name: (v.verdict, v.violations, v.checked) for name, v in again.invariants.items()} \
        == {name: (v["verdict"], v["violations"], v["checked"])
            for name, v in saved["invariants"].items()}
    assert again.history_entries == saved["history_entries"]


def test_the_env_turns_compress_on_as_the_flag_does(monkeypatch):
    assert build_parser().parse_args(["certify"]).compress is False
    assert build_parser().parse_args(["certify", "--compress"]).compress is True
    monkeypatch.setenv("MEMCERT_COMPRESS", "1")
    assert build_parser().parse_args(["certify"]).compress is True
    monkeypatch.setenv("MEMCERT_COMPRESS", "0")
    assert build_parser().parse_args(["certify"]).compress is False


def test_compress_must_be_a_bool():
    with pytest.raises(InvalidArgument) as error:
        CertifyOptions(compress="yes")  # type: ignore[arg-type]
    assert str(error.value) == "compress='yes' must be True or False."


@pytest.mark.parametrize(("compress", "kept", "stale"), [
    (True, "history.jsonl.zst", "history.jsonl"),
    (False, "history.jsonl", "history.jsonl.zst"),
])
def test_a_run_deletes_the_other_form_an_earlier_run_left(tmp_path, compress, kept, stale):
    """Otherwise replay, which takes the newer of the two, could judge an earlier run."""
    (tmp_path / stale).write_text("")
    with Recording(tmp_path, backend="reference", suite="certify", level="lexical", seed=1,
                   metrics=None, compress=compress) as recording:
        assert recording.history == tmp_path / kept
    assert sorted(p.name for p in tmp_path.iterdir()) == [kept]


def saved_run_without_its_history(folder: Path) -> Path:
    """A folder with a results.json but neither history.jsonl nor history.jsonl.zst."""
    folder.mkdir()
    (folder / "results.json").write_text("{}")
    return folder


def test_replay_of_a_folder_with_neither_history_exits_2_naming_both(tmp_path, capsys):
    out = saved_run_without_its_history(tmp_path / "out")
    assert main(["replay", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"memcert replay: {out} holds no history.jsonl (or history.jsonl.zst) and "
        "results.json; pass the --out folder of a memcert certify run")


def test_replay_from_python_names_both_files_when_neither_is_there(tmp_path):
    out = saved_run_without_its_history(tmp_path / "out")
    with pytest.raises(FileNotFoundError) as error:
        replay(out)
    assert str(error.value) == (f"{out} holds no history.jsonl or history.jsonl.zst; pass the "
                                "--out folder of a memcert certify run.")
