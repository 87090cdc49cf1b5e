"""Per-host environment on the multi-host lab: separate management (SSH) and fabric networks.

Real ansible-playbook over SSH into network-namespace hosts whose fabric interfaces have different
names; the facts and environment plays only (`--tags facts`), then each host's nccl.env is read.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from nccl_torchrun import parse_env_file

from tests.lab.harness import Lab

pytestmark = pytest.mark.lab


def read_env(path: Path) -> dict[str, str]:
    """nccl.env as the launch reads it (library/nccl_torchrun.py)."""
    return parse_env_file(path.read_text(), str(path))


def test_master_addr_is_on_the_fabric_and_each_host_keeps_its_interface(lab4: Lab) -> None:
    run_id = f"envtest-{uuid.uuid4().hex[:8]}"
    run_dirs = [Path(f"/tmp/nccl-preflight-{run_id}-{h.inventory_name}") for h in lab4.hosts]
    try:
        result = lab4.ansible_playbook(
            "playbooks/validate.yml", "--tags", "facts", "-e", f"nccl_run_id={run_id}"
        )
        assert result.returncode == 0, result.stdout + result.stderr
        master = lab4.hosts[0]
        for rank, (host, run_dir) in enumerate(zip(lab4.hosts, run_dirs, strict=True)):
            env = read_env(run_dir / "nccl.env")
            assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == host.fabric_ifname
            # Not the SSH (management) address Ansible connects to: the fabric one.
            assert env["MASTER_ADDR"] == master.fabric_addr != master.mgmt_addr
            assert env["NODE_RANK"] == str(rank)
            assert env["NNODES"] == str(len(lab4.hosts))
        assert len({h.fabric_ifname for h in lab4.hosts}) > 1, "the lab must mix interface names"
    finally:
        for run_dir in run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
