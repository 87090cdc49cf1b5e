# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/launch/action_plugins/nccl_torchrun.py loaded as Ansible loads it, the archives a node
sends back, and a scripted node answering the watch's looks."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.plugin_files import load_plugin

action = load_plugin("roles/launch/action_plugins/nccl_torchrun.py", "launch_action_nccl_torchrun")


def archive(*members: tarfile.TarInfo | tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


HOSTS = [
    {"host": "a", "ranks": [0], "ifname": "fab0", "address": "10.0.0.1", "preflight_state": "up",
     "probes": [{"host": "b", "address": "10.0.0.2", "port": 29500}]},
    {"host": "b", "ranks": [1], "ifname": "fab0", "address": "10.0.0.2", "preflight_state": "up",
     "probes": [{"host": "a", "address": "10.0.0.1", "port": 29500}]},
]  # fmt: skip


class FakeNode:
    """Answers the module calls of one host: looks from a script, then a diagnosis or a stop."""

    def __init__(self, looks: list[dict[str, Any]], diagnosis: dict[str, Any] | None = None):
        self.looks, self.diagnosis = looks, diagnosis
        self.calls: list[dict[str, Any]] = []
        # What this host's progress.json said when the stop call came (set by the test).
        self.report: Path | None = None
        self.state_at_stop: dict[str, Any] | None = None
        self._task = SimpleNamespace(action="nccl_torchrun")

    def _execute_module(self, module_name: str, module_args: dict, task_vars: dict) -> dict:
        assert module_name == "nccl_torchrun"
        self.calls.append(module_args)
        if module_args.get("stop_reason"):
            if self.report is not None:
                path = self.report / "a" / "progress.json"
                self.state_at_stop = json.loads(path.read_text())
            return {"running": False, "torchrun_rc": -15, "stopped_by": module_args["stop_reason"]}
        if module_args.get("diagnose") is not None:
            return {"running": True, "progress": [], "diagnosis": self.diagnosis}
        return self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]


def look(test: str | None, size: int | None, age_s: float, **extra: Any) -> dict[str, Any]:
    entry = {"rank": 0, "status": "running", "test": test, "size": size, "index": 15,
             "count": 21, "age_s": age_s}  # fmt: skip
    return {"running": True, "progress": [entry], **extra}


def watch(node: FakeNode, report: Path, **spec: Any) -> Any:
    base = {"host": "a", "report_dir": str(report), "hosts": HOSTS, "interval": 0.01,
            "stall_timeout": 30, "progress": "log"}  # fmt: skip
    return action.RunWatch(node, {"state": "finished", "run_dir": "/tmp/x"}, {**base, **spec})
