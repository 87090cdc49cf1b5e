# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The launch's hosts read out of Ansible's hostvars by core functions (roles/launch's and
roles/nccl_env's filters): plan.json's rows (core/launch_hosts.py), the watch's ring
(core/run_watch.py), the hosts whose start failed, how the run ended on each host, and what the
environment stage writes into the report directory (core/env_file.py). The hostvars here are
plain dicts shaped as Ansible's: facts set by the roles, registered results, ansible_facts."""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.env_file import nccl_env_report_files
from nccl_preflight.core.launch_hosts import (
    nccl_cleanup_left,
    nccl_launch_ended,
    nccl_not_started,
    nccl_not_started_reason,
    nccl_plan_hosts,
)
from nccl_preflight.core.run_watch import nccl_watch_hosts

LAYOUT = {
    "hosts": [
        {"host": "a", "node_rank": 0, "nproc_per_node": 2, "rank_offset": 0, "ranks": [0, 1]},
        {"host": "b", "node_rank": 1, "nproc_per_node": 1, "rank_offset": 2, "ranks": [2]},
        {"host": "c", "node_rank": 2, "nproc_per_node": 1, "rank_offset": 3, "ranks": [3]},
    ],
}
LAYOUT["by_host"] = {row["host"]: row for row in LAYOUT["hosts"]}


def facts(state: str, speed: int) -> dict[str, Any]:
    return {"interfaces": {"fab0": {"state": state, "speed_mbps": speed}}}


def hostvars() -> dict[str, dict[str, Any]]:
    """a and b went through the environment stage; c did not answer (no facts, no nccl_env_*)."""
    return {
        "a": {
            "nccl_env_ifname": "fab0",
            "nccl_env_address": "10.0.0.1",
            "nccl_env_master_port": "29500",
            "nccl_env_backend_choice": {"backend": "gloo", "reason": "no GPU", "devices": 0},
            "ansible_facts": {"nccl": facts("up", 100000)},
            "nccl_env_file_content": "A=1\n",
            "nccl_env_file_mode": "0600",
            "launch_start": {"changed": True},
            "launch_result": {"timed_out": True, "rank_exits": [{"rank": 0, "exitcode": 0}]},
            "launch_stop": {"skipped": True},
        },
        "b": {
            "nccl_env_ifname": "fab0",
            "nccl_env_address": "10.0.0.2",
            "nccl_env_master_port": 29500,
            "ansible_facts": {"nccl": facts("down", 25000)},
            "nccl_env_file_content": "B=2\n",
            "nccl_env_file_mode": "0640",
            "launch_start": {"failed": True, "msg": "no torch"},
            "launch_result": {"failed": True},
            "launch_stop": {"stopped_by": "the start failed", "stop": {"kind": "x"}},
        },
        "c": {"launch_start": {"unreachable": True}},
    }


def test_plan_rows_keep_the_hosts_that_dropped_out() -> None:
    rows = nccl_plan_hosts(LAYOUT, hostvars(), ["a", "b"], "auto")
    assert [r["host"] for r in rows] == ["a", "b", "c"]
    a, b, c = rows
    assert (a["address"], a["ifname"], a["link_speed_mbps"], a["reachable"]) == (
        "10.0.0.1",
        "fab0",
        100000,
        True,
    )
    assert a["backend_choice"]["backend"] == "gloo" and b["backend_choice"] is None
    assert (a["rank_offset"], b["nproc_per_node"], b["link_speed_mbps"]) == (0, 1, 25000)
    # No active RDMA port: no rdma; auto expects the socket transport.
    assert a["rdma"] is None and a["expect_net"]["network"] == "socket"
    assert (c["reachable"], c["address"], c["ifname"], c["link_speed_mbps"]) == (
        False,
        None,
        None,
        None,
    )
    assert nccl_plan_hosts(LAYOUT, hostvars(), ["a"], "ib")[1]["expect_net"]["network"] == "ib"


def test_the_watch_ring_is_the_hosts_of_the_play_in_node_rank_order() -> None:
    rows = nccl_watch_hosts(LAYOUT, hostvars(), ["b", "a"])
    assert [r["host"] for r in rows] == ["a", "b"]
    assert rows[0]["probes"] == [{"host": "b", "address": "10.0.0.2", "port": 29500}]
    assert rows[1]["probes"] == [{"host": "a", "address": "10.0.0.1", "port": 29500}]
    assert (rows[0]["ranks"], rows[1]["preflight_state"]) == ([0, 1], "down")
    alone = nccl_watch_hosts(LAYOUT, hostvars(), ["a"])
    assert alone[0]["probes"] == [] and alone[0]["preflight_state"] == "up"


