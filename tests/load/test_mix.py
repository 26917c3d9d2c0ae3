"""What load users write: traceable texts, seqs that never collide, and the options' words."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from chaos.cli_parser import build_parser
from chaos.load import LoadOptions
from chaos.load_mix import MIXES, SEQ_SHIFT, HybridClock, Keyspace, UserScript
from invariants.errors import InvalidArgument
from invariants.levels import CLAIMABLE_LEVELS

ROOT = Path(__file__).resolve().parents[2]


def test_seqs_rise_carry_the_worker_and_never_collide_across_workers():
    now = iter([5, 5, 5, 4, 9])
    clock = HybridClock(3, now_us=lambda: next(now))
    drawn = [clock.next() for _ in range(3)]
    assert drawn == [(5 << SEQ_SHIFT) | 3, (6 << SEQ_SHIFT) | 3, (7 << SEQ_SHIFT) | 3]
    clock.observe((100 << SEQ_SHIFT) | 8)
    assert clock.next() == (101 << SEQ_SHIFT) | 3, "a seq read elsewhere is exceeded"
    assert clock.next() == (102 << SEQ_SHIFT) | 3, "the wall clock going back changes nothing"
    other = HybridClock(4, now_us=lambda: 5)
    assert other.next() != drawn[0]


def _writes(worker: int, user: int, n: int, level: str = "lexical") -> list:
    script = UserScript(Keyspace("t"), mix="write-heavy", level=level, seed=1,  # type: ignore[arg-type]
                        worker_index=worker, user=user, clock=HybridClock(worker))
    return [script.write() for _ in range(n)]


def test_every_text_belongs_to_one_fact_and_one_user():
    writes = _writes(0, 1, 400) + _writes(1, 1, 400) + _writes(0, 2, 400)
    fact_of_text: dict[tuple[str, str, str], str] = {}
    for op, meta in writes:
        known = fact_of_text.setdefault((op.namespace, op.entity_id, op.value), meta.fact)
        assert known == meta.fact, f"{op.value!r} states two facts"
    owners = {meta.fact.split("x")[0] for _, meta in writes}
    assert owners == {"w0u1", "w1u1", "w0u2"}
    restated = Counter(meta.fact for _, meta in writes)
    assert max(restated.values()) > 1, "some facts are restated, for the normalizer to merge"
    assert {meta.paraphrase for _, meta in writes} == {"none", "surface", "lexical"}
    assert {op.namespace for op, _ in writes} == {"load-t", "load-t-twin"}


def test_paraphrases_stay_within_the_level_claimed():
    assert {meta.paraphrase for _, meta in _writes(0, 1, 300, "surface")} == {"none", "surface"}


def test_a_mix_only_draws_its_own_operations():
    script = UserScript(Keyspace("t"), mix="read-only", level="lexical", seed=1, worker_index=0,
                        user=0, clock=HybridClock(0))
    assert {script.choose() for _ in range(200)} == {"read"}
    assert script.read()[1].startswith("unwritten-")
    with pytest.raises(InvalidArgument) as error:
        UserScript(Keyspace("t"), mix="heavy", level="lexical", seed=1, worker_index=0, user=0,
                   clock=HybridClock(0))
    assert str(error.value) == ("mix='heavy' is not a mix; use one of balanced, read-heavy, "
                                "write-heavy, read-only.")


def test_the_cli_offers_every_mix_and_level():
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    choices = {action.dest: tuple(action.choices or ())
               for action in commands.choices["load"]._actions}
    assert (choices["mix"], choices["level"]) == (tuple(MIXES), CLAIMABLE_LEVELS)


def test_options_name_the_mistake():
    with pytest.raises(InvalidArgument) as error:
        LoadOptions(duration_s=0.5)
    assert str(error.value) == "duration_s=0.5 must be at least 1 second."
    with pytest.raises(InvalidArgument) as error:
        LoadOptions(host="http://127.0.0.1:1", db="x.sqlite3")
    assert str(error.value).startswith("host and db exclude each other")


@pytest.mark.parametrize(("args", "message"), [
    (["--worker"], "memcert load --worker needs --master-host ADDR"),
    (["--host", "http://127.0.0.1:9", "--db", "x.sqlite3"], "memcert load: --db is for the "
                                                             "store memcert serves (--serve)"),
    (["--host", "http://127.0.0.1:9", "--duration", "2"], "memcert: backend "
                                                          "'http://127.0.0.1:9' does not answer"),
])
def test_usage_errors_exit_2_before_any_load(args: list[str], message: str, tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "chaos.cli", "load", "--out",
                           str(tmp_path / "out"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message), done.stderr
