# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The support table end to end: the playbook predicts a skip before the ranks run, and every
rank skips exactly that test without calling the backend (gloo, AVG on int32 tensors)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from markupsafe import escape

from tests.lab.harness import Lab
from tests.lab.runs import QUICK, new_run_id, playbook, validate

pytestmark = pytest.mark.lab
REASON_START = "gloo has no AVG on integer tensors"


def test_a_predicted_skip_is_in_plan_json_summary_and_every_rank(lab2: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()
    args = ["--dtype", "int32", "--tests", "all_reduce_sum,all_reduce_avg,broadcast", *QUICK]
    result = playbook(lab2, run_id, tmp_path, {"nccl_check_args": args, "nccl_run_timeout": 90})
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    report = tmp_path / run_id
    validate(report)

    skips = json.loads((report / "plan.json").read_text())["predicted_skips"]
    assert [s["test"] for s in skips] == ["all_reduce_avg"]
    assert skips[0]["reason"].startswith(REASON_START)
    summary = (report / "summary.md").read_text()
    assert f"- all_reduce_avg: skipped: {skips[0]['reason']}" in summary
    html = (report / "report.html").read_text()
    assert "Skipped on every rank, as the support table predicts (gloo)" in html
    assert f"<code>all_reduce_avg</code>: skipped: {escape(skips[0]['reason'])}" in html
    assert html.index("support table predicts") < html.index('<section id="hosts">')

    cases = [
        c
        for c in ET.parse(report / "junit.xml").getroot().iter("testcase")
        if c.get("name") == "all_reduce_avg"
    ]
    assert len(cases) == 2  # one per rank (one rank per host)
    for case in cases:
        skipped = case.find("skipped")
        assert skipped is not None and skipped.get("message", "").startswith(REASON_START)
