# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""More hosts than forks on the lab: the whole playbook with `-f 1`, real ansible-playbook over SSH.

With one fork Ansible runs the probe task on one host at a time: the master's listeners still wait
for the probes of the hosts after it when its own probe call ends. They are left running and
stopped by the task after every host's probes (roles/preflight/tasks/main.yml), so a healthy
cluster passes however the hosts are batched, and a port that is really closed still fails, on
the hosts that probe it, naming the port.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

import pytest

from nccl_preflight.core.text import safe_name
from tests.lab.fixtures import LabFactory
from tests.lab.harness import Lab
from tests.lab.runs import assert_nothing_left, label, playbook, validate

pytestmark = pytest.mark.lab

MASTER_PORT = 29500
SMALL_CHECK = ["--max-bytes", "65536", "--iters", "2", "--warmup", "1"]
STOP_TASK = "Stop the listeners that still waited for a peer's probe"


def tcp_cases(files: Iterable[Path]) -> dict[tuple[str, str], ET.Element]:
    """The pre-flight's tcp_master_port and tcp_ring test cases of the JUnit ``files``, by
    (classname, name)."""
    return {
        (case.get("classname"), case.get("name")): case
        for junit in files
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.get("name") in ("tcp_master_port", "tcp_ring")
    }


def stopped_late_on(output: str) -> list[str]:
    """The hosts the stop task after every host's probes ran on (not skipped)."""
    task = output.split(f"TASK [preflight : {STOP_TASK}", 1)[1].split("TASK [", 1)[0]
    return re.findall(r"^(?:ok|changed): \[([^\]]+)\]", task, re.MULTILINE)


def run_one_fork(lab: Lab, tmp_path: Path, *args: str) -> tuple[str, subprocess.CompletedProcess]:
    run_id = f"forks-{uuid.uuid4().hex[:8]}"
    extra = {"nccl_run_timeout": 60, "nccl_check_args": SMALL_CHECK}
    return run_id, playbook(lab, run_id, tmp_path, extra, "-f", "1", *args)


def test_a_healthy_lab_with_more_hosts_than_forks_passes(
    lab_factory: LabFactory, tmp_path: Path
) -> None:
    lab = lab_factory(3)
    run_id, result = run_one_fork(lab, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "preflight_collect_wait" not in output and "cannot open TCP" not in output
    master = lab.hosts[0].inventory_name
    # The master's listeners still waited for the later hosts' probes when its probe call ended.
    assert master in stopped_late_on(output), output

    report_dir = tmp_path / run_id
    verdict = json.loads((report_dir / "verdict.json").read_text())
    assert (verdict["class"], verdict["exit_code"]) == ("passed", 0), verdict
    assert verdict["totals"]["failures"] == 0 and verdict["totals"]["errors"] == 0
    validate(report_dir)
    # What a passed check saw is in the host's own file (junit.xml is lean: issue 37).
    junit = report_dir / "junit"
    cases = tcp_cases(junit / f"preflight-{safe_name(h.inventory_name)}.xml" for h in lab.hosts)
    for host in lab.hosts:
        for check in ("tcp_master_port", "tcp_ring"):
            case = cases[(f"preflight.{label(host)}", check)]
            assert case.find("failure") is None and case.find("skipped") is None, check
            assert "connected over TCP" in case.findtext("system-out", ""), check
    html = (report_dir / "report.html").read_text()
    assert "PASSED" in html.upper() and "cannot open TCP" not in html
    assert_nothing_left(run_id, lab.hosts)


def test_a_dropped_master_port_with_more_hosts_than_forks_fails_naming_it(
    lab_factory: LabFactory, tmp_path: Path
) -> None:
    lab = lab_factory(3)
    master = lab.hosts[0]
    undo = lab.firewall_drop(master, MASTER_PORT)
    try:
        run_id, result = run_one_fork(lab, tmp_path, "--tags", "preflight")
    finally:
        undo()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "preflight_collect_wait" not in output and "ended at their bound" not in output
    # The master's listener waited for probes that never came: stopped after every host's probes.
    assert master.inventory_name in stopped_late_on(output), output
    report_dir = tmp_path / run_id
    verdict = json.loads((report_dir / "verdict.json").read_text())
    assert verdict["class"] == "preflight_failed", verdict
    cases = tcp_cases([report_dir / "junit.xml"])
    for peer in lab.hosts[1:]:
        failure = cases[(f"preflight.{label(peer)}", "tcp_master_port")].find("failure")
        assert failure is not None, peer.inventory_name
        text = failure.get("message", "") + (failure.text or "")
        assert f":{MASTER_PORT}" in text and "timed out" in text, text
        ring = cases[(f"preflight.{label(peer)}", "tcp_ring")]
        assert ring.find("failure") is None, peer.inventory_name
    assert_nothing_left(run_id, lab.hosts)
