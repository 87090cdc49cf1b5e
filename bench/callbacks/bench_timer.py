# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Callback plugin for the benchmarks: when every play, task and host result started or ended.

ansible-core has no profile_tasks (that lives in ansible.posix), so the benchmarks bring their own.
Times are time.monotonic() (CLOCK_MONOTONIC, shared by every process on the machine), so the
benchmark that started ansible-playbook can line them up with its own clock.
"""

from __future__ import annotations

DOCUMENTATION = """
name: bench_timer
type: aggregate
short_description: Record play, task and host-result times to a JSON file (benchmarks only)
description:
  - "Writes C({events: [...]}) to the file named by E(BENCH_TIMER_OUT) when the playbook ends."
  - "Each event has t, kind, play, task, role, path, action, host; t is time.monotonic()."
  - "A play_start also has hosts (the play's pattern); a task_start run_once and delegate_to
    (as written, not templated), which bench/ansible_floor.py needs to mirror validate.yml."
requirements:
  - enable it with E(ANSIBLE_CALLBACKS_ENABLED=bench_timer) and
    E(ANSIBLE_CALLBACK_PLUGINS=<project>/bench/callbacks)
"""

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    """Append an event per play, task and host result; dump them at the end."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._events: list[dict[str, Any]] = [{"t": time.monotonic(), "kind": "loaded"}]
        self._play = ""
        self._out = os.environ.get("BENCH_TIMER_OUT", "")

    def _add(self, kind: str, task: Any = None, host: str | None = None) -> None:
        event: dict[str, Any] = {"t": time.monotonic(), "kind": kind, "play": self._play}
        if task is not None:
            role = getattr(task, "_role", None)
            event.update(
                task=task.get_name(),
                role=role.get_name() if role is not None else None,
                path=task.get_path() or "",
                action=task.action,
            )
            if kind == "task_start":
                event.update(run_once=bool(task.run_once), delegate_to=task.delegate_to)
        if host is not None:
            event["host"] = host
        self._events.append(event)

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._add("playbook_start")

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._play = play.get_name()
        self._add("play_start")
        hosts = play.hosts
        self._events[-1]["hosts"] = hosts if isinstance(hosts, (str, list)) else str(hosts)

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._add("task_start", task)

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._add("task_start", task)

    def _result(self, kind: str, result: Any) -> None:
        self._add(kind, result._task, result._host.get_name())

    def v2_runner_on_ok(self, result: Any) -> None:
        self._result("ok", result)

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._result("failed", result)

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._result("skipped", result)

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._result("unreachable", result)

    def v2_runner_item_on_ok(self, result: Any) -> None:
        self._result("item_ok", result)

    def v2_runner_item_on_failed(self, result: Any) -> None:
        self._result("item_failed", result)

    def v2_runner_item_on_skipped(self, result: Any) -> None:
        self._result("item_skipped", result)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._add("stats")
        if self._out:
            tmp = f"{self._out}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"events": self._events}, f)
            os.replace(tmp, self._out)
