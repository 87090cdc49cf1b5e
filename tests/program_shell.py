# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The SSH connection of an action plugin that runs a node program through BOOT
(core/stdin_ship.py), stood in for by ``/bin/sh -c`` on this machine: the program runs for real."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import Any
from unittest import mock

from ansible.plugins.action import ActionBase


class Shell:
    """The connection: runs the action's command with ``/bin/sh -c`` on this machine; ``rc``
    given, answers that instead, as a node without that Python does."""

    def __init__(self, rc: int | None = None) -> None:
        self.rc, self.calls = rc, 0
        self.commands: list[str] = []

    def __call__(self, cmd: str, sudoable: bool = True, in_data: bytes = b"") -> dict[str, Any]:
        self.calls += 1
        self.commands.append(cmd)
        assert sudoable  # the firewall may need become: the program runs as the module would
        if self.rc is not None:
            return {"rc": self.rc, "stdout": "", "stderr": "sh: 1: python9: not found"}
        done = subprocess.run(
            ["/bin/sh", "-c", cmd], input=in_data, capture_output=True, timeout=60, check=False
        )
        return {"rc": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr}


def program_action(action_class: type, action: str, shell: Shell, check_mode: bool = False) -> Any:
    """An action plugin of ``action_class`` with only what its program path uses: its task's
    action name and check mode, the connection (``shell``) and no task environment."""
    plugin = object.__new__(action_class)
    plugin._task = SimpleNamespace(check_mode=check_mode, action=action)
    plugin._low_level_execute_command = shell
    plugin._compute_environment_string = lambda: ""  # the task sets no environment
    return plugin


def run_action(
    plugin: Any, args: dict[str, Any], module_answer: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``plugin.run()`` on the task's options ``args``, ActionBase.run's own checks (they need a
    whole task) left out: -> (its result, the options of each module call it made instead of
    the program; the module answers ``module_answer``, by default {"changed": False})."""
    ran: list[dict[str, Any]] = []

    def module(module_name: str, module_args: dict[str, Any], task_vars: Any) -> dict[str, Any]:
        assert module_name == plugin._task.action
        ran.append(dict(module_args))
        return dict(module_answer or {"changed": False})

    plugin._task.args = dict(args)
    plugin._execute_module = module
    with mock.patch.object(ActionBase, "run", lambda self, tmp=None, task_vars=None: {}):
        result = plugin.run(task_vars={})
    return result, ran
