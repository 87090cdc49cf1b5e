# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin of library/nccl_facts.py: the facts without a module start.

With O(program_python) (the node's Python as the inventory names it), the options are checked
here with the module's own argument spec and the call runs on the node as
src/nccl_preflight/node/facts_call.py: a zipapp of it and what it imports, sent on the call's
stdin through BOOT (core/stdin_ship.py), the options after it as one JSON line. This is every
run's first call on every node: no module payload is built on the control machine and Ansible's
module start is not paid on the node; the result is the module's. Options the spec refuses, a
program that could not run or did not answer JSON, and no O(program_python): the module runs, as
it would without this plugin (with Ansible's interpreter discovery where that is on). The run's
warden and the pre-flight's start are the next call's (plugins/action/nccl_preflight_start.py).
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from nccl_preflight.core.stdin_ship import action_program_or_module
from nccl_preflight.node.facts_call import FACTS_ENTRY, FACTS_SPEC


class ActionModule(ActionBase):
    """Run the facts call as a plain program when the node's Python is named, else the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        validator = ArgumentSpecValidator(FACTS_SPEC)
        args = dict(self._task.args)
        result.update(
            action_program_or_module(self, validator, args, task_vars, FACTS_ENTRY, "facts")
        )
        return result
