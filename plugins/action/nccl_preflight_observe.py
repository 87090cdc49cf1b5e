# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin of library/nccl_preflight_observe.py: the observation without a module start.

With O(program_python) (the node's Python), the options are checked here with the module's own
argument spec and the observation runs on the node as src/nccl_preflight/node/observe_call.py: a
zipapp of it and what it imports, sent on the call's stdin through BOOT (core/stdin_ship.py), the
options after it as one JSON line. No module payload is built on the control machine and Ansible's
module start (its wrapper and ``ansible.module_utils.basic``) is not paid on the node; the result is
the module's. Options the spec refuses, a program that could not run or did not answer JSON, and no
O(program_python) (or an interpreter-discovery setting): the module runs, as it would without
this plugin (core/stdin_ship.py action_program_or_module, as nccl_facts' and the start's).
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from nccl_preflight.core.stdin_ship import action_program_or_module
from nccl_preflight.node.observe_call import OBSERVE_ENTRY, OBSERVE_SPEC


class ActionModule(ActionBase):
    """Run the observation as a plain program when the node's Python is known, else the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        validator = ArgumentSpecValidator(OBSERVE_SPEC)
        args = dict(self._task.args)
        result.update(
            action_program_or_module(self, validator, args, task_vars, OBSERVE_ENTRY, "observe")
        )
        return result
