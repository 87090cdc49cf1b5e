# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""bench/ansible_floor.py's mirror finds the launch's wait in roles/launch by its name: a renamed
task would leave the mirror "with torchrun" without torchrun (it measured 0.25x once)."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.ansible_floor import WAIT_TASK, mirror_task

RUN_YML = Path(__file__).resolve().parents[3] / "roles" / "launch" / "tasks" / "run.yml"


def launch_tasks() -> list[dict]:
    [block] = yaml.safe_load(RUN_YML.read_text())
    return block["block"]


def recorded(name: str) -> dict:
    """A task as bench_timer records it: ran on both hosts of the lab (@0, @1)."""
    return {
        "name": f"launch : {name}",
        "action": "nccl_torchrun",
        "items": {},
        "results": {"@0": "ok", "@1": "ok"},
        "run_once": False,
        "delegate_to": None,
    }


def test_exactly_one_task_of_the_launch_is_the_mirrors_torchrun_by_hand() -> None:
    names = [t["name"] for t in launch_tasks() if WAIT_TASK in t["name"].lower()]
    assert len(names) == 1 and "wait" in names[0].lower()
    mirrored = mirror_task(recorded(names[0]), ["a", "b"], run=True, names=["a", "b"])
    assert mirrored["name"].endswith("(torchrun by hand)")
    assert mirrored["ansible.builtin.command"] == {
        "argv": "{{ bench_floor_argv[inventory_hostname] }}"
    }
    other = [t["name"] for t in launch_tasks() if t["name"] not in names]
    for name in other:  # the start task (more hosts than forks) stays a node call
        task = mirror_task(recorded(name), ["a", "b"], run=True, names=["a", "b"])
        assert "ansible.builtin.ping" in task
