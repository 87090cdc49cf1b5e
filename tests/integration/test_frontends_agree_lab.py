# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The same faults through both front-ends give the same findings (issue 27 item 5).

One 3-host lab with sshd and slurmd on every host (`Lab(3, slurm=True)`); each fault in turn is
run through validate.yml over SSH (`bin/nccl-preflight -i <lab inventory> -f 1`) and through
`bin/nccl-preflight slurm -N 3 --config FILE`, and the two runs must agree on the exit code, the
verdict's class and, for every finding of verdict.json, its class, host, rank, check (test) and
whether it is a consequence of another. Host names differ by front-end (the inventory lists
management addresses, Slurm knows the hostnames): both become node<i> in host order.

validate.yml runs with one fork (more hosts than forks): Ansible then runs the probe task on one
host at a time, so the master's listeners still wait for the probes of the hosts after it when
its own probe call ends. They are left running and stopped by the task after every host's probes
(roles/preflight/tasks/main.yml): a healthy cluster passes however the hosts are batched, and a
port that is really closed still fails, on the hosts that probe it, naming the port.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core.text import safe_name
from tests.builders.lab_runs import assert_folded, stopped_late_on, tcp_cases
from tests.builders.lab_slurm import ROOT, Run, assert_agree, assert_nothing_left, environment
from tests.builders.lab_slurm import launch_records as slurm_launch_records
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.runs import QUICK, label, new_run_id
from tests.lab.runs import assert_nothing_left as assert_nothing_left_by_ansible

WRAPPER = ROOT / "bin" / "nccl-preflight"
MASTER_PORT = 29500
RENAMED = "fabX"

pytestmark = pytest.mark.lab

# A fault: (what it does to the lab -> its undo, the variables both front-ends get on top).
Fault = tuple[Callable[[Lab], Callable[[], None]], dict[str, Any]]
MASTER_DROP = "master firewall drops MASTER_PORT"
FAULTS: dict[str, Fault] = {
    MASTER_DROP: (
        lambda lab: lab.firewall_drop(lab.hosts[0], MASTER_PORT),
        {},
    ),
    "nccl_socket_ifname names no interface on one node": (
        lambda lab: lab.rename_interface(lab.hosts[2], RENAMED),
        {"nccl_fabric_cidr": "", "nccl_socket_ifname": "@fabric_ifname"},
    ),
}


