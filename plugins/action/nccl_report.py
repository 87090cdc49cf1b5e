# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin for nccl_report (library/nccl_report.py documents it): the report is built in the
worker process that runs the task, on the control machine, instead of a module run through the
local connection (an AnsiballZ payload and a Python start, about 0.4 s). Same options and result:
both call src/nccl_preflight/core/report_run.py.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from nccl_preflight.core.report_run import ARGUMENT_SPEC, run_report


class ActionModule(ActionBase):
    """Build the JUnit files, summary.md, verdict.json and report.html without a module run."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        outcome = run_report(args, bool(self._task.check_mode))
        return {**result, **outcome}
