# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin of library/nccl_preflight_observe.py: the observation without a module start.

With O(program_python) (the node's Python), the options are checked here with the module's own
argument spec and the observation runs on the node as src/nccl_preflight/node/observe_call.py: a
zipapp of it and what it imports, sent on the call's stdin through BOOT (core/stdin_ship.py), the
options after it as one JSON line. No module payload is built on the control machine and Ansible's
module start (its wrapper and ``ansible.module_utils.basic``) is not paid on the node; the result is
the module's. Options the spec refuses, a program that could not run or did not answer JSON, and no
O(program_python): the module runs, as it would without this plugin.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from nccl_preflight.core.stdin_ship import action_program_call
from nccl_preflight.node.observe_call import OBSERVE_ENTRY, OBSERVE_SPEC


class ActionModule(ActionBase):
    """Run the observation as a plain program when the node's Python is known, else the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        answer = self.run_plain(args) if args.get("program_python") else None
        if answer is None:
            answer = self._execute_module(
                module_name=self._task.action, module_args=args, task_vars=task_vars
            )
        result.update(answer)
        return result

    def run_plain(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """The observation through node/observe_call.py; None where the module must run."""
        python, run_id = str(args.pop("program_python")), str(args.pop("run_id", "") or "observe")
        return action_program_call(
            self, ArgumentSpecValidator(OBSERVE_SPEC), args, python, run_id, OBSERVE_ENTRY
        )