@pytest.fixture(scope="module")
def both3(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(3, slurm=True)


def common_variables(lab: Lab, extra: dict[str, Any]) -> dict[str, Any]:
    """What both front-ends get beyond the lab inventory's group_vars."""
    values = {"nccl_run_timeout": 120, "nccl_check_args": QUICK, **extra}
    if values.get("nccl_socket_ifname") == "@fabric_ifname":
        values["nccl_socket_ifname"] = lab.hosts[0].fabric_ifname
    return values


def run_ansible(lab: Lab, reports: Path, variables: dict[str, Any]) -> Run:
    """bin/nccl-preflight -i <lab inventory>: (exit code, verdict.json, output)."""
    run_id = new_run_id()
    extra = {"nccl_run_id": run_id, "nccl_report_root": str(reports), **variables}
    argv = [sys.executable, str(WRAPPER), "-i", str(lab.inventory_dir), "-e", json.dumps(extra)]
    argv += ["-f", "1"]  # more hosts than forks (the module's docstring)
    done = subprocess.run(
        argv, capture_output=True, text=True, env=environment(lab), cwd=ROOT, timeout=600
    )
    output = done.stdout + done.stderr
    verdict = reports / run_id / "verdict.json"
    assert verdict.is_file(), output[-3000:]
    return done.returncode, json.loads(verdict.read_text()), output


def run_slurm(lab: Lab, reports: Path, variables: dict[str, Any]) -> Run:
    """bin/nccl-preflight slurm -N 3 --config FILE: (exit code, verdict.json, output)."""
    config = {
        # the lab inventory's group_vars that the Slurm front-end needs as well
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,  # the lab has no GPU: a CPU run, said so
        "nccl_python": lab.python,
        **variables,
    }
    reports.mkdir(parents=True)
    path = reports / "nccl.yml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
    argv = [sys.executable, str(WRAPPER), "slurm", "-N", str(len(lab.hosts)), "--config"]
    argv += [str(path), "--report-root", str(reports)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=environment(lab), cwd=ROOT, timeout=600
    )
    output = done.stdout + done.stderr
    verdicts = [p for p in reports.glob("*/verdict.json") if p.parent.name != "latest"]
    assert len(verdicts) == 1, output[-3000:]
    return done.returncode, json.loads(verdicts[0].read_text()), output


def junit_shape(report: Path, names: list[str]) -> dict[str, list[tuple[str, str]]]:
    """{file: [(suite, testcase)]} of a report's junit/, each host's name as node<i>."""

    def plain(text: str) -> str:
        for i, name in enumerate(names):
            text = text.replace(name.replace(".", "_"), f"node{i}").replace(name, f"node{i}")
        return text

    shape = {}
    for path in sorted((report / "junit").glob("*.xml")):
        root = ET.parse(path).getroot()
        shape[plain(path.name)] = sorted(
            (plain(suite.get("name", "")), plain(case.get("name", "")))
            for suite in root.iter("testsuite")
            for case in suite.iter("testcase")
        )
    return shape


def clock_cases(report: Path) -> list[str]:
    """Each host's "clock" testcase in the report's pre-flight JUnit: passed, skipped or failed."""
    found = []
    for path in sorted((report / "junit").glob("preflight-*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.get("name") == "clock":
                kinds = [child.tag for child in case if child.tag in ("skipped", "failure")]
                found.append(kinds[0] if kinds else "passed")
    return found


@pytest.mark.parametrize("fault", list(FAULTS))
def test_both_front_ends_find_the_same(both3: Lab, tmp_path: Path, fault: str) -> None:
    inject, extra = FAULTS[fault]
    variables = common_variables(both3, extra)
    undo = inject(both3)
    try:
        ansible = run_ansible(both3, tmp_path / "ansible", variables)
        slurm = run_slurm(both3, tmp_path / "slurm", variables)
    finally:
        undo()
    found = assert_agree(both3, ansible, slurm, ("preflight_failed", 10))
    assert any(not f[4] for f in found), found  # at least one cause was named
    if fault == MASTER_DROP:
        assert_the_master_port_drop_is_named(both3, tmp_path / "slurm", slurm)
        # validate.yml's run: every host's probe of MASTER_PORT (the master's own too) is a
        # consequence of the master's firewall, folded under it in every file, and said so
        # in the play's output.
        _, verdict, output = ansible
        master = both3.hosts[0].inventory_name
        assert f"(a consequence of {master}'s firewall)" in output
        consequences = {(h.inventory_name, "tcp_master_port") for h in both3.hosts}
        run_id = verdict["run_id"]
        assert_folded(both3, tmp_path / "ansible" / run_id, run_id, master, consequences)
        assert_one_fork_names_the_dropped_port(both3, tmp_path / "ansible" / run_id, output)


def assert_one_fork_names_the_dropped_port(lab: Lab, report: Path, output: str) -> None:
    """With one fork, the master's listener waited for probes that never came: it was stopped
    after every host's probes, and each peer's probe of MASTER_PORT failed naming the port."""
    assert "preflight_collect_wait" not in output and "ended at their bound" not in output
    assert lab.hosts[0].inventory_name in stopped_late_on(output), output[-4000:]
    cases = tcp_cases([report / "junit.xml"])
    for peer in lab.hosts[1:]:
        failure = cases[(f"preflight.{label(peer)}", "tcp_master_port")].find("failure")
        assert failure is not None, peer.inventory_name
        text = failure.get("message", "") + (failure.text or "")
        assert f":{MASTER_PORT}" in text and "timed out" in text, text
        ring = cases[(f"preflight.{label(peer)}", "tcp_ring")]
        assert ring.find("failure") is None, peer.inventory_name


def assert_the_master_port_drop_is_named(lab: Lab, reports: Path, slurm: Run) -> None:
    """The Slurm run of MASTER_DROP: the master's firewall names tcp/29500 as MASTER_PORT, the
    other nodes' probes of it fail with that firewall as their cause; nothing is left (what
    test_slurm_run_lab asserted of its own run of this fault)."""
    _, verdict, out = slurm
    names, report = lab.slurm_nodes, reports / verdict["run_id"]

    def result(i: int, check: str) -> dict[str, Any]:
        doc = json.loads((report / "preflight" / f"{names[i]}.json").read_text())
        return next(r for r in doc["results"] if r["check"] == check)

    fw = result(0, "firewall")
    assert fw["status"] == "failed" and f"tcp/{MASTER_PORT}" in fw["message"], fw
    assert "MASTER_PORT" in fw["message"]
    for i in (1, 2):
        probe = result(i, "tcp_master_port")
        assert probe["status"] == "failed", probe
        assert f"{lab.hosts[0].fabric_addr}:{MASTER_PORT}" in probe["message"]
        assert probe["cause"] == {"host": names[0], "check": "firewall"}
    assert verdict["class"] == "preflight_failed"
    assert_nothing_left(lab, verdict["run_id"], out)


def test_a_healthy_run_passes_alike_through_both_front_ends(both3: Lab, tmp_path: Path) -> None:
    """No fault: both pass with the same classes and the same JUnit shape (files, suites,
    testcases, host names made plain); the Slurm run imports torch once per node, names the
    nodes as Slurm knows them and leaves nothing on any node or in Slurm. preflight_clock_check
    (--config on the Slurm side) reaches both judgements: the lab's clocks agree."""
    variables = common_variables(both3, {"preflight_clock_check": True})
    ansible = run_ansible(both3, tmp_path / "ansible", variables)
    slurm = run_slurm(both3, tmp_path / "slurm", variables)
    assert assert_agree(both3, ansible, slurm, ("passed", 0)) == []
    (_, a_verdict, _), (_, s_verdict, s_out) = ansible, slurm
    a_report = tmp_path / "ansible" / a_verdict["run_id"]
    s_report = tmp_path / "slurm" / s_verdict["run_id"]
    assert f"nccl-preflight run {s_verdict['run_id']}: PASSED" in s_out
    assert clock_cases(s_report) == clock_cases(a_report) == ["passed"] * 3
    assert s_verdict["exit_code"] == 0
    for name in ("junit.xml", "summary.md", "report.html", "plan.json"):
        assert (s_report / name).is_file(), name
    # torch imported once per node: the observe step's torch probe became its torchrun
    launched = slurm_launch_records(s_report, both3.slurm_nodes)
    assert {n: (d["warm_start"], d["rc"]) for n, d in launched.items()} == {
        n: (True, 0) for n in both3.slurm_nodes
    }
    # node names as Slurm knows them
    assert sorted(p.name for p in (s_report / "preflight").iterdir()) == [
        f"{n}.json" for n in both3.slurm_nodes
    ]
    assert_nothing_left(both3, s_verdict["run_id"], s_out)
    assert junit_shape(s_report, both3.slurm_nodes) == junit_shape(
        a_report, [h.mgmt_addr for h in both3.hosts]
    )
    # validate.yml with one fork: the master's listeners still waited for the later hosts'
    # probes when its probe call ended; stopped after every host's probes, they saw every probe.
    a_out = ansible[2]
    assert "preflight_collect_wait" not in a_out and "cannot open TCP" not in a_out
    assert both3.hosts[0].inventory_name in stopped_late_on(a_out), a_out[-4000:]
    junit = a_report / "junit"
    cases = tcp_cases(junit / f"preflight-{safe_name(h.inventory_name)}.xml" for h in both3.hosts)
    for host in both3.hosts:
        for check in ("tcp_master_port", "tcp_ring"):
            case = cases[(f"preflight.{label(host)}", check)]
            assert case.find("failure") is None and case.find("skipped") is None, check
            assert "connected over TCP" in case.findtext("system-out", ""), check
    assert "cannot open TCP" not in (a_report / "report.html").read_text()
    assert_nothing_left_by_ansible(a_verdict["run_id"], both3.hosts)
