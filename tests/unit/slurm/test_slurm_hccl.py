# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""HCCL's host port under the Slurm front-end, as on the Ansible path (core/preflight/start.py,
roles/preflight): a listener on HCCL_IF_BASE_PORT where the node may use hccl, probed by the
ring peers and read in the firewall when the run's backend is hccl (slurm/observe.py
observe_settings and shared_inputs, slurm/node_step.py listeners and firewall_read). The lab
twin: tests/integration/test_slurm_run_lab.py, the hccl firewall test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.slurm_sizes import fake_nodes, started
from nccl_preflight.core.config import load_config
from nccl_preflight.slurm import node_step, observe
from nccl_preflight.slurm.ship import settings_of

ASCEND = {"gpus": [], "accelerators": {"npus": [{"npu": 0, "chip": 0, "name": "910B2"}]}}


def config(tmp_path: Path, backend: str, port: str | None = None) -> dict[str, Any]:
    """--config with ``nccl_backend`` and, given ``port``, HCCL_IF_BASE_PORT in nccl_extra_env."""
    path = tmp_path / "nccl.yaml"
    text = f"nccl_fabric_cidr: 10.1.0.0/16\nnccl_backend: {backend}\n"
    if port:
        text += f"nccl_extra_env: {{HCCL_IF_BASE_PORT: '{port}'}}\n"
    path.write_text(text)
    return load_config(path)


@pytest.mark.parametrize(
    ("backend", "port", "expected"),
    [
        ("hccl", "61000", 61000),
        ("auto", None, 60000),
        ("gloo", "61000", None),
        ("nccl", None, None),
    ],
)
def test_the_hccl_listener_is_held_where_the_node_may_use_hccl(
    tmp_path: Path, backend: str, port: str | None, expected: int | None
) -> None:
    nodes = fake_nodes(3)
    shared = observe.observe_settings(config(tmp_path, backend, port), nodes, "py")
    assert shared["hccl_port"] == expected
    mine = settings_of({"shared": shared, "own": {}}, nodes[1])
    specs = {s["name"]: s for s in node_step.listeners(mine, nodes[1])}
    if expected is None:
        assert "hccl" not in specs
    else:
        assert specs["hccl"]["port"] == expected and specs["hccl"]["backend"] == "hccl"
        assert specs["hccl"]["connections"] == specs["ring"]["connections"]


def test_the_peers_probe_hccls_port_only_when_the_runs_backend_is_hccl(tmp_path: Path) -> None:
    nodes = fake_nodes(3)
    obs = started(nodes)
    for node in nodes:
        obs.started[node]["ports"]["hccl"] = {"port": 61000, "error": ""}
    shared = observe.observe_settings(config(tmp_path, "auto", "61000"), nodes, "py")
    # auto on nodes without NPUs: the run's backend is gloo, nobody probes HCCL's port
    assert observe.shared_inputs(nodes, obs, shared)["plan"]["hccl_port"] == 0
    obs.facts[nodes[0]] = ASCEND  # the master has Ascend NPUs: the run's backend is hccl
    inputs = observe.shared_inputs(nodes, obs, shared)
    assert inputs["plan"]["hccl_port"] == 61000
    plans = observe.probe_plans(nodes, obs, inputs, False)
    hccl = [t for t in plans[nodes[1]]["targets"] if t["name"] == "hccl"]
    assert [(t["host"], t["port"]) for t in hccl] == [(nodes[2], 61000)]


def test_the_firewall_read_looks_at_hccls_port_when_the_run_uses_hccl(tmp_path: Path) -> None:
    nodes = fake_nodes(2)
    shared = observe.observe_settings(config(tmp_path, "hccl", "61000"), nodes, "py")
    mine = settings_of({"shared": shared, "own": {}}, nodes[1])
    facts = {
        "interfaces": {"ib0": {"up": True, "ipv4": [{"address": "10.1.0.2", "prefix": 16}]}},
        "ip_local_port_range": [32768, 60999],
    }
    addresses = {nodes[0]: "10.1.0.1", nodes[1]: "10.1.0.2"}
    mine["fabric"] = {"socket_ifname": "ib0", "cidr": ""}
    with_hccl = node_step.firewall_read(mine, nodes[1], facts, addresses, 61000)
    assert with_hccl is not None
    assert {"label": "HCCL_IF_BASE_PORT", "low": 61000} in with_hccl["ports"]
    without = node_step.firewall_read(mine, nodes[1], facts, addresses)
    assert without is not None
    assert all(p["label"] != "HCCL_IF_BASE_PORT" for p in without["ports"])
