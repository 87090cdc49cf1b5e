# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The report build imports matplotlib only for the pairwise heatmap (core/plots.py): busbw
figures are SVG written with the standard library, and a report with nothing to draw imports no
plotting at all. Both front-ends paid matplotlib's import and seven figures (0.8-1.2 CPU s) on
every report before."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core.html import TEMPLATE as HTML_TEMPLATE
from nccl_preflight.core.plots import busbw_svg, nice_ticks
from tests.playbook_run import ROOT

BUILD = """
import json, sys
from nccl_preflight.core.report_run import run_report
run_dir = sys.argv[1]
result = run_report(json.loads(sys.argv[2]), False)
print(json.dumps({"matplotlib": "matplotlib" in sys.modules, "exit_code": result["exit_code"]}))
"""
DRAW = """
import sys
from nccl_preflight.core.plots import busbw_svg
print(busbw_svg("all_gather", {1024: [(0, 1.0)], 2048: [(0, 2.0)]}, 12.5).split()[0])
print("matplotlib" in sys.modules)
"""


def stopped_run(tmp_path: Path) -> Path:
    """A 2-node run whose pre-flight failed on one node: no rank started, nothing measured."""
    run_dir = tmp_path / "run-stopped"
    hosts = [
        {"host": f"node{i}", "node_rank": i, "nproc_per_node": 1, "rank_offset": i}
        for i in range(2)
    ]
    plan = {
        "run_id": run_dir.name,
        "hosts": hosts,
        "world_size": 2,
        "master_addr": "198.19.0.11",
        "master_port": 29500,
        "backend": "gloo",
        "run_timeout_s": 120,
        "check_args": [],
        "launch_skipped": "the pre-flight failed on node0: fix those checks first",
    }
    (run_dir / "preflight").mkdir(parents=True)
    (run_dir / "plan.json").write_text(json.dumps(plan))
    failed = {"check": "firewall", "status": "failed", "message": "drops tcp/29500"}
    for i, results in enumerate([[failed], [{"check": "mtu", "status": "passed"}]]):
        doc = {"host": f"node{i}", "results": results}
        (run_dir / "preflight" / f"node{i}.json").write_text(json.dumps(doc))
    return run_dir


def build(run_dir: Path) -> dict:
    params = {
        "report_root": str(run_dir.parent),
        "run_id": run_dir.name,
        "fallback_to_latest": False,
        "ranks_launched": True,
        "update_latest": False,
        "html_template": str(HTML_TEMPLATE),
        "run_check_mode": False,
        "verdict_copy": "",
    }
    done = subprocess.run(
        [sys.executable, "-c", BUILD, str(run_dir), json.dumps(params)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_report_with_nothing_to_draw_never_imports_matplotlib(tmp_path: Path) -> None:
    run_dir = stopped_run(tmp_path)
    built = build(run_dir)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert (verdict["class"], built["exit_code"]) == ("preflight_failed", 10), built
    html = (run_dir / "report.html").read_text()
    assert "node0" in html and "no rank measured bandwidth in this run" in html
    assert built["matplotlib"] is False


def test_a_busbw_figure_is_svg_of_its_own_escaped_and_without_matplotlib() -> None:
    per_size = {1024: [(0, 0.5), (1, 1.5)], 4096: [(0, 2.0), (1, 2.0)], 16384: [(0, 4.0)]}
    drawn = busbw_svg("all_reduce <b>&", per_size, link_gbps=12.5, threshold_gbps=3.0)
    svg = ET.fromstring(drawn)  # well-formed, one element, inline-able (no XML prologue)
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and not drawn.startswith("<?xml")
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "all_reduce <b>&" in texts and "<b>" not in drawn  # the title, escaped
    assert {"1K", "4K", "16K", "link 12.5 GB/s", "required 3"} <= set(texts)
    medians = [float(c.get("cy")) for c in svg.iter("{http://www.w3.org/2000/svg}circle")]
    assert len(medians) == 3 and medians == sorted(medians, reverse=True)  # rising busbw
    drawn_alone = subprocess.run(
        [sys.executable, "-c", DRAW],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert drawn_alone.stdout.split() == ["<svg", "False"]  # drawn, matplotlib never imported


def test_the_busbw_axis_reaches_the_highest_value_in_round_steps() -> None:
    assert nice_ticks(0.9) == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert nice_ticks(12.5)[-1] >= 12.5 and nice_ticks(12.5)[1] == 2.5
    assert nice_ticks(0) == [0.0, 1.0]
