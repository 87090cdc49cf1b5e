# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Callback plugin: print the run's closing summary as plain lines, after the play recap.

The report task (roles/report, the nccl_report action) returns the summary already rendered
(``console``: src/nccl_preflight/core/console.py); this plugin keeps it and prints it line by line
when the playbook ends, whatever the stdout callback, so that the last thing on a terminal or in a
CI log is the verdict, the hosts, every failure with its fix and where the report is: no quoted
YAML string, no ``\\n`` escapes, no colour.
"""

from __future__ import annotations

DOCUMENTATION = """
name: nccl_console
type: aggregate
short_description: Print nccl-preflight's closing summary as plain lines after the play recap
description:
  - "Keeps the C(console) lines of the nccl_report task's result and prints them, uncoloured,
    when the playbook ends (after the stdout callback's recap)."
  - "Enabled by ansible.cfg's O(callback_plugins) path; it needs no O(callbacks_enabled) entry."
"""

from typing import Any

from ansible.plugins.callback import CallbackBase

REPORT_ACTIONS = ("nccl_report",)


class CallbackModule(CallbackBase):
    """Show the closing summary of an nccl-preflight run."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "nccl_console"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.console: list[str] = []

    def v2_runner_on_ok(self, result: Any) -> None:
        if str(result.task.action).rsplit(".", 1)[-1] not in REPORT_ACTIONS:
            return
        lines = result.result.get("console")
        if isinstance(lines, list):
            self.console = [str(line) for line in lines]

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if not self.console:
            return
        for line in self.console:
            self._display.display(line)
