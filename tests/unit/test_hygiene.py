# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Project rules that a reader cannot check at a glance: no variable ever reaches a shell."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SHELLS = {"ansible.builtin.shell", "shell", "ansible.builtin.raw", "raw", "ansible.builtin.script"}
COMMANDS = {"ansible.builtin.command", "command"}


def tasks_in(node: Any) -> list[dict]:
    """Every task dict in a playbook or task file, blocks included."""
    found: list[dict] = []
    if isinstance(node, list):
        for item in node:
            found += tasks_in(item)
    elif isinstance(node, dict):
        if any(key in node for key in (*SHELLS, *COMMANDS)):
            found.append(node)
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            found += tasks_in(node.get(key))
    return found


def task_files() -> list[Path]:
    files = sorted((ROOT / "roles").glob("*/tasks/*.yml")) + sorted(
        (ROOT / "roles").glob("*/handlers/*.yml")
    )
    return files + sorted((ROOT / "playbooks").glob("*.yml"))


def test_there_are_task_files_to_check() -> None:
    assert len(task_files()) >= 4


def test_no_task_uses_a_shell() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {task.get('name')}"
        for path in task_files()
        for task in tasks_in(yaml.safe_load(path.read_text()))
        if SHELLS & task.keys()
    ]
    assert offenders == []


def test_every_command_task_passes_argv() -> None:
    offenders = []
    for path in task_files():
        for task in tasks_in(yaml.safe_load(path.read_text())):
            for key in COMMANDS & task.keys():
                args = task[key]
                if not (isinstance(args, dict) and "argv" in args):
                    offenders.append(f"{path.relative_to(ROOT)}: {task.get('name')}")
    assert offenders == []


def test_shipped_config_checks_host_keys() -> None:
    """ansible.cfg keeps Ansible's host key checking; only the lab's own inventory turns it off."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    assert config.getboolean("defaults", "host_key_checking", fallback=True) is True
    for path in (ROOT / "inventory").rglob("*.yml"):
        text = path.read_text()
        assert "host_key_checking" not in text or "ansible_connection: local" in text, path
        assert "StrictHostKeyChecking=no" not in text, path


def test_one_licence_the_one_the_roles_state_in_every_python_header() -> None:
    licences = {
        yaml.safe_load(meta.read_text())["galaxy_info"]["license"]
        for meta in (ROOT / "roles").glob("*/meta/main.yml")
    }
    assert licences == {"MIT"}
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")
    files = subprocess.run(
        ["git", "ls-files", "*.py", "bin/*"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(files) > 50
    other = re.compile(r"GNU General Public|Apache License|SPDX-License-Identifier: (?!MIT)")
    offenders = []
    for name in files:
        head = (ROOT / name).read_text(encoding="utf-8").splitlines()[:4]
        mine = "# SPDX-License-Identifier: MIT (see LICENSE)" in head
        if not mine or other.search("\n".join(head)):
            offenders.append(name)
    assert offenders == []
