# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The report build imports matplotlib only when it draws a figure (core/plots.py
matplotlib_import_error): most failed runs stop before their ranks and have nothing to draw, and
both front-ends pay matplotlib's import (0.3-0.6 CPU s) on every report otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.unit.test_report_junit import ROOT

BUILD = """
import json, sys
from nccl_preflight.core.report_run import run_report
run_dir = sys.argv[1]
result = run_report(json.loads(sys.argv[2]), False)
print(json.dumps({"matplotlib": "matplotlib" in sys.modules, "exit_code": result["exit_code"]}))
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
        "expect_ranks": True,
        "update_latest": False,
        "html_template": str(ROOT / "roles" / "report" / "templates" / "report.html.j2"),
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
