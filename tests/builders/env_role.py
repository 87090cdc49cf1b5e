# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/nccl_env through a real ansible-playbook on two DGX Spark-shaped hosts, and the nccl.env it
writes, read as the launch reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nccl_preflight.node.run_start import parse_env_file
from tests.playbook_run import run_play_with_facts

PLAYBOOK = """
- name: Fake the facts of two DGX Sparks
  hosts: nccl_nodes
  gather_facts: false
  tasks:
    - name: Set ansible_facts.nccl from the test's JSON
      ansible.builtin.set_fact:
        ansible_facts:
          nccl: "{{ (lookup('ansible.builtin.file', facts_file) | from_json)[inventory_hostname] }}"

- name: Validate and render
  hosts: nccl_nodes
  gather_facts: false
  roles:
    - role: nccl_defaults
    - role: validate_inputs
    - role: nccl_env
"""


def interface(name: str, address: str) -> dict:
    return {
        "name": name,
        "state": "up",
        "mtu": 1500,
        "speed_mbps": 200000,
        "kind": None,
        "ipv4": [{"address": address, "prefixlen": 24}],
        "ipv6": [],
        "rdma_devices": [],
    }


def spark(fabric_ifname: str, fabric_addr: str, mgmt_addr: str) -> dict:
    return {
        "hostname": "spark",
        "hostname_addresses": [],
        "module_python": sys.executable,
        "interfaces": {
            "lo": interface("lo", "127.0.0.1"),
            "enP7s7": interface("enP7s7", mgmt_addr),
            fabric_ifname: interface(fabric_ifname, fabric_addr),
        },
        "route": {},
        "route_reason": "",
        "gpus": [{"index": 0, "name": "NVIDIA GB10"}],
        "gpus_reason": "",
    }


def spark_facts() -> dict[str, dict]:
    """The two DGX Sparks' facts, cabled on differently named ports."""
    return {
        "spark-1": spark("enp1s0f0np0", "192.168.100.10", "10.20.0.5"),
        "spark-2": spark("enp1s0f1np1", "192.168.100.11", "10.20.0.6"),
    }


def run_playbook(
    tmp_path: Path,
    extra: dict,
    hostfile: str = "spark-1 slots=1\nspark-2\n",
    args: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    return run_play_with_facts(tmp_path, PLAYBOOK, "env", hostfile, spark_facts(), extra, args)


def read_env(path: Path) -> dict[str, str]:
    """nccl.env as the launch reads it (library/nccl_torchrun.py)."""
    return parse_env_file(path.read_text(), str(path))


def report_env(tmp_path: Path, host: str) -> Path:
    """Where the role keeps a host's nccl.env on the control machine."""
    return tmp_path / "reports" / "t1" / host / "nccl.env"
