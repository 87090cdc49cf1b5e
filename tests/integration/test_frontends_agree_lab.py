# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The same faults through both front-ends give the same findings (issue 27 item 5).

One 3-host lab with sshd and slurmd on every host (`Lab(3, slurm=True)`); each fault in turn is
run through validate.yml over SSH (`bin/nccl-preflight -i <lab inventory>`) and through
`bin/nccl-preflight slurm -N 3 --config FILE`, and the two runs must agree on the exit code, the
verdict's class and, for every finding of verdict.json, its class, host, rank, check (test) and
whether it is a consequence of another. Host names differ by front-end (the inventory lists
management addresses, Slurm knows the hostnames): both become node<i> in host order.

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.runs import QUICK, new_run_id

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "bin" / "nccl-preflight"
MASTER_PORT = 29500
RENAMED = "fabX"

pytestmark = pytest.mark.lab

# A fault: (what it does to the lab -> its undo, the variables both front-ends get on top).
Fault = tuple[Callable[[Lab], Callable[[], None]], dict[str, Any]]
FAULTS: dict[str, Fault] = {
    "healthy": (lambda lab: lambda: None, {}),
    "master firewall drops MASTER_PORT": (
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


def environment(lab: Lab) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(lab.slurm_env())
    env.update({"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"})
    return env


def run_ansible(lab: Lab, reports: Path, variables: dict[str, Any]) -> tuple[int, dict, str]:
    """bin/nccl-preflight -i <lab inventory>: (exit code, verdict.json, output)."""
    run_id = new_run_id()
    extra = {"nccl_run_id": run_id, "nccl_report_root": str(reports), **variables}
    argv = [sys.executable, str(WRAPPER), "-i", str(lab.inventory_dir), "-e", json.dumps(extra)]
    done = subprocess.run(
        argv, capture_output=True, text=True, env=environment(lab), cwd=ROOT, timeout=600
    )
    output = done.stdout + done.stderr
    verdict = reports / run_id / "verdict.json"
    assert verdict.is_file(), output[-3000:]
    return done.returncode, json.loads(verdict.read_text()), output


def run_slurm(lab: Lab, reports: Path, variables: dict[str, Any]) -> tuple[int, dict, str]:
    """bin/nccl-preflight slurm -N 3 --config FILE: (exit code, verdict.json, output)."""
    config = {
        # the lab inventory's group_vars that the Slurm front-end needs as well
        "nccl_fabric_cidr": lab.fabric_cidr,
        "nccl_backend": "gloo",
        "nccl_require_gpu": False,
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


def what_was_found(verdict: dict[str, Any], names: list[str]) -> list[tuple]:
    """(class, node<i>, rank, check, consequence) of every finding, host names made plain."""
    plain = {name: f"node{i}" for i, name in enumerate(names)}
    return sorted(
        (
            f["class"],
            plain.get(f["host"], f["host"]),
            f["rank"] if f["rank"] is not None else -1,
            f["test"],
            f["consequence"],
        )
        for f in verdict["findings"]
    )


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
    (a_code, a_verdict, a_out), (s_code, s_verdict, s_out) = ansible, slurm
    a_found = what_was_found(a_verdict, [h.inventory_name for h in both3.hosts])
    s_found = what_was_found(s_verdict, both3.slurm_nodes)
    said = f"validate.yml:\n{a_out[-2500:]}\nslurm:\n{s_out[-2500:]}"
    # the fault is what each front-end saw (a test that cannot pass vacuously)
    expected = {
        "healthy": ("passed", 0),
        "master firewall drops MASTER_PORT": ("preflight_failed", 10),
        "nccl_socket_ifname names no interface on one node": ("preflight_failed", 10),
    }[fault]
    assert (a_verdict["class"], a_code) == expected, said
    assert (s_verdict["class"], s_code) == (a_verdict["class"], a_code), said
    assert s_verdict["classes"] == a_verdict["classes"], said
    assert s_found == a_found, said
    if fault != "healthy":
        assert any(not f[4] for f in a_found), a_found  # at least one cause was named
