# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The whole playbook on the lab when something is wrong: the verdict and the JUnit still arrive.

A pre-flight failure skips the launch (it would only wait for the timeout) and every rank says why;
an unreachable host is an error for that host. Either way the play exits non-zero, the merged JUnit
is complete and valid against the Jenkins schema.
"""

from __future__ import annotations

import subprocess
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nccl_preflight.core.junit import host_label
from tests.jenkins_schema import validate_report_junit
from tests.lab.harness import Lab
from tests.lab.runs import inventory_with_unreachable_host
from tests.playbook_run import ansible_playbook

pytestmark = pytest.mark.lab

MASTER_PORT = 29500
SMALL_CHECK = '{"nccl_check_args": ["--max-bytes", "65536", "--iters", "2", "--warmup", "1"]}'


def validate(
    inventory: Path, report_root: Path, run_id: str | None, *extra: str
) -> subprocess.CompletedProcess:
    """The whole playbook; without a run id it makes its own, as for a user (reports/latest)."""
    run_id_args = ["-e", f"nccl_run_id={run_id}"] if run_id else []
    return ansible_playbook(
        "-i",
        str(inventory),
        "playbooks/validate.yml",
        *run_id_args,
        "-e",
        f"nccl_report_root={report_root}",
        "-e",
        "nccl_run_timeout=60",
        "-e",
        SMALL_CHECK,
        *extra,
        timeout=400,
    )


def junit_cases(junit: Path) -> dict[tuple[str, str], ET.Element]:
    root = ET.parse(junit).getroot()
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def test_preflight_failure_skips_the_launch_and_every_rank_says_why(
    lab2: Lab, tmp_path: Path
) -> None:
    master = lab2.hosts[0]
    undo = lab2.firewall_drop(master, MASTER_PORT)
    try:
        # No -e nccl_run_id: the run makes its own, as when a user runs it. The listener behind
        # the drop waits for probes that never come: 1 s of preflight_collect_wait (not 8), then
        # the stop task after every probe collects it all the same (not under test here).
        result = validate(lab2.inventory_dir, tmp_path, None, "-e", "preflight_collect_wait=1")
    finally:
        undo()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "FAILED" in output and master.inventory_name in output

    report_dir = (tmp_path / "latest").resolve()
    run_id = report_dir.name
    assert run_id != "latest" and report_dir.is_dir()
    cases = junit_cases(report_dir / "junit.xml")
    firewall = cases[(f"preflight.{host_label(master.inventory_name)}", "firewall")]
    failure = firewall.find("failure")
    assert failure is not None
    assert str(MASTER_PORT) in failure.get("message", "") + (failure.text or "")
    # Both hosts' ranks are in the JUnit, as errors that name the stage and the cause.
    rank_errors = [
        case.find("error")
        for (classname, _), case in cases.items()
        if classname.startswith("nccl.") and case.find("error") is not None
    ]
    assert len({c for c, _ in cases if c.startswith("nccl.")}) == len(lab2.hosts)
    stopped = f"the run stopped at the pre-flight: {master.inventory_name} firewall: "
    assert rank_errors and all(stopped in e.get("message", "") for e in rank_errors)
    validate_report_junit(report_dir)
    # Nothing of the run is left on the nodes.
    assert not [p for p in Path("/tmp").glob(f"nccl-preflight-{run_id}-*")]


def test_unreachable_host_is_an_error_for_that_host(lab2: Lab, tmp_path: Path) -> None:
    # The lab's inventory plus a third node at an address of the lab's own management network
    # where nothing answers.
    inventory, ghost = inventory_with_unreachable_host(lab2, tmp_path, 99)
    run_id = f"verdict-{uuid.uuid4().hex[:8]}"
    result = validate(inventory, tmp_path, run_id)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output

    report_dir = tmp_path / run_id
    cases = junit_cases(report_dir / "junit.xml")
    ghost_errors = [
        case.find("error")
        for (classname, _), case in cases.items()
        if host_label(ghost) in classname and case.find("error") is not None
    ]
    assert ghost_errors, sorted(cases)
    assert any("unreachable" in (e.get("message", "") + (e.text or "")) for e in ghost_errors)
    # The reachable hosts' ranks did not start (static rendezvous needs every node) and say so.
    for host in lab2.hosts:
        mine = [
            case
            for (c, _), case in cases.items()
            if c.startswith(f"nccl.{host_label(host.inventory_name)}.")
        ]
        assert mine and all(case.find("error") is not None for case in mine)
    validate_report_junit(report_dir)
