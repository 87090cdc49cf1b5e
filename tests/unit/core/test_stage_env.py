# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The environment stage's decisions (core/stage.py rank_layout, run_backend, node_environment):
roles/nccl_env's calls rendered by Ansible from each host's variables and facts, and the Slurm
front-end's (slurm/run.py SlurmRun.environment) on the same user values and facts, give every
node the same layout, backend, rendezvous and ranks' environment (the Ansible path's adds only
NCCL_DEBUG_FILE in its run directory; under Slurm the node points it into its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import stage
from nccl_preflight.core.config import node_values
from nccl_preflight.node.fabric_choice import nccl_fabric_choice
from nccl_preflight.slurm.observe import Observed, fabric_of
from nccl_preflight.slurm.run import SlurmRun
from tests.builders.env_role import spark
from tests.builders.stage import NODES, render, role_variables, slurm_config, yaml_of

RUN_ROOT = "/tmp/stage-env"
FACTS = {
    "node1": spark("fab0", "192.168.100.10", "10.20.0.5"),
    "node2": spark("fab1", "192.168.100.11", "10.20.0.6"),
    "node3": spark("fab0", "192.168.100.12", "10.20.0.7"),
}
# the fabric: without a route to the master in these facts, only the CIDR names it
FABRIC = {"nccl_fabric_cidr": "192.168.100.0/24"}
USER: dict[str, Any] = {
    **FABRIC,
    "nccl_master_port": 29600,
    "nccl_debug": "TRACE",
    "nccl_debug_subsys": "ALL",
    "nccl_extra_env": {"NCCL_IB_HCA": "mlx5_0 $(x)"},
}
# node2's own values (its host_vars; nccl_node_vars under Slurm: the per-node variables)
NODE2: dict[str, Any] = {
    "nccl_extra_env": {"NCCL_IB_HCA": "mlx5_1", "NCCL_DEBUG": "WARN"},
    "nccl_nproc_per_node": 3,
    "nccl_socket_ifname": "fab1",
}


def task(name: str) -> dict[str, Any]:
    for found in yaml_of("roles/nccl_env/tasks/main.yml"):
        if found["name"].startswith(name):
            return found
    raise AssertionError(f"no task {name!r} in roles/nccl_env/tasks/main.yml")


def ansible_side(user: dict[str, Any], own: dict[str, dict[str, Any]], facts: dict) -> dict:
    """Every reached node's environment as roles/nccl_env's tasks work it out, each host's
    expressions rendered by Ansible with its own variables (group_vars ``user``, host_vars
    ``own``); a node missing from ``facts`` was not reached (no task ran on it)."""
    base = {
        **role_variables("roles/nccl_env/defaults/main.yml", "roles/nccl_env/vars/main.yml"),
        **user,
        "nccl_run_id": "t1",
        "groups": {"nccl_nodes": NODES, "nccl_master": NODES[:1]},
    }
    first = task("Choose the fabric interface")
    hostvars: dict[str, dict[str, Any]] = {}
    for node in NODES:
        mine = {**base, **own.get(node, {}), "inventory_hostname": node}
        if node in facts:
            mine["ansible_facts"] = {"nccl": facts[node]}
            mine["nccl_env_choice"] = render(first["vars"]["_nccl_env_choice"], mine)
            mine["nccl_env_knobs"] = render("{{ nccl_env_stage_knobs }}", mine)
            mine["nccl_env_run_dir"] = f"{RUN_ROOT}/nccl-preflight-t1-{node}"
        hostvars[node] = mine
    once = task("Lay out every node's ranks")["ansible.builtin.set_fact"]
    master = {**hostvars[NODES[0]], "hostvars": hostvars}
    layout = render(once["nccl_env_layout"], master)
    backend = render(once["nccl_env_backend"], master)
    addresses = {n: (hostvars[n].get("nccl_env_choice") or {}).get("address", "") for n in NODES}
    expression = task("Derive MASTER_ADDR")["vars"]["_nccl_env_node"]
    found = {}
    for node in facts:
        context = {
            **hostvars[node],
            "nccl_env_layout": layout,
            "nccl_env_backend": backend,
            "nccl_env_addresses": addresses,
        }
        found[node] = render(expression, context)
    return found


def slurm_side(tmp_path: Path, user: dict[str, Any], own: dict[str, dict[str, Any]], facts: dict):
    """Every node's environment as SlurmRun.environment works it out from the same values
    (``own`` as nccl_node_vars) and facts, each node's fabric choice its own (node_step)."""
    config = slurm_config(tmp_path, {**user, "nccl_node_vars": own} if own else user)
    run = SlurmRun.__new__(SlurmRun)
    run.config, run.nodes = config, list(NODES)
    run.node_config = {node: node_values(config, node) for node in NODES}
    choices = {}
    for node in facts:
        fabric = fabric_of(run.node_config[node])
        choices[node] = nccl_fabric_choice(facts[node], fabric["socket_ifname"], fabric["cidr"])
    run.env_by_node = {}
    findings = run.environment(Observed(facts=dict(facts), choices=choices))
    return run, findings


