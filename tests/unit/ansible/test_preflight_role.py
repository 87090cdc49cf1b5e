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

from nccl_preflight.core.preflight.start import nccl_preflight_start

ROOT = Path(__file__).resolve().parents[3]
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
    "notify", "check_mode", "ignore_unreachable",
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


SETTINGS = ROOT / "roles" / "preflight" / "tasks" / "settings.yml"
# Playbook tasks that make no call on a node.
PLAYBOOK_ONLY = {"ansible.builtin.import_role", "ansible.builtin.add_host"}
PLAYBOOK = ROOT / "playbooks" / "validate.yml"
LAUNCH = ROOT / "roles" / "launch" / "tasks" / "run.yml"
FACTS = ROOT / "roles" / "facts" / "tasks" / "main.yml"


# The pre-flight's stop of listeners its probe call left waiting for a later batch's probe (more
# hosts than forks): one more call, only on those hosts.
LATE_STOP_WHEN = "preflight_probe.collect.pending | default(false)"


def failure_tasks(node: Any) -> list[dict]:
    """The tasks of the blocks' rescue sections: they run only when a task of the block failed."""
    found: list[dict] = []
    for task in node or []:
        if "block" in task:
            found += tasks_of(task.get("rescue")) + failure_tasks(task["block"])
    return found


def node_calls(path: Path) -> list[str]:
    """The module calls a tasks file makes on a node (the rescue's stop, which only runs when
    the launch failed, and the pre-flight's late stop left out)."""
    tree = yaml.safe_load(path.read_text())
    on_failure = failure_tasks(tree)
    return [
        action_of(t)
        for t in tasks_of(tree)
        if action_of(t) not in CONTROLLER_ACTIONS
        and t.get("delegate_to") != "localhost"
        and t not in on_failure
        and t.get("when") != LATE_STOP_WHEN
    ]


PLAIN_PYTHON = "{{ ansible_facts.nccl.module_python | default('') }}"


def test_one_module_call_per_host_in_the_preflight_play_and_no_async() -> None:
    tasks = tasks_of(yaml.safe_load(TASKS.read_text()))
    assert len(tasks) > 5
    assert node_calls(TASKS) == ["nccl_preflight_observe"]
    # The firewall is read by the probe's call, with become when asked for; the same call
    # collects the listeners, and never fails the host for it.
    probe, late = [t for t in tasks if action_of(t) == "nccl_preflight_observe"]
    assert "firewall" in probe["nccl_preflight_observe"]
    assert probe["nccl_preflight_observe"]["collect"]["path"] == "{{ preflight_run_dir }}"
    assert probe["become"] == "{{ preflight_become_firewall }}"
    assert probe.get("ignore_errors") is True and "when" not in probe
    # It leaves listeners still waiting for a peer's probe running; the next task, after every
    # host's probes (linear strategy), stops them, on those hosts only, with collect alone.
    assert probe["nccl_preflight_observe"]["collect"]["leave_unfinished"] is True
    assert tasks.index(late) == tasks.index(probe) + 1
    assert late["when"] == LATE_STOP_WHEN and late.get("ignore_errors") is True
    assert late["nccl_preflight_observe"].keys() == {"collect", "program_python", "run_id"}
    # Both run as the plain program on the node's Python (plugins/action), not as a module.
    for call in (probe, late):
        assert call["nccl_preflight_observe"]["program_python"] == PLAIN_PYTHON
        assert call["nccl_preflight_observe"]["run_id"] == "{{ nccl_run_id }}"
    assert "leave_unfinished" not in late["nccl_preflight_observe"]["collect"]
    assert late["nccl_preflight_observe"]["collect"]["path"] == "{{ preflight_run_dir }}"
    assert late["register"] == "preflight_late_collect"
    assert [t["name"] for t in tasks if {"async", "poll"} & t.keys()] == []
    assert [t["name"] for t in tasks if "async_status" in action_of(t)] == []
    assert [t["name"] for t in tasks if "until" in t] == []  # no polling loop either


# What a play of validate.yml may say: where it runs and which roles (kubespray's cluster.yml);
# its vars only point Ansible's own files into the run directory. Every task lives in a role.
PLAY_KEYS = {"name", "hosts", "gather_facts", "vars", "roles", "tags"}
PLAY_VARS = {"ansible_remote_tmp", "ansible_async_dir"}


def play_tasks(play: dict) -> list[dict]:
    """The tasks a play of validate.yml runs: its roles' tasks/main.yml, in order."""
    files = [ROOT / "roles" / role["role"] / "tasks" / "main.yml" for role in play["roles"]]
    return [t for f in files if f.exists() for t in tasks_of(yaml.safe_load(f.read_text()))]


