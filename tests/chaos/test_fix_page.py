"""docs/fix-your-backend.md has a section for every cause, where the CLI's links land,
in the order of the write path, and every backend it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import chaos.examples as examples
from chaos.report import INVARIANTS
from invariants.causes import CAUSES, FIX_PAGE

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / FIX_PAGE).read_text("utf-8")

STAGES = ("validate", "normalize", "tombstone", "staleness", "uniqueness", "commit")
"""The write path of the seeds' design, in order: the page's top-level sections."""

PARTS = ("**What memcert saw.**", "**Why it happens.**", "**Fix.**", "**Check the fix.**")

INVARIANT_OF = {checker: name for name, checkers in INVARIANTS.items() for checker in checkers}

ANCHOR = re.compile(r'^<a id="([\w-]+)"></a>\n(#+) (.*)$', re.M)


def sections() -> list[tuple[str, str, str, str]]:
    """(anchor, heading level, heading, body) of every anchored section, in order."""
    found = list(ANCHOR.finditer(PAGE))
    ends = [m.start() for m in found[1:]] + [len(PAGE)]
    return [(m.group(1), m.group(2), m.group(3), PAGE[m.end():end])
            for m, end in zip(found, ends, strict=True)]


def test_every_cause_has_one_section_anchored_by_its_name():
    anchors = [anchor for anchor, *_ in sections()]
    causes = [cause for listed in CAUSES.values() for cause in listed]
    assert sorted(a for a in anchors if a not in STAGES) == sorted(causes)
    assert len(set(anchors)) == len(anchors)


def test_the_stages_come_in_write_path_order_and_hold_the_causes():
    stages = [(anchor, heading) for anchor, level, heading, _ in sections() if level == "##"]
    assert [anchor for anchor, _ in stages] == list(STAGES)
    assert [heading for _, heading in stages] == [
        f"{i}. {stage.capitalize()}" for i, stage in enumerate(STAGES, start=1)]
    assert sections()[0][0] == "validate"


def test_each_cause_section_says_what_why_fix_and_check_and_names_its_invariant():
    checker_of = {cause: checker for checker, listed in CAUSES.items() for cause in listed}
    for anchor, level, heading, body in sections():
        if anchor in STAGES:
            continue
        assert level == "###", anchor
        checker = checker_of[anchor]
        invariant = INVARIANT_OF[checker]
        named = f"({invariant})" if invariant == checker else f"({invariant}, {checker} checker)"
        assert heading == f"`{anchor}` {named}", heading
        positions = [body.find(part) for part in PARTS]
        assert -1 not in positions and positions == sorted(positions), anchor


def test_the_index_table_links_every_cause_under_its_invariant():
    for checker, listed in CAUSES.items():
        row = next(line for line in PAGE.splitlines()
                   if line.startswith(f"| {INVARIANT_OF[checker]} "))
        for cause in listed:
            assert f"[`{cause}`](#{cause})" in row, (checker, cause)


def test_every_known_bad_backend_the_page_names_exists():
    named = set(re.findall(r"`chaos\.examples:(\w+)`", PAGE))
    assert named
    assert all(hasattr(examples, name) for name in named), named


def test_the_page_links_only_to_its_own_anchors_and_pages_that_exist():
    anchors = {anchor for anchor, *_ in sections()}
    local = set(re.findall(r"\]\(#([\w-]+)\)", PAGE))
    assert local <= anchors, local - anchors
    for page in set(re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]+)?\)", PAGE)):
        assert (ROOT / "docs" / page).is_file(), page


def test_every_link_into_the_page_lands_on_a_section():
    anchors = {anchor for anchor, *_ in sections()}
    for doc in (ROOT / "docs").rglob("*.md"):
        for anchor in re.findall(r"fix-your-backend\.md#([\w-]+)", doc.read_text("utf-8")):
            assert anchor in anchors, (doc.name, anchor)
