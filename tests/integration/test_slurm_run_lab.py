# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""`bin/nccl-preflight slurm` on the lab's real Slurm (tests/lab/slurm.py): what a user sees (exit
code, output, JUnit, verdict.json) and that nothing is left on any node or in Slurm afterwards.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.runs import QUICK, leftovers, new_run_id, playbook

ROOT = Path(__file__).resolve().parents[2]
MASTER_PORT = 29500

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def slurm3(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(3, slurm=True)


def write_config(lab: Lab, path: Path, **extra: Any) -> Path:
    """The run's --config: the lab inventory's nccl_* values and the node Python."""
    values = {
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,
        "nccl_python": lab.python,
        "nccl_run_timeout": 120,
        "nccl_check_args": QUICK,
        **extra,
    }
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return path


def slurm_command(
    lab: Lab, tmp_path: Path, run_id: str, *args: str, **config: Any
) -> subprocess.CompletedProcess[str]:
    """bin/nccl-preflight slurm -N 3 on the lab, from the control machine (no allocation yet)."""
    cfg = write_config(lab, tmp_path / "nccl.yml", nccl_run_id=run_id, **config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(lab.slurm_env())
    argv = [
        sys.executable,
        str(ROOT / "bin" / "nccl-preflight"),
        "slurm",
        "-N",
        str(len(lab.hosts)),
    ]
    argv += ["--config", str(cfg), "--report-root", str(tmp_path / "reports"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)


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


def assert_nothing_left(lab: Lab, run_id: str, out: str) -> None:
    """No temporary directory or process of the run on any node, and the allocation released."""
    assert not [p for p in os.listdir("/tmp") if p.startswith(f"nccl-preflight-{run_id}-")]
    assert leftovers(run_id) == []
    job = re.search(r"on job (\d+)", out)
    assert job, out
    assert lab.slurm_wait_job(job.group(1)) in {"CANCELLED", "COMPLETED"}
    assert lab.slurm_cmd("squeue", "-h", "-o", "%i").stdout.split() == []
    lab.slurm_wait_idle()


def test_a_healthy_run_passes_with_the_ansible_paths_junit_shape(
    slurm3: Lab, tmp_path: Path
) -> None:
    run_id = new_run_id()
    done = slurm_command(slurm3, tmp_path, run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"nccl-preflight run {run_id}: PASSED" in done.stdout
    report = tmp_path / "reports" / run_id
    verdict = json.loads((report / "verdict.json").read_text())
    assert (verdict["class"], verdict["exit_code"]) == ("passed", 0)
    for name in ("junit.xml", "summary.md", "report.html", "plan.json"):
        assert (report / name).is_file(), name
    # node names as Slurm knows them
    assert sorted(p.name for p in (report / "preflight").iterdir()) == [
        f"{n}.json" for n in slurm3.slurm_nodes
    ]
    assert_nothing_left(slurm3, run_id, done.stdout)

    ansible_id = new_run_id()
    reports = tmp_path / "ansible-reports"
    extra = {"nccl_check_args": QUICK, "nccl_run_timeout": 120}
    ansible = playbook(slurm3, ansible_id, reports, extra)
    assert ansible.returncode == 0, ansible.stdout[-3000:]
    assert junit_shape(report, slurm3.slurm_nodes) == junit_shape(
        reports / ansible_id, [h.mgmt_addr for h in slurm3.hosts]
    )


def test_a_master_whose_firewall_drops_master_port_is_named(slurm3: Lab, tmp_path: Path) -> None:
    run_id = new_run_id()
    undo = slurm3.firewall_drop(slurm3.hosts[0], MASTER_PORT)
    try:
        done = slurm_command(slurm3, tmp_path, run_id)
    finally:
        undo()
    assert done.returncode == 10, done.stdout + done.stderr
    report = tmp_path / "reports" / run_id
    names = slurm3.slurm_nodes

    def result(i: int, check: str) -> dict[str, Any]:
        doc = json.loads((report / "preflight" / f"{names[i]}.json").read_text())
        return next(r for r in doc["results"] if r["check"] == check)

    fw = result(0, "firewall")
    assert fw["status"] == "failed" and "tcp/29500" in fw["message"], fw
    assert "MASTER_PORT" in fw["message"]
    for i in (1, 2):
        probe = result(i, "tcp_master_port")
        assert probe["status"] == "failed", probe
        assert f"{slurm3.hosts[0].fabric_addr}:{MASTER_PORT}" in probe["message"]
        assert probe["cause"] == {"host": names[0], "check": "firewall"}
    verdict = json.loads((report / "verdict.json").read_text())
    assert verdict["class"] == "preflight_failed"
    assert_nothing_left(slurm3, run_id, done.stdout)
