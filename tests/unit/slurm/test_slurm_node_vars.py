# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Per-node values under Slurm: nccl_node_vars maps Slurm hostlists (core/hostlist.py, as
`scontrol show hostnames` expands them) to the variables that may differ between nodes
(core/config.py NODE_VARIABLES), checked with the file and line before anything runs, and laid
over the run's values for the nodes each hostlist names (node_values) in the observe step, the
layout and the ranks' environment. The lab twin: tests/integration/test_slurm_run_lab.py, the
per-node values test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.slurm_sizes import fake_nodes, launch_doc, started
from nccl_preflight.core import hostlist
from nccl_preflight.core.config import ConfigError, load_config, node_values
from nccl_preflight.slurm import observe
from nccl_preflight.slurm.ship import settings_of


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("gpu1", ["gpu1"]),
        ("gpu[1-3]", ["gpu1", "gpu2", "gpu3"]),
        ("gpu[008-010]", ["gpu008", "gpu009", "gpu010"]),
        ("gpu[1,3-4],cpu7", ["gpu1", "gpu3", "gpu4", "cpu7"]),
        ("r[1-2]-n[01-02]", ["r1-n01", "r1-n02", "r2-n01", "r2-n02"]),
        ("a[1-2].ib", ["a1.ib", "a2.ib"]),
    ],
)
def test_hostlists_expand_as_scontrol_show_hostnames_does(expression: str, names: list) -> None:
    assert hostlist.expand(expression) == names


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("gpu[1-", "a '[' without its ']'"),
        ("gpu1]", "a ']' without its '['"),
        ("gpu[3-1]", "runs backwards"),
        ("gpu[a-b]", "is not numbers and ranges"),
        ("gpu1,,gpu2", "an empty name"),
        ("gpu[1-99999999]", "names too many hosts"),
    ],
)
def test_a_malformed_hostlist_is_refused_with_the_reason(expression: str, why: str) -> None:
    with pytest.raises(hostlist.HostlistError, match=why.replace("[", r"\[").replace("]", r"\]")):
        hostlist.expand(expression)


def config(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "nccl.yml"
    path.write_text("nccl_fabric_cidr: 10.1.0.0/16\nnccl_socket_ifname: ib0\n" + text)
    return load_config(path)


NODE_VARS = """nccl_node_vars:
  "gpu-node-000[0-1]":
    nccl_socket_ifname: ens1
    nccl_nproc_per_node: "4"
  gpu-node-0001:
    nccl_extra_env: {NCCL_IB_HCA: mlx5_2}
"""


def test_each_node_gets_the_values_of_every_hostlist_that_names_it(tmp_path: Path) -> None:
    values = config(tmp_path, NODE_VARS)
    first, second, third = (node_values(values, n) for n in fake_nodes(3))
    assert (first["nccl_socket_ifname"], first["nccl_nproc_per_node"]) == ("ens1", 4)
    assert first["nccl_extra_env"] == {}
    assert second["nccl_socket_ifname"] == "ens1"
    assert second["nccl_extra_env"] == {"NCCL_IB_HCA": "mlx5_2"}
    assert (
        third["nccl_socket_ifname"] == "ib0"
        and third["nccl_nproc_per_node"] == values["nccl_nproc_per_node"]
    )


def test_the_steps_and_the_ranks_get_each_nodes_own_values(tmp_path: Path) -> None:
    values = config(tmp_path, NODE_VARS)
    nodes = fake_nodes(3)
    shared = observe.observe_settings(values, nodes, "py")
    own = observe.own_fabric(values, nodes, shared["fabric"])
    assert set(own) == set(nodes[:2])  # the third uses the run's
    settings = {"shared": shared, "own": own}
    assert settings_of(settings, nodes[0])["fabric"] == {
        "socket_ifname": "ens1",
        "cidr": "10.1.0.0/16",
    }
    assert settings_of(settings, nodes[2])["fabric"]["socket_ifname"] == "ib0"
    doc = launch_doc(values, nodes, started(nodes))
    env = {n: settings_of(doc, n)["env"] for n in nodes}
    assert env[nodes[1]].get("NCCL_IB_HCA") == "mlx5_2"
    assert "NCCL_IB_HCA" not in env[nodes[0]] and "NCCL_IB_HCA" not in env[nodes[2]]
    nproc = [settings_of(doc, n)["torchrun"]["nproc_per_node"] for n in nodes]
    assert nproc == [4, 4, 1]


def test_what_is_one_value_for_the_run_or_wrong_is_refused_with_file_and_line(
    tmp_path: Path,
) -> None:
    text = (
        "nccl_master_port: 29500\n"
        "nccl_node_vars:\n"
        "  gpu[1-:\n"
        "    nccl_socket_ifname: x\n"
        "  gpu9:\n"
        "    nccl_master_port: 1\n"
        "    nccl_sockt_ifname: y\n"
        "    nccl_nproc_per_node: many\n"
    )
    with pytest.raises(ConfigError) as caught:
        config(tmp_path, text)
    lines = str(caught.value).splitlines()
    place = f"{tmp_path / 'nccl.yml'}:4: nccl_node_vars: "
    assert f"{place}'gpu9': nccl_master_port: one value for the whole run" in "\n".join(lines)
    assert any(
        line.startswith(f"{place}'gpu9': nccl_sockt_ifname: is not a known variable; did you mean "
                        "nccl_socket_ifname?")
        for line in lines
    )  # fmt: skip
    assert f"{place}'gpu9': nccl_nproc_per_node: is 'many', not an integer" in lines
    assert any(line.startswith(f"{place}'gpu[1-': not a Slurm hostlist: ") for line in lines)
    with pytest.raises(ConfigError, match="nccl_node_vars: is 'x', not a mapping"):
        config(tmp_path, "nccl_node_vars: x\n")
