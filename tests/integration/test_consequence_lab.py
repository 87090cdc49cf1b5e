# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One cause, its consequences under it, on a 3-host lab with the whole playbook (issue 25, item 3).

A firewall fault on one host makes other hosts' probes fail too; those failures are consequences
of that host's firewall: verdict.json points them at it, report.html's headline names only the
host at fault and folds them under it, summary.md indents them under it, and the JUnit keeps
every testcase, a consequence saying of what. Nothing of the run is left on the hosts.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.junit import host_label
from tests.builders.lab_runs import ephemeral_range, headline, junit_cases, left_on_hosts, validate
from tests.jenkins_schema import validate_report_junit
from tests.lab.fixtures import LabFactory
from tests.lab.harness import Lab

pytestmark = pytest.mark.lab

MASTER_PORT = 29500


@pytest.fixture(scope="module")
def lab3(lab_factory: LabFactory) -> Lab:
    """A 3-host lab, as in the issue: a ring of three, so each host has its own neighbour."""
    return lab_factory(3)


def run_with_drop(lab: Lab, tmp_path: Path, host: int, port: int | tuple[int, int]) -> tuple:
    """The whole playbook with ``port`` dropped on hosts[host]; -> (result, report dir).

    The listeners behind the drop wait for probes that never come: preflight_collect_wait 1 s
    (not the default 8) hands them to the stop task after every host's probes sooner, which
    collects what they saw all the same; how they are collected is not under test here."""
    run_id = f"cause-{uuid.uuid4().hex[:8]}"
    undo = lab.firewall_drop(lab.hosts[host], port)
    try:
        result = validate(lab, tmp_path, run_id, preflight_collect_wait=1)
    finally:
        undo()
    return result, tmp_path / run_id, run_id


def assert_folded(
    lab: Lab, report_dir: Path, run_id: str, culprit: str, consequences: set[tuple[str, str]]
) -> dict[str, Any]:
    """verdict.json, report.html, summary.md and the JUnit fold ``consequences`` (host, check)
    under ``culprit``'s firewall, the only cause."""
    verdict = json.loads((report_dir / "verdict.json").read_text())
    assert verdict["class"] == "preflight_failed" and verdict["exit_code"] == 10
    causes = [f for f in verdict["findings"] if not f["consequence"]]
    assert [(f["host"], f["test"]) for f in causes] == [(culprit, "firewall")], causes
    pointer = {"id": f"{culprit}/firewall", "host": culprit, "test": "firewall"}
    linked = {(f["host"], f["test"]) for f in verdict["findings"] if f["rank"] is None}
    assert linked == consequences | {(culprit, "firewall")}
    assert all(f["cause"] == pointer for f in verdict["findings"] if f["consequence"])
    # Every planned rank never started, a consequence of the same firewall.
    ranks = [f for f in verdict["findings"] if f["rank"] is not None]
    assert sorted(f["rank"] for f in ranks) == list(range(len(lab.hosts)))

    assert headline(report_dir) == culprit
    html = (report_dir / "report.html").read_text()
    fold = html.split(f"consequence(s) of this firewall on {culprit}", 1)[1].split("</details>")[0]
    for host, check in consequences:
        assert host in fold and check in fold

    problems = (report_dir / "summary.md").read_text().split("Problems:", 1)[1].strip()
    top = [line for line in problems.splitlines() if line.startswith("- ")]
    assert len(top) == 1 and top[0].startswith(f"- preflight.{host_label(culprit)} firewall:")

    cases = junit_cases(report_dir / "junit.xml")
    of = f"(a consequence of {culprit}'s failed firewall check)"
    for host, check in consequences:
        failure = cases[(f"preflight.{host_label(host)}", check)].find("failure")
        assert failure is not None and of in failure.get("message", ""), (host, check)
    stopped = f"the run stopped at the pre-flight: {culprit} firewall: {culprit}: iptables"
    rank_errors = [c.find("error") for (n, _), c in cases.items() if n.startswith("nccl.")]
    assert len(rank_errors) == len(lab.hosts)
    assert all(e is not None and stopped in e.get("message", "") for e in rank_errors)
    validate_report_junit(report_dir)
    assert left_on_hosts(lab, run_id) == []
    return verdict


def test_a_host_dropping_its_own_ephemeral_range_is_the_only_one_failing(
    lab3: Lab, tmp_path: Path
) -> None:
    names = [h.inventory_name for h in lab3.hosts]
    result, report_dir, run_id = run_with_drop(lab3, tmp_path, 1, ephemeral_range(lab3, 1))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    # node1's probe of node2's ring listener, and node2's own probes (the replies to its
    # ephemeral ports are dropped): each says whose finding it is a consequence of.
    assert f"(a consequence of {names[1]}'s firewall)" in output
    consequences = {(names[0], "tcp_ring"), (names[1], "tcp_ring"), (names[1], "tcp_master_port")}
    assert_folded(lab3, report_dir, run_id, names[1], consequences)


def test_a_master_dropping_master_port_is_the_only_one_failing(lab3: Lab, tmp_path: Path) -> None:
    names = [h.inventory_name for h in lab3.hosts]
    result, report_dir, run_id = run_with_drop(lab3, tmp_path, 0, MASTER_PORT)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert f"(a consequence of {names[0]}'s firewall)" in output
    # Every host's probe of MASTER_PORT, the master's own included.
    consequences = {(name, "tcp_master_port") for name in names}
    assert_folded(lab3, report_dir, run_id, names[0], consequences)
