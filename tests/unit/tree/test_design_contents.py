# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""docs/design.md opens with a current contents list, and no block is too long to take in.

The list is written by docs/make_contents.py between two marker comments; every link must name
the anchor GitHub gives a heading. No paragraph or list item (outside code and tables) runs over
15 lines.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("make_contents", ROOT / "docs" / "make_contents.py")
assert _spec and _spec.loader
make_contents = importlib.util.module_from_spec(_spec)
sys.modules["make_contents"] = make_contents
_spec.loader.exec_module(make_contents)

DESIGN = ROOT / "docs" / "design.md"


def test_design_opens_with_a_current_contents_list() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    lines = text.splitlines()
    first_section = next(h.line for h in make_contents.headings(text) if h.level == 2)
    assert lines.index(make_contents.BEGIN) < lines.index(make_contents.END) < first_section
    assert make_contents.problems(text) == []
    sections = [h for h in make_contents.headings(text) if h.level in (2, 3)]
    assert len(make_contents.link_targets(text)) == len(sections) >= 30


def test_no_block_of_design_is_over_fifteen_lines() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    assert len(make_contents.blocks(text)) > 150  # the splitting finds the page's blocks
    assert [
        f"line {b.line}: {len(b.lines)} lines: {b.first_words}"
        for b in make_contents.too_long(text)
    ] == []


def test_anchors_follow_githubs_rule() -> None:
    text = "\n".join(
        [
            "# Title",
            "## Facts: `ansible_facts.nccl` (library/nccl_facts.py)",
            "## Check mode (`ansible-playbook --check`): a dry run",
            "## The run's warden — node/run_warden.py",
            "## On the control machine: reports/<run-id>/",
            "## Flow",
            "### Flow",
            "## Flow",
            "## Flow-1",
        ]
    )
    assert make_contents.anchors(make_contents.headings(text)) == [
        "title",
        "facts-ansible_factsnccl-librarynccl_factspy",
        "check-mode-ansible-playbook---check-a-dry-run",
        "the-runs-warden--noderun_wardenpy",
        "on-the-control-machine-reports",  # <run-id> outside code is an HTML tag, not text
        "flow",
        "flow-1",
        "flow-2",
        "flow-1-1",
    ]


def test_list_is_written_after_the_intro_and_rewritten_in_place() -> None:
    page = "# T\n\nIntro.\n\n## One (a.py)\n\n### Sub\n\ntext\n\n#### Deep\n\n## Two\n"
    written = make_contents.with_contents(page)
    assert written.split("\n## One")[0].splitlines()[-5:] == [
        "- [One](#one-apy)",
        "  - [Sub](#sub)",
        "- [Two](#two)",
        "",
        make_contents.END,
    ]
    assert written.startswith("# T\n\nIntro.\n\n" + make_contents.BEGIN)
    assert make_contents.with_contents(written) == written
    assert make_contents.problems(written) == []


def test_a_stale_list_or_a_link_to_no_heading_fails() -> None:
    page = make_contents.with_contents("# T\n\nIntro.\n\n## One\n\n## Two\n")
    renamed = page.replace("## Two", "## Three")
    assert make_contents.problems(renamed)[0].startswith("the contents list is out of date")
    broken = page.replace("(#two)", "(#tow)")
    assert "the contents link #tow names no heading" in make_contents.problems(broken)


def test_blocks_are_paragraphs_and_list_items_outside_code_and_tables() -> None:
    page = "\n".join(
        [
            "# T",  # 1
            "",
            "para one",  # 3
            "still one",
            "",
            "- item a",  # 6
            "  more a",
            "  - sub b",  # 8
            "",
            "  para in a",  # 10
            "",
            "    code line",  # 12: a list's paragraph, four columns in, is not code
            "",
            "para two",  # 14
            "",
            "    code",  # 16
            "    code",
            "",
            "| a | b |",  # 19
            "|---|---|",
            "```",  # 21
            "fenced",
            "```",
            "last",  # 24
        ]
    )
    assert [(b.line, len(b.lines)) for b in make_contents.blocks(page)] == [
        (3, 2),
        (6, 2),
        (8, 1),
        (10, 1),
        (12, 1),
        (14, 1),
        (24, 1),
    ]


def test_a_block_over_the_limit_is_named() -> None:
    long_item = "- " + "\n  ".join(f"word {i}" for i in range(16))
    short = "\n".join(f"word {i}" for i in range(15))
    page = f"# T\n\n## S\n\n{short}\n\n{long_item}\n"
    assert [(b.line, len(b.lines)) for b in make_contents.too_long(page)] == [(21, 16)]
    assert make_contents.problems(make_contents.with_contents(page))[-1].startswith(
        "line 29: 16 lines (over 15): - word 0"
    )
