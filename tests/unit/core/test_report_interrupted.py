# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A run cut short from outside (Ctrl-C of the slurm command, scancel of its job): plan.json
says ``interrupted``, and the report still shows every planned rank, the lost ones as errors with
the reason, under the class no_verdict (core/verdict.py _interruption; slurm/run.py cut_short
writes what these tests build)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.builders.report import RunDir, report
from tests.jenkins_schema import validate_report_junit

WHY = "the slurm command was interrupted by SIGINT"


def interrupt(run: RunDir, **extra: object) -> None:
    """What slurm/run.py cut_short adds to plan.json."""
    path = run.dir / "plan.json"
    plan = json.loads(path.read_text())
    path.write_text(json.dumps({**plan, "interrupted": WHY, **extra}))


def stopped_launch(run: RunDir, host: str) -> None:
    """cut_short's launch.json of a node that sent nothing back."""
    (run.host_dir(host) / "launch.json").write_text(
        json.dumps({"stopped_by": WHY, "cut_short": True, "rc": None})
    )


def rank_errors(run: RunDir) -> dict[str, str]:
    """{testcase classname.name: error message} of the merged JUnit."""
    root = ET.parse(run.dir / "junit.xml").getroot()
    return {
        f"{case.get('classname')}.{case.get('name')}": error.get("message") or ""
        for case in root.iter("testcase")
        for error in case.iter("error")
    }


def half_done(tmp_path: Path) -> RunDir:
    """node1's rank finished and passed; node2 sent nothing back before the interruption."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1).plan()
    run.preflight("node1").preflight("node2")
    run.launch("node1").rank("node1", 0)
    stopped_launch(run, "node2")
    return run


def test_a_run_cut_short_mid_launch_has_no_verdict_and_names_the_lost_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = half_done(tmp_path)
    interrupt(run)
    verdict = report(run, capsys)
    assert (verdict["class"], verdict["exit_code"]) == ("no_verdict", 1)
    head, *rest = verdict["findings"]
    assert head["id"] == "run/interrupted" and not head["consequence"]
    assert WHY in head["what"]
    # rank 1 (node2) is lost because of it: a consequence pointing at it, not a head of its own
    lost = [f for f in rest if f["host"] == "node2"]
    assert lost and all(f["consequence"] and f["cause"]["id"] == "run/interrupted" for f in lost)
    assert not [f for f in rest if f["host"] == "node1"]
    errors = rank_errors(run)
    assert any(
        "node2" in k and f"rank 1 on node2 sent no result back: the run was cut short ({WHY})" in v
        for k, v in errors.items()
    )
    validate_report_junit(run.dir)


def test_the_same_run_not_interrupted_is_a_lost_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without plan.json's interrupted, the same files judge as rank_lost: the class above comes
    from the interruption, not from the lost rank."""
    run = half_done(tmp_path)
    verdict = report(run, capsys)
    assert verdict["class"] == "rank_lost"
    assert all(f["id"] != "run/interrupted" for f in verdict["findings"])


def test_a_run_cut_short_before_launch_lists_its_nodes_and_has_no_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted in the observe step: cut_short's plan.json has only the nodes."""
    run = RunDir(tmp_path, ["node1", "node2"], nproc=1)
    hosts = [{"host": h, "reachable": True} for h in run.hosts]
    plan = {"run_id": run.run_id, "front_end": "slurm", "hosts": hosts, "launch_skipped": WHY}
    (run.dir / "plan.json").write_text(json.dumps(plan))
    interrupt(run)
    verdict = report(run, capsys)
    assert (verdict["class"], verdict["exit_code"]) == ("no_verdict", 1)
    assert verdict["findings"][0]["id"] == "run/interrupted"
    validate_report_junit(run.dir)
