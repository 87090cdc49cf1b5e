# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""BENCHMARKS.md as bench/report.py renders it from the stored results: each benchmark's section
opens with its goal, its current figure and whether the goal is met, the same words as its row
of the summary table; the history of earlier rounds is in docs/history.md, not on the page."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench.common import Row
from bench.report import render

ROOT = Path(__file__).resolve().parents[3]


def rendered() -> str:
    return render(json.loads((ROOT / "bench" / "results.json").read_text()))


def summary_rows(page: str) -> dict[str, list[str]]:
    table = page.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 4 and cells[0] not in ("benchmark", "---|---|---|---"):
            rows[cells[0]] = cells
    return rows


def sections(page: str) -> list[list[str]]:
    return [part.splitlines() for part in re.split(r"\n(?=## )", page)[1:]]


def test_row_renders_one_table_row_and_a_goal_first_opening() -> None:
    row = Row("demo", "x <= 1 s", "0.5 s", "**met**")
    assert row.markdown() == "| demo | x <= 1 s | 0.5 s | **met** |"
    assert row.opening() == [
        "- **Goal:** x <= 1 s",
        "- **Now:** 0.5 s",
        "- **Goal met:** **met**",
        "",
    ]


def test_every_measured_section_opens_with_its_goal_and_figure() -> None:
    page = rendered()
    rows = summary_rows(page)
    assert {"overhead", "report_scale", "node-check", "node_check_health"} <= set(rows)
    opened = {}
    for lines in sections(page):
        if len(lines) > 4 and lines[2].startswith("- **Goal:** "):
            opened[lines[0]] = lines[2:5]
    goals = {lines[0].removeprefix("- **Goal:** ") for lines in opened.values()}
    for name, (_, goal, measured, met) in rows.items():
        if goal:
            assert goal in goals, f"{name}: no section opens with its goal"
            section = next(s for s in opened.values() if s[0] == f"- **Goal:** {goal}")
            assert section[1:] == [f"- **Now:** {measured}", f"- **Goal met:** {met}"], name


def test_the_page_holds_no_history_of_earlier_rounds() -> None:
    page = rendered()
    assert "## Findings, shortfalls" not in page
    assert "docs/history.md" in page
    history = (ROOT / "docs" / "history.md").read_text()
    assert "## Benchmark rounds" in history
    for dated_round in ("**Overhead, tenth round**", "**Start and wait in one call**"):
        assert dated_round in history and dated_round not in page


def test_the_committed_page_is_the_rendered_one() -> None:
    assert (ROOT / "BENCHMARKS.md").read_text() == rendered()
