# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight under Slurm: the run step's observation on every node, then the core's one
judgement (the step then waits for the launch: run.py).

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

The pre-flight's own variables of --config (core/config.py UNDER_SLURM: preflight_full_mesh,
preflight_probe_timeout, preflight_listen_timeout, preflight_collect_wait,
preflight_python_timeout, preflight_clock_check, ...) reach the step's settings here, worked out
for the run by core/config.py preflight_values, with the Ansible path's meanings.

The clock (preflight_clock_check): each node sends its time.time() in its "observed" record, taken
just before it writes it; the control machine notes its own time.time() when it reads the record's
last line (step.py RECEIVED). A node's clock minus that is its offset from the control machine's
clock, low by the record's transit only (srun's output forwarding: the node was never ahead of
the reading). ``node_clocks`` gives each node's clock as it read at one instant of the control
machine's (the last record's reading), and the core's check compares each with their median, as
the Ansible path compares the clocks its collect calls read at about the same time on every host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..core.config import node_values, preflight_values
from ..core.preflight.host_checks import nccl_preflight_probe_plan
from ..core.preflight.npu_checks import nccl_hccl_base_port
from ..core.preflight.observation import nccl_preflight_observation
from ..core.stage import run_backend
from ..node.fabric_choice import nccl_fabric_choice
from .node_check import facts_params
from .step import RECEIVED, Step, collect


@dataclass
class Observed:
    """What the observe step brought back, by node (a node that sent nothing is absent)."""

    facts: dict[str, dict] = field(default_factory=dict)
    started: dict[str, dict] = field(default_factory=dict)
    choices: dict[str, dict] = field(default_factory=dict)
    probe: dict[str, dict] = field(default_factory=dict)
    stopped: dict[str, dict] = field(default_factory=dict)
    plans: dict[str, dict] = field(default_factory=dict)
    clocks: dict[str, float] = field(default_factory=dict)
    problem: str = ""


def fabric_of(config: dict[str, Any]) -> dict[str, str]:
    """How a node chooses its fabric interface: nccl_socket_ifname, nccl_fabric_cidr."""
    return {
        "socket_ifname": str(config.get("nccl_socket_ifname") or ""),
        "cidr": str(config.get("nccl_fabric_cidr") or ""),
    }


