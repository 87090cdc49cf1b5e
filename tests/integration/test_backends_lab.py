# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl_backend: auto on the lab, end to end over SSH: one host is an Ascend node (a stand-in
npu-smi replaying a transcribed 910B2 table, and the stand-in torch_npu on its Python's path;
both test doubles in tests/integration/doubles/, never shipped), the other a plain CPU host.

The facts and environment plays run for real (--tags facts: nothing launched, nccl.env written
for every host on the control machine). The master (node rank 0) has the NPUs, so every rank is
to run hccl, each host's nccl.env carries HCCL_SOCKET_IFNAME / HCCL_IF_IP of its own fabric link,
and each says what that host found and chose.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path

import pytest

from nccl_preflight.node.run_start import parse_env_file
from tests.lab.harness import SBIN_PATH

pytestmark = pytest.mark.lab
DOUBLES = Path(__file__).resolve().parent / "doubles"
RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "npu-smi" / "910b2-info.txt"


def npu_smi_bin(root: Path) -> Path:
    """<root>/bin/npu-smi: runs the double (root must be readable by the lab's SSH user)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    tool = bin_dir / "npu-smi"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLES / "npu_smi_double.py"}" "$@"\n')
    tool.chmod(0o755)
    root.chmod(0o755)
    return bin_dir


def test_auto_chooses_hccl_on_the_ascend_master_and_says_why_per_host(
    lab_factory, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    bin_dir = npu_smi_bin(tmp_path_factory.mktemp("npu-double"))
    host_env = {
        0: {
            "PATH": f"{bin_dir}:{SBIN_PATH}",
            "NPU_SMI_REPLAY": str(RECORDING),
            "PYTHONPATH": str(DOUBLES),  # the stand-in torch_npu
        },
        1: {"PYTHONPATH": str(DOUBLES)},  # torch_npu importable, but no npu-smi, no NPU
    }
    lab = lab_factory(2, host_env=host_env)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    variables = {"nccl_run_id": run_id, "nccl_report_root": str(tmp_path), "nccl_backend": "auto"}
    proc = lab.ansible_playbook(
        "playbooks/validate.yml", "--tags", "facts", "-e", json.dumps(variables), timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]

    master, other = lab.hosts[0], lab.hosts[1]
    texts = {
        h.rank: (tmp_path / run_id / h.inventory_name / "nccl.env").read_text() for h in lab.hosts
    }
    for host in (master, other):
        env = parse_env_file(texts[host.rank], host.inventory_name)
        assert env["HCCL_SOCKET_IFNAME"] == host.fabric_ifname == env["NCCL_SOCKET_IFNAME"]
        assert env["HCCL_IF_IP"] == host.fabric_addr
    # (the lab's hostfile says slots=1: NPU chips as ranks per node are in test_accelerators.py)
    assert (
        "# Backend hccl (the master's choice; nccl_backend auto). This host: hccl, 2 Ascend NPU "
        "chip(s) on 2 card(s) (npu-smi 25.2.0: 2 x 910B2): hccl"
    ) in texts[0]
    # the CPU host says what it lacks: no nvidia-smi, no npu-smi, and no Intel GPU on its PCI
    # bus (this machine's: torch is not asked for XPUs there)
    line = next(x for x in texts[1].splitlines() if x.startswith("# Backend hccl"))
    assert "This host: gloo, no NVIDIA GPU (nvidia-smi not found on PATH" in line
    assert "no Ascend NPU (npu-smi not found on PATH; no Ascend driver tools here)" in line
    assert "no Intel XPU (not asked: no Intel GPU on the PCI bus" in line


def test_the_npu_preflight_reads_the_stand_ins_and_says_what_is_missing(
    lab_factory, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """Same lab: the pre-flight's real torch probe imports the stand-in torch_npu (version
    2.13.0.standin, made for this torch 2.13.0) and finds no torch.npu: the npu check fails
    saying so, as on a node whose torch_npu cannot see its NPUs; the CPU host has no NPU."""
    bin_dir = npu_smi_bin(tmp_path_factory.mktemp("npu-double-preflight"))
    host_env = {
        0: {"PATH": f"{bin_dir}:{SBIN_PATH}", "NPU_SMI_REPLAY": str(RECORDING)},
        1: {"PYTHONPATH": str(DOUBLES)},
    }
    host_env[0]["PYTHONPATH"] = str(DOUBLES)
    lab = lab_factory(2, host_env=host_env)
    run_id = time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
    variables = {"nccl_run_id": run_id, "nccl_report_root": str(tmp_path), "nccl_backend": "auto"}
    # A firewall on the CPU host drops HCCL's host port (HCCL_IF_BASE_PORT, default 60000).
    undo = lab.firewall_drop(lab.hosts[1], 60000)
    try:
        proc = lab.ansible_playbook(
            "playbooks/validate.yml",
            "--tags",
            "preflight",
            "-e",
            json.dumps(variables),
            timeout=600,
        )
    finally:
        undo()
    assert proc.returncode != 0  # the NPU checks fail: nothing here can run HCCL

    def result(rank: int, check: str) -> dict:
        doc = json.loads(
            (tmp_path / run_id / "preflight" / f"{lab.hosts[rank].inventory_name}.json").read_text()
        )
        return next(r for r in doc["results"] if r["check"] == check)

    master, other = lab.hosts[0].inventory_name, lab.hosts[1].inventory_name
    npu = result(0, "npu")
    assert npu["status"] == "failed", npu
    assert npu["message"].startswith(f"{master}: torch_npu 2.13.0.standin sees no NPU: ")
    assert "torch.npu failed: AttributeError" in npu["message"]
    # the double has no board recording of this 910B2: the firmware is unknown, with the reason
    model = result(0, "npu_model")["message"]
    assert model.startswith(
        f"{master}: 910B2, npu-smi 25.2.0, like the other hosts; firmware unknown: {bin_dir}/"
        "npu-smi info -t board -i 0 failed (rc=2): "
    ), model
    assert "'info -t board -i 0' not recorded" in model
    assert result(1, "npu") == {
        "check": "npu",
        "host": other,
        "status": "failed",
        "message": f"{other}: no NPU found: npu-smi not found on PATH; no Ascend driver tools here",
        "hint": f"npu-smi info  (on {other}); install/load the Ascend driver",
    }
    assert result(0, "hccl_ports")["status"] in ("passed", "failed")
    assert "HCCL's host ports 60000-60015" in result(0, "hccl_ports")["message"]
    assert result(0, "gpu")["status"] == "skipped"  # GPU checks: the backend is hccl
    # HCCL's port: the master's probe of the CPU host is dropped, named with the port
    dropped = result(0, "tcp_hccl_port")
    assert dropped["status"] == "failed", dropped
    assert dropped["message"].startswith(
        f"{master}: cannot open TCP to {other} at {lab.hosts[1].fabric_addr}:60000 (HCCL's host "
        "port, HCCL_IF_BASE_PORT 60000)"
    ), dropped
    assert "packets are dropped" in dropped["message"]
    why = "it found no Ascend NPU and would not use hccl; see backend_choice"  # auto: no listener
    assert f"{other} has no HCCL listener: {why}" in dropped["message"], dropped
    assert result(1, "tcp_hccl_port")["status"] == "passed"
    assert "60000" in result(1, "firewall")["message"], result(1, "firewall")
    # auto: the CPU host would choose gloo, the Ascend master hccl, and every rank runs hccl
    assert result(0, "backend_choice")["status"] == "passed"
    odd = result(1, "backend_choice")
    assert odd["status"] == "failed", odd
    assert odd["message"].startswith(f"{other} found no NVIDIA GPU (")
    assert (
        "and would use gloo; the others chose hccl (the master "
        f"{master}: 2 Ascend NPU chip(s) on 2 card(s) (npu-smi 25.2.0: 2 x 910B2))"
    ) in odd["message"]
