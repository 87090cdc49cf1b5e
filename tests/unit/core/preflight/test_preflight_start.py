# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the facts call starts for the pre-flight (core/preflight/start.py, roles/facts' filter
nccl_preflight_start) and the listeners of both front-ends (node/probe_plan.py)."""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.preflight.start import nccl_preflight_start
from nccl_preflight.node.probe_plan import preflight_listeners
from nccl_preflight.slurm.node_step import listeners

NODES = ["m", "a", "b"]


def start(host: str, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "master": "m",
        "nodes": NODES,
        "run_dir": "/tmp/nccl-preflight-r1-x",
        "run_dir_mode": "0700",
        "python": "",
        "python_timeout": "60",
        "master_port": "29500",
        "socket_ifname": "",
        "fabric_cidr": "10.0.0.0/24",
        "backend": "nccl",
        "listen_timeout": 90,
        "full_mesh": False,
        "extra_env": {},
        "lock": None,
    }
    settings.update(overrides)
    return nccl_preflight_start(host, **settings)


def test_the_master_checks_its_port_holds_the_lock_and_listens_for_every_node() -> None:
    lock = {"run_id": "r1", "path": "/tmp/lock.json", "lifetime": 600.0}
    got = start("m", lock=lock)
    assert got == {
        "run_dir": "/tmp/nccl-preflight-r1-x",
        "run_dir_mode": "0700",
        "path": "/tmp/nccl-preflight-r1-x/preflight",
        "python": "",
        "python_timeout": 60.0,
        "check_port": 29500,
        "listeners": [
            {"name": "master", "address": "fabric", "port": 29500, "connections": 3},
            {"name": "ring", "address": "fabric", "port": 0, "connections": 1},
        ],
        "fabric": {"socket_ifname": "", "cidr": "10.0.0.0/24"},
        "backend": "nccl",
        "timeout": 90.0,
        "warm": False,
        "lock": lock,
    }
    # a launch follows in this run: the probe is started warm to become torchrun
    assert start("m", lock=lock, warm=True) == {**got, "warm": True}


def test_another_node_has_no_port_check_and_no_lock() -> None:
    got = start("a")
    assert "check_port" not in got and "lock" not in got
    assert got["listeners"] == [{"name": "ring", "address": "fabric", "port": 0, "connections": 1}]


def test_hccl_listens_beside_the_ring_where_the_node_may_use_hccl() -> None:
    hccl = {"name": "hccl", "address": "fabric", "backend": "hccl", "port": 61000, "connections": 2}
    extra = {"HCCL_IF_BASE_PORT": "61000"}
    auto = start("a", backend="auto", full_mesh=True, extra_env=extra)["listeners"]
    assert auto[-1] == hccl and auto[0]["connections"] == 2
    assert start("a", backend="hccl")["listeners"][-1]["port"] == 60000  # HCCL's default
    assert all(e["name"] != "hccl" for e in start("a", backend="gloo")["listeners"])
    # A single node has no ring peer, so neither a ring nor an hccl listener.
    assert start("m", nodes=["m"], backend="hccl")["listeners"] == [
        {"name": "master", "address": "fabric", "port": 29500, "connections": 1}
    ]


def test_the_slurm_node_step_starts_the_same_listeners_without_hccl() -> None:
    settings = {"nodes": NODES, "master_port": 29500, "full_mesh": False}
    for node in NODES:
        assert listeners(settings, node) == start(node)["listeners"]
        assert preflight_listeners(NODES, node, "m", 29500) == listeners(settings, node)


def test_with_the_nodes_facts_the_start_holds_its_fabric_address() -> None:
    """roles/facts passes the node's facts: the start call gets its listeners on the node's own
    fabric address (as the environment stage will choose it), no hccl listener on a node that
    uses nccl, the lock path filled in, and no fabric settings left for the node to resolve."""
    facts = {
        "interfaces": {
            "fab0": {
                "name": "fab0",
                "state": "up",
                "ipv4": [{"address": "10.0.0.7", "prefixlen": 24}],
            }
        },
        "gpus": [{"index": 0}],
    }
    lock = {"run_id": "r1", "path": "/tmp/lock-{fabric_address}.json", "lifetime": 600.0}
    extra = {"HCCL_IF_BASE_PORT": "60000"}
    got = start("m", lock=lock, backend="auto", extra_env=extra, facts=facts)
    assert {(s["name"], s["address"]) for s in got["listeners"]} == {
        ("master", "10.0.0.7"),
        ("ring", "10.0.0.7"),
    }
    assert got["lock"]["path"] == "/tmp/lock-10.0.0.7.json"
    assert got["fabric_address"] == "10.0.0.7"
    assert "fabric" not in got and "backend" not in got
    unplaced = start("m", lock=lock, fabric_cidr="10.9.0.0/24", facts=facts)
    assert unplaced["listeners"] == [] and unplaced["lock"] is None
    assert unplaced["fabric_address"] == ""