def own_fabric(
    config: dict[str, Any], nodes: list[str], shared: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """The observe step's own settings of the nodes whose fabric settings differ from the run's
    (nccl_node_vars); ship.settings_of lays them over the shared ones."""
    own = {}
    for node in nodes:
        fabric = fabric_of(node_values(config, node))
        if fabric != shared:
            own[node] = {"fabric": fabric}
    return own


def observe_settings(config: dict[str, Any], nodes: list[str], python: str) -> dict[str, Any]:
    """The observe step's settings: the same for every node (each derives its own part)."""
    knobs = preflight_values(config, len(nodes))
    backend = str(config.get("nccl_backend") or "auto")
    extra_env = dict(config.get("nccl_extra_env") or {})
    return {
        "nodes": nodes,
        "master_port": int(config["nccl_master_port"]),
        "full_mesh": bool(knobs["preflight_full_mesh"]),
        "python": python,
        "python_timeout": float(knobs["preflight_python_timeout"]),
        "listen_timeout": int(knobs["preflight_listen_timeout"]),
        "probe_timeout": float(knobs["preflight_probe_timeout"]),
        "collect_wait": float(knobs["preflight_collect_wait"]),
        "fabric": fabric_of(config),
        "backend": backend,
        # HCCL's base port, listened on where the node may use hccl (core/preflight/start.py)
        "hccl_port": nccl_hccl_base_port(extra_env) if backend in ("hccl", "auto") else None,
        # nccl_facts' options as roles/facts gives them; route_to: the master (its name, as the
        # inventory gives the master's address there)
        "facts": {**facts_params(config, python), "route_to": nodes[0]},
    }


def shared_inputs(nodes: list[str], obs: Observed, shared: dict[str, Any]) -> dict[str, Any]:
    """What every node's probe plan is worked out from (node_step.observe): each node's ports
    and fabric address, one message for all; ``hccl_port`` HCCL_IF_BASE_PORT when the run's
    backend (the master's, as roles/nccl_env decides it) is hccl, else 0 (roles/preflight/vars'
    _preflight_hccl_port)."""
    backend = run_backend({"nccl_backend": shared["backend"]}, obs.facts.get(nodes[0]))
    return {
        "plan": {
            "ports": {n: (obs.started.get(n) or {}).get("ports") or {} for n in nodes},
            "addresses": {n: obs.choices.get(n, {}).get("address", "") for n in nodes},
            "hccl_port": int(shared["hccl_port"] or 0) if backend == "hccl" else 0,
        }
    }


def probe_plans(
    nodes: list[str], obs: Observed, inputs: dict[str, Any], full_mesh: bool
) -> dict[str, dict]:
    """The probe plan each started node works out for itself (node_step.observe), for the
    judgement: from ``inputs`` (shared_inputs), every peer's or only the ring's ports."""
    plan = inputs["plan"]
    return {
        node: nccl_preflight_probe_plan(
            plan["ports"], node, nodes[0], nodes, plan["addresses"], full_mesh, plan["hccl_port"]
        )
        for node in obs.started
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


def observed_bound(settings: dict[str, Any], plans: dict[str, dict]) -> float:
    """Seconds the "observed" records may take after the plan was sent: the firewall read and
    the stop's own (60 s), every probe of the longest plan at its timeout, the listeners' wait
    (collect_wait) and the torch probe's end (python_timeout)."""
    probes = max((len(plan.get("targets") or []) for plan in plans.values()), default=0)
    return (
        60
        + probes * settings["probe_timeout"]
        + settings["collect_wait"]
        + settings["python_timeout"]
    )


def node_clocks(records: dict[str, dict]) -> dict[str, float]:
    """Each node's clock as it read when the control machine's read its last record's end: the
    node's "clock" plus the control machine's time between its reading of that node's record
    (RECEIVED) and of the last one. A record without both times is left out (the check then
    says the node's clock could not be read)."""
    timed = {
        node: (float(record["clock"]), float(record[RECEIVED]))
        for node, record in records.items()
        if isinstance(record.get("clock"), (int, float)) and RECEIVED in record
    }
    last = max((received for _, received in timed.values()), default=0.0)
    return {node: clock + (last - received) for node, (clock, received) in timed.items()}


def step_settings(config: dict, nodes: list[str], python: str) -> dict[str, Any]:
    """The observe (or run) step's settings document (ship.shared_and_own's shape)."""
    shared = observe_settings(config, nodes, python)
    return {"shared": shared, "own": own_fabric(config, nodes, shared["fabric"])}


def observe_on(step: Step, config: dict, nodes: list[str], shared: dict[str, Any]) -> Observed:
    """The pre-flight's exchange with a running observe or run step (left running: the run
    step's launch follows in it); -> what each node showed."""
    obs = Observed()
    bound = time.monotonic() + 120 + shared["python_timeout"]
    for node, record in collect(step, nodes, "started", bound).items():
        obs.facts[node] = record.get("facts") or {}
        obs.started[node] = record.get("started") or {}
        fabric = fabric_of(node_values(config, node))
        # with what it was asked, as roles/nccl_env combines it (core/env_findings.py words a
        # name that is no interface apart from an interface without an address)
        obs.choices[node] = {
            **nccl_fabric_choice(obs.facts[node], fabric["socket_ifname"], fabric["cidr"]),
            "cidr": fabric["cidr"],
            "socket_ifname": fabric["socket_ifname"],
        }
    inputs = shared_inputs(nodes, obs, shared)
    obs.plans = probe_plans(nodes, obs, inputs, shared["full_mesh"])
    step.say(inputs)
    bound = time.monotonic() + observed_bound(shared, obs.plans)
    records = collect(step, list(obs.started), "observed", bound)
    for node, record in records.items():
        obs.probe[node] = record.get("probe") or {}
        obs.stopped[node] = record.get("stopped") or {}
    obs.clocks = node_clocks(records)
    if len(obs.facts) < len(nodes):
        named = missing_line(step, nodes, obs.facts, "started")
        obs.problem = "\n".join(x for x in (named, step.diagnostics()) if x)
    return obs


def observations(
    obs: Observed,
    nodes: list[str],
    env_by_node: dict[str, dict[str, Any]],
    clock_check: bool = False,
) -> dict[str, dict[str, Any]]:
    """Every present node's observation (core/preflight/observation.py); with ``clock_check``
    its clock is node_clocks' (the stop's own is taken before the listeners' wait)."""
    return {
        node: nccl_preflight_observation(
            obs.facts[node],
            env=env_by_node[node],
            started=obs.started.get(node),
            probe=obs.probe.get(node),
            stopped=stopped_with_clock(obs, node),
            probe_skip=obs.plans.get(node, {}).get("skip"),
            clock_check=clock_check,
        )
        for node in nodes
        if node in obs.facts
    }


def stopped_with_clock(obs: Observed, node: str) -> dict[str, Any]:
    """The node's stop result, its "clock" node_clocks' (absent when the node sent none)."""
    stopped = dict(obs.stopped.get(node) or {})
    if not stopped:
        return {"msg": "the node sent no observation (its step ended early)"}
    stopped.pop("clock", None)
    if node in obs.clocks:
        stopped["clock"] = obs.clocks[node]
    return stopped