def test_every_play_of_the_playbook_is_hosts_and_roles() -> None:
    plays = yaml.safe_load(PLAYBOOK.read_text())
    # One play per set of hosts (nodes, reachable, environment ready, ready or stopped, the
    # control machine): stages on the same hosts share a play (each play costs time).
    assert [p["hosts"] for p in plays] == [
        "nccl_nodes", "nccl_reachable", "nccl_env_ready", "nccl_env_ready:nccl_env_stopped",
        "localhost",
    ]  # fmt: skip
    assert [sorted(p.keys() - PLAY_KEYS) for p in plays] == [[]] * len(plays)
    assert [sorted(p.get("vars", {}).keys() - PLAY_VARS) for p in plays] == [[]] * len(plays)
    for play in plays:
        assert {"hosts", "gather_facts", "roles"} <= play.keys(), play["name"]
        assert play["gather_facts"] is False, play["name"]
        assert play["roles"][0]["role"] == "nccl_defaults", play["name"]
        assert all((ROOT / "roles" / r["role"]).is_dir() for r in play["roles"]), play["name"]
        # Every stage has its tags: the play's, or, where stages share a play, each role's.
        for role in play["roles"][1:]:
            assert play.get("tags") or role.get("tags"), (play["name"], role["role"])
            assert not (play.get("tags") and role.get("tags")), (play["name"], role["role"])


def test_a_role_that_may_end_its_play_early_is_the_last_of_its_play() -> None:
    """launch and cleanup end their play when nothing is left to do (meta end_play: no task per
    host), which ends every role after them too: none comes after them."""
    enders = {
        path.parts[-3]
        for path in (ROOT / "roles").glob("*/tasks/*.yml")
        if any(
            t.get("ansible.builtin.meta") == "end_play"
            for t in tasks_of(yaml.safe_load(path.read_text()))
        )
    }
    assert enders == {"launch", "cleanup"}
    for play in yaml.safe_load(PLAYBOOK.read_text()):
        roles = [r["role"] for r in play["roles"]]
        assert not (enders & set(roles[:-1])), play["name"]


def test_each_stage_keeps_its_tags() -> None:
    """--tags facts, preflight, launch and report select the same roles as with a play per stage."""
    tags = {}
    for play in yaml.safe_load(PLAYBOOK.read_text()):
        for role in play["roles"][1:]:
            tags[role["role"]] = set(play.get("tags") or role["tags"])
    assert tags == {
        "validate_inputs": {"always"},
        "facts": {"facts", "preflight", "launch"},
        "nccl_env": {"facts", "preflight", "launch"},
        "preflight": {"preflight"},
        "launch": {"launch"},
        "cleanup": {"preflight", "launch"},
        "report": {"preflight", "launch", "report"},
    }


def facts_play_tasks() -> list[dict]:
    plays = yaml.safe_load(PLAYBOOK.read_text())
    [facts_play] = [p for p in plays if any(r["role"] == "facts" for r in p["roles"])]
    return [t for t in play_tasks(facts_play) if t in tasks_of(yaml.safe_load(FACTS.read_text()))]


def test_the_start_call_starts_the_listeners_the_probe_call_collects() -> None:
    """nccl_facts only reads; the call after it starts the warden and the pre-flight."""
    tasks = facts_play_tasks()
    calls = [t for t in tasks if action_of(t) not in CONTROLLER_ACTIONS | PLAYBOOK_ONLY]
    assert [action_of(t) for t in calls] == ["nccl_facts", "nccl_preflight_start"]
    facts, start = calls
    assert facts["register"] == "facts_result" and start["register"] == "facts_start_result"
    assert not {"preflight", "tether"} & set(facts["nccl_facts"])
    # A node that does not answer stays in the play, for the group nccl_unreachable.
    assert facts["ignore_unreachable"] is True and start["ignore_unreachable"] is True
    assert start["nccl_preflight_start"]["preflight"] == (
        "{{ _preflight_start if preflight_runs | bool else omit }}"
    )
    facts = start
    # The same directory: the start's path is <run_dir>/preflight with run_dir nccl_run_dir
    # (core/preflight/start.py), preflight_run_dir is nccl_env_run_dir/preflight, and
    # nccl_env_run_dir is nccl_run_dir (roles/nccl_env).
    assert "nccl_preflight_start(" in facts["vars"]["_preflight_start"]
    assert " run_dir=nccl_run_dir," in facts["vars"]["_preflight_start"]
    settings = {k: "" for k in ("master", "run_dir_mode", "python", "socket_ifname")}
    settings.update(fabric_cidr="", backend="nccl", extra_env={}, lock=None, full_mesh=False)
    started = nccl_preflight_start(
        "h",
        nodes=["h"],
        run_dir="/R",
        python_timeout=1,
        master_port=1,
        listen_timeout=1,
        **settings,
    )
    assert started["path"] == "/R/preflight"
    defaults = yaml.safe_load((ROOT / "roles/preflight/defaults/main.yml").read_text())
    assert defaults["preflight_run_dir"] == "{{ nccl_env_run_dir }}/preflight"
    # The pre-flight's defaults are loaded by a task file without tasks.
    [imported] = [t for t in tasks if "ansible.builtin.import_role" in t]
    assert imported["ansible.builtin.import_role"] == {
        "name": "preflight",
        "tasks_from": "settings.yml",
    }
    assert yaml.safe_load(SETTINGS.read_text()) == []


def test_five_module_calls_per_node_for_a_whole_run() -> None:
    """facts (only reads), the start, probe + firewall + collect, torchrun's start and its wait
    (its short looks are one task)."""
    facts = [action_of(t) for t in facts_play_tasks()]
    facts = [a for a in facts if a not in CONTROLLER_ACTIONS | PLAYBOOK_ONLY]
    calls = facts + node_calls(TASKS) + node_calls(LAUNCH)
    assert calls == [
        "nccl_facts",
        "nccl_preflight_start",
        "nccl_preflight_observe",
        "nccl_torchrun",
        "nccl_torchrun",
    ]