def without_run_dir(record: dict[str, Any]) -> dict[str, Any]:
    """The Ansible path's record less what only it has: its run directory and nccl.env there."""
    env = dict(record["env"])
    assert env.pop("NCCL_DEBUG_FILE") == f"{record['run_dir']}/results/nccl.%p.log"
    return {**record, "env": env, "run_dir": "", "file": ""}


@pytest.mark.parametrize("user", [FABRIC, USER], ids=["defaults", "user values"])
@pytest.mark.parametrize("own", [{}, {"node2": NODE2}], ids=["one config", "node2's own"])
def test_both_front_ends_give_every_node_the_same_environment(
    tmp_path: Path, user: dict[str, Any], own: dict[str, dict[str, Any]]
) -> None:
    from_ansible = ansible_side(user, own, FACTS)
    run, findings = slurm_side(tmp_path, user, own, FACTS)
    assert findings == {}
    for node in NODES:
        assert without_run_dir(from_ansible[node]) == run.env_by_node[node], node
    node1, node2 = run.env_by_node["node1"], run.env_by_node["node2"]
    assert node2["master_addr"] == node1["address"] == "192.168.100.10"
    assert (node1["ifname"], node2["ifname"]) == ("fab0", "fab1")
    assert node2["env"]["NCCL_SOCKET_IFNAME"] == node2["env"]["GLOO_SOCKET_IFNAME"] == "fab1"
    # one GPU each: a device count comes before a node's own nccl_nproc_per_node
    assert [row["nproc_per_node"] for row in run.layout["hosts"]] == [1, 1, 1]
    # nccl_python unset: the interpreter that read the node's facts
    assert node2["python"] == FACTS["node2"]["module_python"]
    if own:
        assert node2["env"]["NCCL_IB_HCA"] == "mlx5_1" and node2["env"]["NCCL_DEBUG"] == "WARN"
    if user == USER:
        assert node2["env"]["MASTER_PORT"] == "29600"
        assert node1["env"]["NCCL_DEBUG_SUBSYS"] == "ALL"


def test_a_node_without_devices_or_facts_takes_its_own_count(tmp_path: Path) -> None:
    """No GPU on node2 (its own nccl_nproc_per_node decides), node3 never reached (the
    default): the layout both front-ends lay out is the same, the master's backend gloo."""
    facts = {"node1": {**FACTS["node1"], "gpus": []}, "node2": {**FACTS["node2"], "gpus": []}}
    own = {"node2": {"nccl_nproc_per_node": 3}}
    from_ansible = ansible_side(FABRIC, own, facts)
    run, findings = slurm_side(tmp_path, FABRIC, own, facts)
    assert findings == {}  # an unreached node is no finding here: skip_reason names it
    assert [row["nproc_per_node"] for row in run.layout["hosts"]] == [1, 3, 1]
    assert [row["rank_offset"] for row in run.layout["hosts"]] == [0, 1, 4]
    for node in facts:
        assert without_run_dir(from_ansible[node]) == run.env_by_node[node], node
    assert run.env_by_node["node2"]["world_size"] == 5
    assert run.env_by_node["node1"]["backend"] == "gloo"
    assert run.env_by_node["node3"]["address"] == "" and run.env_by_node["node3"]["env"]


def test_hccl_on_the_master_gives_every_node_hccls_host_nic() -> None:
    """The run's backend is the master's choice: with Ascend NPUs there, every node's ranks
    get HCCL_SOCKET_IFNAME and HCCL_IF_IP on their own fabric address."""
    npus = {"accelerators": {"npus": [{"npu": 0, "chip": 0, "name": "910B"}]}}
    master = {**FACTS["node1"], "gpus": [], **npus}
    assert stage.run_backend({"nccl_backend": "auto"}, master) == "hccl"
    layout = stage.rank_layout({}, NODES, {}, {"node1": master})
    record = stage.node_environment(
        {},
        "node2",
        layout,
        choice={"ifname": "fab1", "address": "192.168.100.11", "reason": "r"},
        facts=FACTS["node2"],
        master_address="192.168.100.10",
        backend="hccl",
        run_dir=None,
    )
    assert record["env"]["HCCL_SOCKET_IFNAME"] == "fab1"
    assert record["env"]["HCCL_IF_IP"] == "192.168.100.11"
    assert "NCCL_DEBUG_FILE" not in record["env"] and record["file"] == ""
