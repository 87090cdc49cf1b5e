# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The plan document, plan.json (core/stage.py plan_document), and why a launch is skipped
(skip_reason): roles/launch/tasks/plan.yml's call rendered by Ansible and SlurmRun.plan's on the
same user values write the same document (the Slurm one only adds front_end), nccl_baseline
included (it used to be accepted under Slurm and ignored)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nccl_preflight.core import bandwidth_expectation, stage
from tests.builders.stage import (
    NODES,
    ROOT,
    layout,
    render,
    role_variables,
    slurm_config,
    slurm_run,
    yaml_of,
)

RUN_ID = "20260101T000000-abcdef"
HOSTS = [{"host": n, "link_speed_mbps": 25000, "rdma": None, "reachable": True} for n in NODES]
USER: dict[str, Any] = {
    "nccl_run_timeout": 120,
    "nccl_busbw_warn": 0.7,
    "nccl_busbw_crit": 0.4,
    "nccl_busbw_efficiency": 0.85,
    "nccl_busbw_min_bytes": 4096,
    "nccl_expected_busbw": {"all_gather": 12.5},
    "nccl_check_args": ["--tests", "all_reduce_avg,barrier", "--dtype", "int8"],
    "nccl_baseline": "20251231T000000-123456",
}


def plan_task(name: str) -> dict[str, Any]:
    for task in yaml_of("roles/launch/tasks/plan.yml"):
        if task["name"].startswith(name):
            return task
    raise AssertionError(name)


def ansible_plan(user: dict[str, Any], report_root: Path, skipped: str = "") -> dict[str, Any]:
    """plan.json's data as roles/launch/tasks/plan.yml renders it."""
    variables = {
        **role_variables("roles/launch/defaults/main.yml", "roles/launch/vars/main.yml"),
        **user,
        "nccl_run_id": RUN_ID,
        "nccl_report_root": str(report_root),
        "launch_script": str(ROOT / "files" / "nccl_check.py"),
        "launch_plan_hosts": HOSTS,
        "launch_skip_reason": skipped,
        "nccl_env_layout": layout([2, 2, 2]),
        "nccl_env_master_addr": "198.18.0.1",
        "nccl_env_master_port": "29500",
        "nccl_env_backend": "gloo",
    }
    task = plan_task("Write plan.json")
    return render(task["vars"]["_launch_plan"], variables)


def slurm_plan(tmp_path: Path, user: dict[str, Any], skipped: str = "") -> dict[str, Any]:
    """plan.json as SlurmRun.plan writes it, its host rows (observed on the nodes) as above."""
    run = slurm_run(slurm_config(tmp_path, user), [2, 2, 2])
    run.run_id = RUN_ID
    run.run_dir = tmp_path / "reports" / RUN_ID
    master = {"master_addr": "198.18.0.1", "master_port": 29500, "backend": "gloo"}
    run.env_by_node = {node: dict(master) for node in NODES}
    run.plan_hosts = lambda obs: [dict(row) for row in HOSTS]  # type: ignore[method-assign]
    run.plan(None, skipped)  # type: ignore[arg-type]
    return json.loads((run.run_dir / "plan.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("user", [{}, USER], ids=["defaults", "user values"])
def test_both_front_ends_write_the_same_plan(tmp_path: Path, user: dict[str, Any]) -> None:
    from_slurm = slurm_plan(tmp_path, user)
    assert from_slurm.pop("front_end") == "slurm"
    from_ansible = ansible_plan(user, tmp_path / "reports")
    assert json.loads(json.dumps(from_ansible)) == from_slurm
    bandwidth = from_slurm["bandwidth"]
    if user:
        assert (
            bandwidth["warn"] == 0.7
            and bandwidth["crit"] == 0.4
            and bandwidth["efficiency"] == 0.85
        )
        assert bandwidth["baseline"] == f"{tmp_path}/reports/{USER['nccl_baseline']}"
        assert from_slurm["pair_triggers"][0]["trigger_gbps"] == 12.5 * 0.7
        # int8 all_reduce_avg over gloo: the support table predicts its skip
        assert [s["test"] for s in from_slurm["predicted_skips"]] == ["all_reduce_avg"]
    else:
        # unset: the variables' one default, the same the report falls back to
        assert {k: bandwidth[k] for k in bandwidth_expectation.settings({})} == bandwidth
        assert (
            bandwidth["warn"] == 0.8
            and bandwidth["efficiency"] == 0.9
            and bandwidth["baseline"] == ""
        )


def test_a_baseline_directory_is_kept_as_given_under_both(tmp_path: Path) -> None:
    user = {"nccl_baseline": "/srv/runs/good"}
    assert slurm_plan(tmp_path, user)["bandwidth"]["baseline"] == "/srv/runs/good"
    assert ansible_plan(user, tmp_path)["bandwidth"]["baseline"] == "/srv/runs/good"


def test_a_skipped_launch_says_why_in_the_same_words(tmp_path: Path) -> None:
    expression = plan_task("Decide whether")["ansible.builtin.set_fact"]["launch_skip_reason"]
    for absent, failed in ((["node3"], []), ([], ["node1", "node2"]), ([], [])):
        variables = {
            "ansible_check_mode": False,
            "groups": {"nccl_nodes": NODES},
            "_launch_absent": absent,
            "_launch_preflight_failed": failed,
        }
        said = render(expression, variables)
        assert said == stage.skip_reason(NODES, absent, failed)
        assert slurm_plan(tmp_path, {}, said)["launch_skipped"] == said
    assert "node3 dropped out before launch" in stage.skip_reason(NODES, ["node3"], [])
    assert stage.skip_reason(NODES, [], ["node1"]).startswith("the pre-flight failed on node1")
