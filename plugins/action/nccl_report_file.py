# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Action plugin behind library/nccl_report_file.py (which only documents it).

Writes one file of this run's report on the control machine, from the worker process that runs the
task: no module is sent anywhere and no Python is started, where ansible.builtin.file +
ansible.builtin.copy delegated to localhost start a module process each (a stat, then the copy).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase

from nccl_preflight.node.files import write_atomically

ARGUMENT_SPEC: dict[str, Any] = {
    "dest": {"type": "path", "required": True},
    "content": {"type": "str"},
    "data": {"type": "raw"},
    "mode": {"type": "str", "default": "0644"},
    "directory_mode": {"type": "str", "default": "0755"},
}


def octal_mode(name: str, text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise ValueError(f"{name} {text!r} is not an octal mode such as 0644")
    return mode


def render(content: str | None, data: Any) -> bytes:
    """content as given, or data as indented JSON with keys in order, newline-terminated."""
    if content is not None:
        return to_bytes(content)
    return (json.dumps(data, indent=4, sort_keys=True) + "\n").encode("utf-8")


def is_current(dest: Path, payload: bytes, mode: int) -> bool:
    """True when dest already holds exactly this payload with this mode."""
    try:
        return dest.read_bytes() == payload and (dest.stat().st_mode & 0o7777) == mode
    except FileNotFoundError:
        return False


def write_file(dest: Path, payload: bytes, mode: int, directory_mode: int) -> bool:
    """Make the parents, write atomically; False when the file already held exactly this."""
    dest.parent.mkdir(mode=directory_mode, parents=True, exist_ok=True)
    if is_current(dest, payload, mode):
        return False
    write_atomically(dest, payload, mode)
    return True


class ActionModule(ActionBase):
    """Write a report file on the control machine without running a module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            mutually_exclusive=[["content", "data"]],
            required_one_of=[["content", "data"]],
        )
        del validation
        dest = Path(os.path.expanduser(args["dest"]))
        try:
            mode = octal_mode("mode", args["mode"])
            directory_mode = octal_mode("directory_mode", args["directory_mode"])
        except ValueError as exc:
            return {**result, "failed": True, "msg": str(exc), "dest": str(dest)}
        payload = render(args["content"], args["data"])
        result["dest"] = str(dest)
        if self._task.check_mode:
            result["changed"] = not is_current(dest, payload, mode)
            return result
        try:
            result["changed"] = write_file(dest, payload, mode, directory_mode)
        except OSError as exc:
            return {**result, "failed": True, "msg": f"cannot write {dest}: {exc}"}
        return result
