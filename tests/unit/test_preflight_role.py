# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/preflight/tasks/main.yml: the pre-flight's cost on a node, as the tasks file states it.

Every module task on a node is an SSH round trip (~0.65 s wall, ~0.4 s CPU per host, see
BENCHMARKS.md). The phase may run at most four of them per host, and no async job (each async task
costs several round trips plus polling). Whatever else the role does runs on the control machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "preflight" / "tasks" / "main.yml"
# Actions that never reach a node: the controller evaluates them.
CONTROLLER_ACTIONS = {
    "ansible.builtin.set_fact",
    "ansible.builtin.debug",
    "ansible.builtin.fail",
    "ansible.builtin.assert",
    "ansible.builtin.meta",
    "nccl_report_file",  # plugins/action: writes on the control machine, runs no module
}
KEYWORDS = {
    "name", "when", "register", "vars", "become", "ignore_errors", "delegate_to", "run_once",
    "any_errors_fatal", "changed_when", "failed_when", "loop", "loop_control", "tags", "block",
    "rescue", "always", "until", "retries", "delay", "async", "poll", "environment", "no_log",
    "notify", "check_mode",
}  # fmt: skip


def tasks_of(node: Any, inherited: dict | None = None) -> list[dict]:
    """Every task, blocks flattened; a block's delegate_to / run_once carry to its tasks."""
    found: list[dict] = []
    for task in node or []:
        if "block" in task:
            keep = {k: task[k] for k in ("delegate_to", "run_once") if k in task}
            for key in ("block", "rescue", "always"):
                found += tasks_of(task.get(key), {**(inherited or {}), **keep})
        else:
            found.append({**(inherited or {}), **task})
    return found


def action_of(task: dict) -> str:
    [action] = [k for k in task if k not in KEYWORDS]
    return action


def test_three_module_calls_per_host_and_no_async() -> None:
    tasks = tasks_of(yaml.safe_load(TASKS.read_text()))
    assert len(tasks) > 5
    on_nodes = [
        action_of(t)
        for t in tasks
        if action_of(t) not in CONTROLLER_ACTIONS and t.get("delegate_to") != "localhost"
    ]
    assert on_nodes == ["nccl_preflight_listen", "nccl_tcp_probe", "nccl_preflight_listen"]
    # The firewall is read by the probe's call, with become when asked for.
    [probe] = [t for t in tasks if action_of(t) == "nccl_tcp_probe"]
    assert "firewall" in probe["nccl_tcp_probe"]
    assert probe["become"] == "{{ preflight_become_firewall }}"
    assert [t["name"] for t in tasks if {"async", "poll"} & t.keys()] == []
    assert [t["name"] for t in tasks if "async_status" in action_of(t)] == []
    assert [t["name"] for t in tasks if "until" in t] == []  # no polling loop either


def test_the_listeners_are_stopped_after_the_probes_in_their_own_directory() -> None:
    tasks = tasks_of(yaml.safe_load(TASKS.read_text()))
    listen = [t for t in tasks if action_of(t) == "nccl_preflight_listen"]
    assert [t["nccl_preflight_listen"]["state"] for t in listen] == ["started", "stopped"]
    assert {t["nccl_preflight_listen"]["path"] for t in listen} == {"{{ preflight_run_dir }}"}
    order = [action_of(t) for t in tasks]
    started, stopped = [i for i, a in enumerate(order) if a == "nccl_preflight_listen"]
    assert started < order.index("nccl_tcp_probe") < stopped
    # Findings never fail a host: a listener that cannot start or stop is recorded.
    assert all(t.get("ignore_errors") is True for t in listen)
