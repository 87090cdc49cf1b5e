# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Nodes with torch and nothing else (requirements-node.txt): the whole playbook on the lab, whose
hosts run an interpreter made from requirements-node.txt alone (tests/lab, `make node-venv`), so
numpy cannot be imported there. Issue 25: every rank crashed in the pairwise set-up with
"Numpy is not available" (all_gather_object pickles through numpy).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.lab.harness import Lab
from tests.lab.runs import QUICK, assert_nothing_left, label, new_run_id, playbook, validate

pytestmark = pytest.mark.lab

CHECK_ARGS = [*QUICK, "--tests", "all_reduce_sum,bandwidth_all_reduce"]
CHECK_ARGS += ["--pair-bytes", "1M", "--pair-iters", "3"]
# Every fabric link at the same rate, so the link and not the shared CPUs sets each pair's figure
# (as test_pairwise_lab.py's healthy case): a healthy cluster must name nobody slow.
LINK_RATE = "200mbit"


def test_three_nodes_without_numpy_pass_with_pairwise_rounds(
    lab_factory: Any, tmp_path: Path
) -> None:
    lab3: Lab = lab_factory(3)
    for host in lab3.hosts:  # the node of the issue: torch imports, numpy does not
        probe = "import torch\ntry:\n import numpy\nexcept ModuleNotFoundError:\n print('no numpy')"
        assert lab3.ssh(host, [lab3.python, "-c", probe], timeout=120).stdout.strip() == "no numpy"
    run_id = new_run_id()
    variables = {"nccl_check_args": CHECK_ARGS, "nccl_run_timeout": 240}
    undo = [lab3.rate_limit(host, LINK_RATE) for host in lab3.hosts]
    try:
        result = playbook(lab3, run_id, tmp_path, variables, "-e", "nccl_pairwise=always")
    finally:
        for step in undo:
            step()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "Numpy is not available" not in output
    report = tmp_path / run_id
    verdict = json.loads((report / "verdict.json").read_text())
    assert verdict["class"] == "passed" and verdict["findings"] == [], verdict
    validate(report)
    cases = {
        c.get("classname"): c
        for c in ET.parse(report / "junit.xml").getroot().iter("testcase")
        if c.get("classname", "").startswith("pairwise.")
    }
    assert sorted(cases) == sorted(f"pairwise.{label(h)}" for h in lab3.hosts)
    assert all(c.find("failure") is None and c.find("error") is None for c in cases.values())
    assert all(c.find("skipped") is None for c in cases.values())  # the rounds really ran
    doc = json.loads((report / "pairwise.json").read_text())
    assert doc["mode"] == "always" and {v["status"] for v in doc["verdicts"]} == {"ok"}, doc
    assert_nothing_left(run_id, lab3.hosts)