def test_the_hosts_whose_start_failed_or_did_not_answer() -> None:
    assert nccl_not_started(hostvars(), ["a", "b", "c"]) == ["b", "c"]
    assert nccl_not_started({"a": {}}, ["a"]) == []
    # The wait's stop_reason, worded as the watch words a start that failed in the same call.
    assert nccl_not_started_reason(hostvars(), ["a", "b", "c"]) == (
        "torchrun did not start on b, c, so the rendezvous could not complete"
    )
    assert nccl_not_started_reason(hostvars(), ["a"]) == ""


def test_how_the_run_ended_is_the_last_call_that_ran() -> None:
    rows = nccl_launch_ended(hostvars(), ["a", "b", "c"])
    # a: the stop was skipped, so the wait's result; b: the stop ran; c: neither ran.
    assert rows[0] == {
        "host": "a",
        "timed_out": True,
        "stopped_by": None,
        "stop": None,
        "rank_exits": [{"rank": 0, "exitcode": 0}],
    }
    assert (rows[1]["stopped_by"], rows[1]["stop"], rows[1]["timed_out"]) == (
        "the start failed",
        {"kind": "x"},
        False,
    )
    assert rows[2] == {
        "host": "c",
        "timed_out": False,
        "stopped_by": None,
        "stop": None,
        "rank_exits": [],
    }


def test_the_environment_stage_writes_every_env_file_then_every_finding() -> None:
    finding = {"check": "environment", "host": "b", "status": "error"}
    files = nccl_env_report_files(hostvars(), ["a", "b"], {"b": finding}, LAYOUT, "/r/t1")
    assert files == [
        {"dest": "/r/t1/a/nccl.env", "content": "A=1\n", "mode": "0600"},
        {"dest": "/r/t1/b/nccl.env", "content": "B=2\n", "mode": "0640"},
        {
            "dest": "/r/t1/preflight/b.json",
            "data": {"host": "b", "results": [finding], "layout": LAYOUT["by_host"]["b"]},
        },
    ]


def _cleanup_hostvars() -> dict[str, dict]:
    """Five hosts of one run, each ended a different way (what roles/cleanup reads)."""
    ran = {"nccl_env_run_dir": "/tmp/nccl-preflight-x"}
    return {
        # A launch that passed: its wait removed the directory.
        "passed": {**ran, "launch_result": {"run_dir_removed": True}},
        # The wait failed, so the stop ran; it did not remove the directory.
        "stopped": {
            **ran,
            "launch_result": {"run_dir_removed": True},
            "launch_stop": {"run_dir_removed": False},
        },
        # The stop was skipped: the wait's answer counts.
        "skipped_stop": {
            **ran,
            "launch_result": {"run_dir_removed": True},
            "launch_stop": {"skipped": True},
        },
        # No launch followed; the pre-flight's late stop of the listeners removed it.
        "preflight_only": {**ran, "preflight_late_collect": {"collect": {"run_dir_removed": True}}},
        # The launch never reached this host, and it asked to keep its directory.
        "kept": {**ran, "launch_keep_run_dir": "yes"},
        # The environment stage stopped the run after the facts play started the listeners.
        "env_stopped": {"facts_start_result": {"preflight": {"changed": True}}},
        "env_stopped_idle": {"facts_start_result": {"preflight": {"changed": False}}},
    }


def test_cleanup_names_only_the_hosts_whose_run_directory_or_listeners_are_left() -> None:
    hostvars = _cleanup_hostvars()
    groups = {
        "nccl_env_ready": ["passed", "stopped", "skipped_stop", "preflight_only", "kept"],
        "nccl_env_stopped": ["env_stopped", "env_stopped_idle"],
    }
    left = nccl_cleanup_left(hostvars, list(hostvars), groups)
    assert left == {"stopped": "run_dir", "env_stopped": "listeners"}
    # launch_keep_run_dir for the run (the host's own unset) keeps every directory.
    del hostvars["kept"]["launch_keep_run_dir"]
    assert nccl_cleanup_left(hostvars, ["stopped", "kept"], groups, True) == {}
    assert nccl_cleanup_left(hostvars, ["kept"], groups) == {"kept": "run_dir"}
    # A run that passed everywhere leaves nothing: the play ends before either task.
    assert nccl_cleanup_left(hostvars, ["passed", "skipped_stop"], groups) == {}
