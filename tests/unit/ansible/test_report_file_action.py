# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""plugins/action/nccl_report_file.py through a real ansible-playbook (the action runs in the
controller's worker; no module is sent), and its pure helpers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.playbook_run import ansible_playbook


def run_playbook(tmp_path: Path, tasks: str, *extra: str) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- name: Write report files\n  hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks
    )
    return ansible_playbook("-i", "localhost,", "-c", "local", str(playbook), *extra)


def test_data_becomes_sorted_indented_json_in_new_directories(tmp_path: Path) -> None:
    dest = tmp_path / "reports" / "run-1" / "preflight" / "spark-1.json"
    tasks = f"""
    - name: Write the results
      nccl_report_file:
        dest: {dest}
        data:
          results: [{{check: mtu, status: passed}}]
          host: spark-1
      register: written
    - name: Write them again
      nccl_report_file:
        dest: {dest}
        data: {{host: spark-1, results: [{{check: mtu, status: passed}}]}}
      register: again
    - name: Show
      ansible.builtin.assert:
        that: [written is changed, again is not changed]
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode == 0, result.stdout + result.stderr
    text = dest.read_text()
    assert json.loads(text) == {
        "host": "spark-1",
        "results": [{"check": "mtu", "status": "passed"}],
    }
    assert text.startswith('{\n    "host": "spark-1",') and text.endswith("}\n")
    assert dest.stat().st_mode & 0o777 == 0o644
    assert dest.parent.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in dest.parent.iterdir()) == ["spark-1.json"]


def test_content_is_written_as_given_and_check_mode_writes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "plan.txt"
    tasks = f"""
    - name: Write text
      nccl_report_file:
        dest: {dest}
        content: "a b\\n"
        mode: "0600"
"""
    checked = run_playbook(tmp_path, tasks, "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not dest.exists()
    result = run_playbook(tmp_path, tasks)
    assert result.returncode == 0, result.stdout + result.stderr
    assert dest.read_text() == "a b\n"
    assert dest.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ("content: x\n        data: {a: 1}", "mutually exclusive: content|data"),
        ("mode: '0644'", "one of the following is required: content, data"),
        ("content: x\n        mode: rw", "mode 'rw' is not an octal mode"),
    ],
)
def test_bad_arguments_fail_with_their_name(tmp_path: Path, args: str, named: str) -> None:
    tasks = f"""
    - name: Write
      nccl_report_file:
        dest: {tmp_path / "x.json"}
        {args}
"""
    result = run_playbook(tmp_path, tasks)
    assert result.returncode != 0
    assert named in result.stdout + result.stderr
    assert not (tmp_path / "x.json").exists()
