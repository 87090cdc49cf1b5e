# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""--check is a dry run: the pre-flight's read-only parts (src/nccl_preflight/node/read_only.py)
and the report marked as check mode (nccl_report run_check_mode)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nccl_report
import pytest
from ansible.module_utils.nccl_preflight.node.read_only import probe_python_read_only, would_start
from ansible.module_utils.testing import patch_module_args

from tests.jenkins_schema import validate_report_junit


def test_the_start_says_what_it_would_change() -> None:
    text = would_start(
        {
            "run_dir": "/tmp/nccl-preflight-R-node1",
            "run_dir_mode": "0700",
            "lock": {"path": "/tmp/nccl-preflight-lock-10.0.0.11-29500.json"},
            "listeners": [
                {"name": "master", "address": "10.0.0.11", "port": 29500},
                {"name": "ring", "address": "10.0.0.11", "port": 0},
            ],
            "python": "/usr/bin/python3",
        }
    )
    assert text.startswith("check mode: would make the run directory /tmp/nccl-preflight-R-node1")
    assert "take the run lock /tmp/nccl-preflight-lock-10.0.0.11-29500.json" in text
    assert "listen on 10.0.0.11:29500 (master)" in text
    assert "10.0.0.11:<an ephemeral port> (ring)" in text
    assert would_start({}) == "check mode: would do nothing"


def test_the_torch_probe_runs_read_only_in_the_foreground(tmp_path: Path) -> None:
    missing = probe_python_read_only(str(tmp_path / "no-python"), 5)
    assert missing["torch_version"] is None and "cannot run" in missing["reason"]
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 5\n")
    fake.chmod(0o755)
    slow = probe_python_read_only(str(fake), 0.2)
    assert "did not finish in 0.2 s" in slow["reason"]
    real = probe_python_read_only(sys.executable, 120)
    assert real["executable"] == sys.executable and real["version"]


def test_the_report_of_a_check_mode_run_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "R1"
    (run / "preflight").mkdir(parents=True)
    (run / "preflight" / "node1.json").write_text(
        json.dumps(
            {
                "host": "node1",
                "results": [
                    {"check": "interface", "host": "node1", "status": "passed", "message": "ok"},
                    {"check": "tcp_ring", "host": "node1", "status": "skipped", "message": "cm"},
                ],
            }
        )
    )
    args = {
        "report_root": str(tmp_path),
        "run_id": "R1",
        "ranks_launched": False,
        "run_check_mode": True,
    }
    with patch_module_args(args), pytest.raises(SystemExit):
        nccl_report.main()
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "passed" and result["check_mode"] is True
    summary = (run / "summary.md").read_text()
    assert summary.startswith("# nccl-preflight run R1: PASSED (check mode)")
    assert "nothing was started or written on the nodes" in summary
    assert 'name="nccl-preflight R1 (check mode)"' in (run / "junit.xml").read_text()
    validate_report_junit(run)
