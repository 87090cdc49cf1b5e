# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Per-host environment on the multi-host lab: separate management (SSH) and fabric networks.

Real ansible-playbook over SSH into network-namespace hosts whose fabric interfaces have different
names; the facts and environment plays only (`--tags facts`). Each host's nccl.env is read where
the environment play keeps it, on the control machine (reports/<run-id>/<host>/nccl.env): the
play makes no call on the nodes, so no run directory may exist on them afterwards.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from nccl_preflight.node.run_start import parse_env_file
from tests.lab.harness import Lab

pytestmark = pytest.mark.lab


def read_env(path: Path) -> dict[str, str]:
    """nccl.env as the launch reads it (library/nccl_torchrun.py)."""
    return parse_env_file(path.read_text(), str(path))


def test_master_addr_is_on_the_fabric_and_each_host_keeps_its_interface(
    lab4: Lab, tmp_path: Path
) -> None:
    run_id = f"envtest-{uuid.uuid4().hex[:8]}"
    # The lab's hosts share this machine's file system: a run directory would show up here.
    run_dirs = [Path(f"/tmp/nccl-preflight-{run_id}-{h.inventory_name}") for h in lab4.hosts]
    variables = {"nccl_run_id": run_id, "nccl_report_root": str(tmp_path)}
    try:
        result = lab4.ansible_playbook(
            "playbooks/validate.yml", "--tags", "facts", "-e", json.dumps(variables)
        )
        assert result.returncode == 0, result.stdout + result.stderr
        master = lab4.hosts[0]
        for rank, host in enumerate(lab4.hosts):
            env_path = tmp_path / run_id / host.inventory_name / "nccl.env"
            env = read_env(env_path)
            assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == host.fabric_ifname
            # Not the SSH (management) address Ansible connects to: the fabric one.
            assert env["MASTER_ADDR"] == master.fabric_addr != master.mgmt_addr
            assert env["NODE_RANK"] == str(rank)
            assert env["NNODES"] == str(len(lab4.hosts))
            assert env_path.stat().st_mode & 0o777 == 0o600
        assert len({h.fabric_ifname for h in lab4.hosts}) > 1, "the lab must mix interface names"
        assert sorted(p.name for p in (tmp_path / run_id).iterdir()) == sorted(
            h.inventory_name for h in lab4.hosts
        )
        # The nodes were left alone: the launch's start call would make the run directory.
        assert [d for d in run_dirs if d.exists()] == []
    finally:
        for run_dir in run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
