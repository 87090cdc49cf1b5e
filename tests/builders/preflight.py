# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight judge's input: a cluster's facts, torch probes and observations per host."""

from __future__ import annotations

HOSTS = ["node1", "node2", "node3", "node4"]


def facts(i: int, addr: str) -> dict:
    """What nccl_facts reads on a healthy host i: one 100G interface, no GPU, torch 2.13.0."""
    return {
        "hostname": f"node{i}",
        "hostname_addresses": [addr],
        "interfaces": {
            "lo": {"name": "lo", "state": "unknown", "mtu": 65536, "ipv4": [], "ipv6": []},
            "enp1s0f0np0": {
                "name": "enp1s0f0np0",
                "state": "up",
                "mtu": 9000,
                "speed_mbps": 100000,
                "kind": None,
                "ipv4": [{"address": addr, "prefixlen": 24}],
                "ipv6": [],
            },
        },
        "ip_local_port_range": [32768, 60999],
        "gpus": [],
        "gpus_reason": "nvidia-smi not found",
        "python": {
            "executable": "/usr/bin/python3",
            "version": "3.11.7",
            "torch_version": "2.13.0",
            "cuda_available": False,
            "cuda_version": None,
            "nccl_version": None,
            "device_count": 0,
            "reason": "",
        },
    }


def probes(i: int, addr: str) -> list[dict]:
    """Host i's TCP probes, both answered: MASTER_PORT on node1 and its ring neighbour."""
    return [
        {
            "name": "master",
            "host": "node1",
            "address": "10.0.0.11",
            "port": 29500,
            "source": addr,
            "ok": True,
            "error": "",
            "error_kind": "",
            "elapsed_ms": 1,
        },
        {
            "name": "ring",
            "host": f"node{i % 4 + 1}",
            "address": f"10.0.0.{10 + i % 4 + 1}",
            "port": 40000,
            "source": addr,
            "ok": True,
            "error": "",
            "error_kind": "",
            "elapsed_ms": 1,
        },
    ]


def observation(i: int, **changes) -> dict:
    """A healthy host i (1-based) of a 4-node gloo cluster on 10.0.0.0/24."""
    addr = f"10.0.0.{10 + i}"
    obs = {
        "facts": facts(i, addr),
        "ifname": "enp1s0f0np0",
        "ifname_reason": "",
        "address": addr,
        "master_addr": "10.0.0.11",
        "master_port": 29500,
        "nproc_per_node": 8,
        "backend": "gloo",
        "python": "/usr/bin/python3",
        "port_owner": {"free": True, "listeners": []} if i == 1 else {},
        "listeners": {
            "listeners": [{"name": "master", "address": "10.0.0.11", "port": 29500, "error": ""}]
        }
        if i == 1
        else {},
        "probes": probes(i, addr),
        "probe_skip": {},
        "firewall": {
            "findings": [],
            "tools": {"iptables": {"present": True, "read": True, "error": ""}},
        },
        "firewall_skip": "",
        "clock": 1_700_000_000.0,
    }
    for key, value in changes.items():
        obs[key] = value
    return obs


def cluster(**per_host) -> dict[str, dict]:
    return {h: observation(i + 1) for i, h in enumerate(HOSTS)} | per_host
