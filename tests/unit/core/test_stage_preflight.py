# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight judge's settings (core/stage.py preflight_settings): roles/preflight's call
rendered by Ansible and the Slurm front-end's (slurm/run.py judge_settings) on the same user
values give the judge the same settings, each node's own nccl_extra_env included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import stage
from nccl_preflight.slurm.run import judge_settings
from tests.builders.stage import NODES, render, role_variables, slurm_config, yaml_of

USER: dict[str, Any] = {
    "nccl_require_gpu": False,
    "nccl_gpus_per_node": 8,
    "nccl_backend": "gloo",
    "nccl_extra_env": {"NCCL_IB_HCA": "mlx5_0"},
    "nccl_expected_versions": {"torch": "2.13.0"},
    "preflight_clock_check": True,
    "preflight_clock_max_skew_s": 2,
    "preflight_full_mesh": True,
}
NODE2_ENV = {"NCCL_IB_HCA": "mlx5_1", "CUDA_VISIBLE_DEVICES": "0,1"}


def ansible_settings(user: dict[str, Any], node2_env: dict[str, str] | None) -> dict[str, Any]:
    """The judge task's _settings of roles/preflight/tasks/main.yml, rendered by Ansible with
    the inventory's values (``node2_env``: node2's host_vars nccl_extra_env)."""
    variables = {
        **role_variables("roles/preflight/defaults/main.yml", "roles/preflight/vars/main.yml"),
        **user,
    }
    # group_vars give every host the run's nccl_extra_env, node2's host_vars its own
    group = {"nccl_extra_env": user["nccl_extra_env"]} if "nccl_extra_env" in user else {}
    hostvars: dict[str, dict[str, Any]] = {node: dict(group) for node in NODES}
    if node2_env is not None:
        hostvars["node2"]["nccl_extra_env"] = node2_env
    variables["groups"] = {"nccl_nodes": NODES, "nccl_master": NODES[:1]}
    variables["hostvars"] = hostvars
    for task in yaml_of("roles/preflight/tasks/main.yml"):
        if task["name"].startswith("Judge every host's checks"):
            return render(task["vars"]["_settings"], variables)
    raise AssertionError("no judge task in roles/preflight/tasks/main.yml")


@pytest.mark.parametrize("user", [{}, USER], ids=["defaults", "user values"])
@pytest.mark.parametrize("node2_env", [None, NODE2_ENV], ids=["one env", "node2's own"])
def test_both_front_ends_give_the_judge_the_same_settings(
    tmp_path: Path, user: dict[str, Any], node2_env: dict[str, str] | None
) -> None:
    config_values = dict(user)
    if node2_env is not None:
        config_values["nccl_node_vars"] = {"node2": {"nccl_extra_env": node2_env}}
    from_slurm = judge_settings(slurm_config(tmp_path, config_values), NODES)
    assert ansible_settings(user, node2_env) == from_slurm
    assert from_slurm["order"] == NODES and from_slurm["master"] == "node1"
    if node2_env is not None:
        assert from_slurm["extra_env_by_host"]["node2"] == NODE2_ENV
    if user:
        assert from_slurm["expected_versions"] == {"torch": "2.13.0"}
        assert from_slurm["require_gpu"] is False and from_slurm["full_mesh"] is True
        assert from_slurm["clock_check"] is True and from_slurm["clock_max_skew_s"] == 2.0
    else:
        assert from_slurm["require_gpu"] is True and from_slurm["requested_backend"] == "auto"


def test_a_setting_without_a_value_or_default_is_named() -> None:
    with pytest.raises(stage.StageError, match="preflight_expected_versions"):
        stage.preflight_settings({}, NODES, "node1", {})
