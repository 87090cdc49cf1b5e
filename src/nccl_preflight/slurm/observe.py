# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight under Slurm: one observe step on every node, then the core's one judgement.

The step (node_step.observe) starts each node's listeners (MASTER_PORT on the master, an
ephemeral ring port) and its torch probe and sends "started" (facts, ports); the control machine
works out every node's probe plan from every node's ports and fabric address
(core/preflight/host_checks.nccl_preflight_probe_plan, as roles/preflight does) and sends it on
the step's stdin; each node probes, reads its firewall, stops its listeners and sends "observed".
The observations are built and judged exactly as in the Ansible path
(core/preflight/observation.py, core/preflight/judge.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..core.preflight.host_checks import (
    nccl_preflight_expected_connections,
    nccl_preflight_probe_plan,
)
from ..core.preflight.observation import nccl_preflight_observation
from ..node.fabric_choice import nccl_fabric_choice
from .step import Step, collect

PROBE_TIMEOUT_S = 3.0  # preflight_probe_timeout
PYTHON_TIMEOUT_S = 60.0  # preflight_python_timeout


@dataclass
class Observed:
    """What the observe step brought back, by node (a node that sent nothing is absent)."""

    facts: dict[str, dict] = field(default_factory=dict)
    started: dict[str, dict] = field(default_factory=dict)
    choices: dict[str, dict] = field(default_factory=dict)
    probe: dict[str, dict] = field(default_factory=dict)
    stopped: dict[str, dict] = field(default_factory=dict)
    plans: dict[str, dict] = field(default_factory=dict)
    problem: str = ""


def node_settings(config: dict[str, Any], nodes: list[str], python: str) -> dict[str, Any]:
    """Every node's observe settings (each node picks its own by name)."""
    master, port = nodes[0], int(config["nccl_master_port"])
    by_node = {}
    for node in nodes:
        listeners = []
        if node == master:
            listeners.append(
                {"name": "master", "address": "fabric", "port": port, "expect": len(nodes)}
            )
        expect = nccl_preflight_expected_connections(nodes, node)
        if expect:
            listeners.append({"name": "ring", "address": "fabric", "port": 0, "expect": expect})
        by_node[node] = {
            "python": python,
            "python_timeout": PYTHON_TIMEOUT_S,
            "listeners": listeners,
            "check_port": port if node == master else None,
            "listen_timeout": 60 + 10 * len(nodes),
            "fabric": {
                "socket_ifname": str(config.get("nccl_socket_ifname") or ""),
                "cidr": str(config.get("nccl_fabric_cidr") or ""),
            },
            "backend": str(config.get("nccl_backend") or "auto"),
        }
    return {"by_node": by_node}


def _firewall(config: dict, node: str, nodes: list[str], obs: Observed) -> dict | None:
    """What the node's firewall read looks at (roles/preflight's firewall option)."""
    address = obs.choices[node]["address"]
    if not address:
        return None
    peers = [obs.choices[n]["address"] for n in nodes if n != node and n in obs.choices]
    low, high = (obs.facts[node].get("ip_local_port_range") or [32768, 60999])[:2]
    ports = [{"label": "MASTER_PORT", "low": int(config["nccl_master_port"])}] * (node == nodes[0])
    ports.append({"label": "ephemeral range", "low": int(low), "high": int(high)})
    return {
        "peers": [p for p in peers if p] or [address],
        "address": address,
        "ifname": obs.choices[node]["ifname"],
        "ports": ports,
    }


def _plans(config: dict, nodes: list[str], obs: Observed) -> dict[str, Any]:
    ports = {n: (obs.started.get(n) or {}).get("ports") or {} for n in nodes}
    addresses = {n: obs.choices.get(n, {}).get("address", "") for n in nodes}
    by_node = {}
    for node in obs.started:
        plan = nccl_preflight_probe_plan(ports, node, nodes[0], nodes, addresses)
        obs.plans[node] = plan
        by_node[node] = {
            "targets": plan["targets"],
            "firewall": _firewall(config, node, nodes, obs),
            "collect_wait": 2 + 2 * PROBE_TIMEOUT_S,
        }
    return {"by_node": by_node}


def run_observe(
    config: dict, job_id: str, nodes: list[str], python: str, run_id: str, bundle: bytes, env: dict
) -> Observed:
    """The observe step on every node; -> what each node showed."""
    settings = json.dumps(node_settings(config, nodes, python))
    step = Step(job_id, nodes, python, run_id, ["observe", settings], bundle, env)
    obs = Observed()
    try:
        bound = time.monotonic() + 120 + PYTHON_TIMEOUT_S
        for node, record in collect(step, nodes, "started", bound).items():
            obs.facts[node] = record.get("facts") or {}
            obs.started[node] = record.get("started") or {}
            obs.choices[node] = nccl_fabric_choice(
                obs.facts[node],
                str(config.get("nccl_socket_ifname") or ""),
                str(config.get("nccl_fabric_cidr") or ""),
            )
        step.say(_plans(config, nodes, obs))
        bound = time.monotonic() + 60 + PYTHON_TIMEOUT_S
        for node, record in collect(step, list(obs.started), "observed", bound).items():
            obs.probe[node] = record.get("probe") or {}
            obs.stopped[node] = record.get("stopped") or {}
    finally:
        step.end()
    if len(obs.facts) < len(nodes):
        obs.problem = step.diagnostics()
    return obs


def observations(
    obs: Observed, nodes: list[str], env_by_node: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every present node's observation (core/preflight/observation.py)."""
    return {
        node: nccl_preflight_observation(
            obs.facts[node],
            env=env_by_node[node],
            started=obs.started.get(node),
            probe=obs.probe.get(node),
            stopped=obs.stopped.get(node)
            or {"msg": "the node sent no observation (its step ended early)"},
            probe_skip=obs.plans.get(node, {}).get("skip"),
            clock_check=False,
        )
        for node in nodes
        if node in obs.facts
    }
