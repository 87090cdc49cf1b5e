# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The launch's stage decisions (core/stage.py): the rank script's argv of the main launch and of
the pairwise-only relaunch, their timeouts and the kill grace. Both front-ends call the same
functions: each test renders roles/launch's call with Ansible and compares it with SlurmRun's on
the same user values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import stage
from nccl_preflight.node.collective_tables import ALL_TESTS, BANDWIDTH_COLLECTIVES
from tests.builders.stage import (
    layout,
    render,
    role_variables,
    slurm_config,
    slurm_run,
    yaml_of,
)
from tests.check.support import load_script

nc = load_script()
RUN_DIR = "/tmp/nccl-preflight-run"
HOSTS = [{"host": n, "link_speed_mbps": 10000, "rdma": None} for n in ("node1", "node2", "node3")]
USER: dict[str, Any] = {
    "nccl_run_timeout": 90,
    "nccl_pair_rounds": 4,
    "nccl_pair_min_ratio": 0.7,
    "nccl_busbw_min_bytes": 1024,
    "nccl_expected_busbw": {"all_reduce": 40},
    "nccl_check_args": ["--tests", "broadcast,barrier", "--max-bytes", "64K", "--pair-iters", "3"],
}


def task_vars(relative: str, name: str) -> str:
    """The expression of the task variable ``name`` of roles/launch/tasks/``relative``."""
    for block in yaml_of(f"roles/launch/tasks/{relative}"):
        for task in [block, *block.get("block", [])]:
            if name in (task.get("vars") or {}):
                return str(task["vars"][name])
    raise AssertionError(f"{name} not in {relative}")


def ansible_variables(user: dict[str, Any], per_node: list[int]) -> dict[str, Any]:
    return {
        **role_variables("roles/launch/defaults/main.yml", "roles/launch/vars/main.yml"),
        **user,
        "nccl_env_layout": layout(per_node),
        "nccl_env_backend": "gloo",
        "nccl_env_run_dir": RUN_DIR,
        "launch_plan_hosts": HOSTS,
    }


def ansible_args(user: dict[str, Any], per_node: list[int], pairwise_only: bool) -> list[str]:
    """The rank script's argv as roles/launch renders it (run.yml, pairwise_run.yml)."""
    if pairwise_only:
        expression = task_vars("pairwise_run.yml", "_launch_relaunch_args")
    else:
        expression = task_vars("run.yml", "_launch_script_args")
    args = render(expression, ansible_variables(user, per_node))
    # the one difference: each front-end's results directory on the node
    at = args.index("--out-dir") + 1
    assert args[at] == f"{RUN_DIR}/results"
    return [*args[:at], stage.RESULTS_DIR, *args[at + 1 :]]


def slurm_args(tmp_path: Path, user: dict[str, Any], per_node: list[int], pairwise_only: bool):
    run = slurm_run(slurm_config(tmp_path, user), per_node)
    run.pair_triggers = stage.pair_triggers(run.config, HOSTS)
    return run.script_args(pairwise_only)


@pytest.mark.parametrize("user", [{}, USER], ids=["defaults", "user values"])
@pytest.mark.parametrize("pairwise_only", [False, True], ids=["main", "relaunch"])
def test_both_front_ends_give_the_ranks_the_same_argv(
    tmp_path: Path, user: dict[str, Any], pairwise_only: bool
) -> None:
    per_node = [2, 1, 3]
    timeout, from_slurm = slurm_args(tmp_path, user, per_node, pairwise_only)
    assert ansible_args(user, per_node, pairwise_only) == from_slurm
    # what the ranks then run with, by the rank script's own parser
    parsed = nc.parse_args(["--rank", "0", "--world-size", "6", *from_slurm])
    assert parsed.ranks_per_node == [2, 1, 3]
    run_timeout = int(user.get("nccl_run_timeout", 300))
    if pairwise_only:
        assert timeout == min(run_timeout, stage.RELAUNCH_TIMEOUT_S)
        assert parsed.pairwise == "always" and parsed.pair_iters == stage.RELAUNCH_PAIR_ITERS
        assert parsed.tests == ["barrier"]
    else:
        assert timeout == run_timeout
        assert parsed.pair_rounds == int(user.get("nccl_pair_rounds", 16))
        # nccl_check_args come last and win
        assert parsed.tests == (["broadcast", "barrier"] if user else list(ALL_TESTS))
    assert parsed.timeout == stage.under(timeout) < timeout


def test_the_triggers_reach_the_ranks_with_nccl_busbw_warn(tmp_path: Path) -> None:
    _, args = slurm_args(tmp_path, USER, [1, 1, 1], False)
    triggers = dict(nc.parse_args(["--rank", "0", "--world-size", "3", *args]).pair_trigger)
    assert triggers["all_reduce"] == pytest.approx(40 * 0.8)  # nccl_expected_busbw x warn
    assert set(triggers) == set(BANDWIDTH_COLLECTIVES)
    # a 10 Gb/s link is 1.25 GB/s, x nccl_busbw_efficiency 0.9 x nccl_busbw_warn 0.8
    assert triggers["broadcast"] == pytest.approx(1.25 * 0.9 * 0.8)


def test_the_check_timeout_is_a_little_under_the_bound_and_overridable() -> None:
    assert stage.check_timeout({"nccl_run_timeout": 300}) == 270
    assert stage.check_timeout({"nccl_run_timeout": 30}) == 25
    assert stage.check_timeout({"nccl_run_timeout": 300, "launch_check_timeout": 40}) == 40
    # the Ansible path's override reaches the ranks
    user = {"launch_check_timeout": 42}
    args = render(task_vars("run.yml", "_launch_script_args"), ansible_variables(user, [1, 1, 1]))
    assert args[args.index("--timeout") + 1] == "42"


def test_the_relaunch_bounds_and_payload_are_overridable_on_the_ansible_path() -> None:
    user = {"launch_relaunch_timeout": 45, "launch_relaunch_pair_bytes": "1M"}
    variables = ansible_variables(user, [1, 1, 1])
    args = render(task_vars("pairwise_run.yml", "_launch_relaunch_args"), variables)
    assert args[args.index("--timeout") + 1] == str(stage.under(45))
    assert args[args.index("--pair-bytes") + 1] == "1M"
    assert render("{{ launch_stage_knobs | nccl_stage_relaunch_timeout }}", variables) == 45


def test_the_kill_grace_is_the_stage_apis_on_both_paths(tmp_path: Path) -> None:
    variables = ansible_variables({}, [1, 1, 1])
    assert render("{{ launch_kill_grace_s }}", variables) == stage.KILL_GRACE_S
    variables["launch_kill_grace"] = 9
    assert render("{{ launch_kill_grace_s }}", variables) == 9
    assert stage.kill_grace(slurm_config(tmp_path, {})) == stage.KILL_GRACE_S


def test_a_variable_without_value_or_default_is_named() -> None:
    with pytest.raises(stage.StageError, match="nccl_no_such_knob"):
        stage.knob({}, "nccl_no_such_knob")
    # an unset variable takes the one default (core/config.py defaults())
    assert stage.knob({"nccl_busbw_warn": None}, "nccl_busbw_warn") == 0.8
