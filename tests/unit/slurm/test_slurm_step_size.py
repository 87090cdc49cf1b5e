# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the slurm command sends to a step grows with the nodes, not with their square, and no
argument of srun's command line grows with the settings (Linux refuses one of 128 KiB: E2BIG).

Measured with the command's own functions (slurm/observe.py, slurm/run.py SlurmRun,
slurm/step.py step_argv and step_input) on fake node lists, no Slurm involved; each node's part
is what the node step takes out of the one document (ship.settings_of), and each node's own
probe plan (node_step's, from the shared inputs) is the one the control machine judges with.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.slurm_sizes import fake_nodes, launch_doc, started, step_bytes
from nccl_preflight.core.config import load_config
from nccl_preflight.node.probe_plan import nccl_preflight_probe_plan
from nccl_preflight.slurm import node_step, observe
from nccl_preflight.slurm.run import SlurmRun
from nccl_preflight.slurm.ship import settings_of, shared_and_own

MAX_ARG_STRLEN = 128 * 1024  # Linux: one argument of execve at most (PAGE_SIZE * 32)
# A bound on what one more node adds to a step's input: the run step carries the observe's
# settings and messages and then the launch's (about 117 + 120 bytes a node), the pairwise
# relaunch's step the launch's alone.
PER_NODE_BYTES = {"run": 250, "launch": 200}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("cfg") / "nccl.yml"
    path.write_text('nccl_fabric_cidr: "10.0.0.0/8"\nnccl_nproc_per_node: 8\n')
    return load_config(path)


def test_a_step_gets_o_n_bytes_and_a_short_command_line_at_1024_nodes(
    config: dict[str, Any],
) -> None:
    sizes = {n: step_bytes(config, n) for n in (256, 512, 1024)}
    for step in ("run", "launch"):
        # linear: doubling the nodes at most doubles the bytes (n^2 would quadruple them)
        assert sizes[1024][step] <= 2.1 * sizes[512][step] <= 4.41 * sizes[256][step], sizes
        assert sizes[1024][step] <= PER_NODE_BYTES[step] * 1024, sizes
    # only --nodelist grows (about 15 bytes a node): far below one argument's limit
    assert sizes[1024]["longest_arg"] < MAX_ARG_STRLEN // 8, sizes
    assert sizes[1024]["argv"] < MAX_ARG_STRLEN // 4, sizes


def test_every_node_takes_its_own_launch_settings_out_of_the_shared_document(
    config: dict[str, Any],
) -> None:
    nodes = fake_nodes(64)
    obs = started(nodes)
    doc = launch_doc(config, nodes, obs)
    for i in (0, 1, 37, 63):
        mine = settings_of(doc, nodes[i])
        assert mine["torchrun"]["node_rank"] == i
        assert mine["torchrun"]["local_addr"] == obs.choices[nodes[i]]["address"]
        assert mine["torchrun"]["nnodes"] == 64 and mine["rank_offset"] == 8 * i
        assert mine["env"]["NODE_RANK"] == str(i) and mine["env"]["NCCL_SOCKET_IFNAME"] == "ib0"
    # what every node shares is sent once: the per-node part names no other node
    assert all(json.dumps(own).count("10.1.") <= 1 for own in doc["own"].values())


def test_each_node_works_out_the_probe_plan_and_listeners_the_control_machine_judges_with(
    config: dict[str, Any],
) -> None:
    nodes = fake_nodes(5)
    obs = started(nodes)
    settings = settings_of(
        {"shared": observe.observe_settings(config, nodes, "py"), "own": {}}, "x"
    )
    inputs = observe.shared_inputs(nodes, obs, settings)["plan"]
    for i, node in enumerate(nodes):
        plan = nccl_preflight_probe_plan(
            inputs["ports"], node, nodes[0], nodes, inputs["addresses"]
        )
        ring = [t for t in plan["targets"] if t["name"] == "ring"]
        assert ring == [
            {"name": "ring", "host": nodes[(i + 1) % 5], "port": 40000 + (i + 1) % 5,
             "address": obs.choices[nodes[(i + 1) % 5]]["address"]}
        ]  # fmt: skip
        names = [(s["name"], s["connections"]) for s in node_step.listeners(settings, node)]
        # nccl_backend auto: HCCL's port beside the ring's (kept where the node chooses hccl)
        assert names == ([("master", 5)] if i == 0 else []) + [("ring", 1), ("hccl", 1)]
    # the firewall read of the master: every peer's address, MASTER_PORT and the port range
    facts = {
        "interfaces": {"ib0": {"ipv4": [{"address": "10.1.0.1"}], "ipv6": []}},
        "ip_local_port_range": [32768, 60999],
    }
    firewall = node_step.firewall_read(settings, nodes[0], facts, inputs["addresses"])
    assert firewall == {
        "peers": [obs.choices[n]["address"] for n in nodes[1:]],
        "address": "10.1.0.1",
        "ifname": "ib0",
        "ports": [
            {"label": "MASTER_PORT", "low": 29500},
            {"label": "ephemeral range", "low": 32768, "high": 60999},
        ],
    }
    assert [
        p["label"] for p in node_step.firewall_read(settings, nodes[1], facts, {})["ports"]
    ] == ["ephemeral range"]
    assert node_step.firewall_read(settings, nodes[0], {"interfaces": {}}, {}) is None


def test_shared_and_own_gives_each_node_back_exactly_its_settings() -> None:
    by_node = {
        "a": {"x": 1, "env": {"A": "1", "B": "a"}, "l": [1], "k": {}},
        "b": {"x": 1, "env": {"A": "1", "B": "b"}, "l": [2], "k": 3, "only": {"z": {}}},
        "c": {"x": 2, "env": {"A": "1"}, "l": [1], "k": {}},
    }
    doc = shared_and_own(by_node)
    assert doc["shared"] == {"env": {"A": "1"}}
    assert {n: settings_of(doc, n) for n in by_node} == by_node
    same = shared_and_own({"a": {"x": [1]}, "b": {"x": [1]}})
    assert same == {"shared": {"x": [1]}, "own": {}}


def test_the_first_pass_bound_reaches_the_ranks_under_slurm(tmp_path: Any) -> None:
    """nccl_pair_rounds from --config FILE (default 16, as the Ansible path) in the launch's and
    the pairwise relaunch's rank-script arguments."""
    from nccl_preflight.core.layout import nccl_rank_layout
    from tests.check.support import load_script

    nc = load_script()
    path = tmp_path / "nccl.yml"
    for text, expected in (("", 16), ("nccl_pair_rounds: 5\n", 5)):
        path.write_text('nccl_fabric_cidr: "10.0.0.0/8"\n' + text)
        run = SlurmRun.__new__(SlurmRun)
        run.config, run.pair_triggers = load_config(path), []
        run.nodes, run.layout = ["n"], nccl_rank_layout(["n"])
        run.env_by_node = {"n": {"backend": "gloo"}}
        for args in (run.script_args()[1], run.script_args(pairwise_only=True)[1]):
            parsed = nc.parse_args(["--rank", "0", "--world-size", "1", *args])
            assert parsed.pair_rounds == expected, args
