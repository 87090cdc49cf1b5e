# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight under Slurm: one observe step on every node, then the core's one judgement.

The step (node_step.observe) gets what every node shares, once (observe_settings: the node order,
MASTER_PORT, the fabric settings, nccl_facts' options as roles/facts gives them); each node
gathers its facts (node/facts.py gather, as the Ansible path's facts call), starts its own
listeners (MASTER_PORT on the master, an ephemeral ring port) and its torch probe and sends
"started" (facts, ports). The control machine sends every node's ports and fabric address in one
message; each node works out its own probe plan from them (node/probe_plan.py
nccl_preflight_probe_plan, the function roles/preflight uses), probes, reads its firewall, stops
its listeners and sends "observed". What is sent grows with the nodes, never with their square.
A node whose task ended before its record came (srun says so) is not waited for: it is named.
The observations are built and judged exactly as in the Ansible path
(core/preflight/observation.py, core/preflight/judge.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..core.preflight.host_checks import nccl_preflight_probe_plan
from ..core.preflight.observation import nccl_preflight_observation
from ..node.fabric_choice import nccl_fabric_choice
from .node_check import facts_params
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


def observe_settings(config: dict[str, Any], nodes: list[str], python: str) -> dict[str, Any]:
    """The observe step's settings: the same for every node (each derives its own part)."""
    return {
        "nodes": nodes,
        "master_port": int(config["nccl_master_port"]),
        "full_mesh": False,
        "python": python,
        "python_timeout": PYTHON_TIMEOUT_S,
        "listen_timeout": 60 + 10 * len(nodes),
        "probe_timeout": PROBE_TIMEOUT_S,
        "collect_wait": 2 + 2 * PROBE_TIMEOUT_S,
        "fabric": {
            "socket_ifname": str(config.get("nccl_socket_ifname") or ""),
            "cidr": str(config.get("nccl_fabric_cidr") or ""),
        },
        "backend": str(config.get("nccl_backend") or "auto"),
        # nccl_facts' options as roles/facts gives them; route_to: the master (its name, as the
        # inventory gives the master's address there)
        "facts": {**facts_params(config, python), "route_to": nodes[0]},
    }


def shared_inputs(nodes: list[str], obs: Observed) -> dict[str, Any]:
    """What every node's probe plan is worked out from (node_step.observe): each node's ports
    and fabric address, one message for all."""
    return {
        "plan": {
            "ports": {n: (obs.started.get(n) or {}).get("ports") or {} for n in nodes},
            "addresses": {n: obs.choices.get(n, {}).get("address", "") for n in nodes},
        }
    }


def missing_line(step: Step, nodes: list[str], present: dict[str, Any], what: str) -> str:
    """Who of ``nodes`` sent no ``what`` record, and why when srun said (the task ended)."""
    lines = []
    for node in nodes:
        if node in present:
            continue
        if node in step.ended:
            lines.append(
                f"{node}: unreachable: its task ended before it {what} ({step.ended[node]})"
            )
        else:
            lines.append(f"{node}: unreachable: it sent no record that it {what}")
    return "\n".join(lines)


def run_observe(
    config: dict, job_id: str, nodes: list[str], python: str, run_id: str, bundle: bytes, env: dict
) -> Observed:
    """The observe step on every node; -> what each node showed."""
    settings = {"shared": observe_settings(config, nodes, python), "own": {}}
    step = Step(job_id, nodes, python, run_id, "observe", settings, bundle, env)
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
        inputs = shared_inputs(nodes, obs)
        for node in obs.started:  # the plan each node works out for itself, for the judgement
            obs.plans[node] = nccl_preflight_probe_plan(
                inputs["plan"]["ports"], node, nodes[0], nodes, inputs["plan"]["addresses"]
            )
        step.say(inputs)
        bound = time.monotonic() + 60 + PYTHON_TIMEOUT_S
        for node, record in collect(step, list(obs.started), "observed", bound).items():
            obs.probe[node] = record.get("probe") or {}
            obs.stopped[node] = record.get("stopped") or {}
    finally:
        step.end()
    if len(obs.facts) < len(nodes):
        named = missing_line(step, nodes, obs.facts, "started")
        obs.problem = "\n".join(x for x in (named, step.diagnostics()) if x)
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
