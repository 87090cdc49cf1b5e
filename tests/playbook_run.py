# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""ansible-playbook as the tests run it, and plays of the project's roles on local-connection hosts.

:func:`ansible_playbook` runs it (or bin/nccl-preflight, which wraps it) from the project's root
with its ansible.cfg and no colours, for the unit tests and the labs alike. For a role play the
hosts of a hostfile inventory are all this machine (connection local); the play is written into
playbooks/ (so roles/ resolves as for playbooks/validate.yml) under a name of its own and removed
afterwards; the facts the hosts would gather come from a JSON file (``facts_file``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def playbook_env() -> dict[str, str]:
    """This process's environment with the project's ansible.cfg and no colours."""
    return {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def ansible_playbook(
    *argv: str,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    capture: bool = True,
    program: str = ANSIBLE_PLAYBOOK,
) -> subprocess.CompletedProcess[str]:
    """``program`` (ansible-playbook) with ``argv``, the project's ansible.cfg, from the project's
    root, no colours, ``env`` on top of this process's environment. Does not raise on a non-zero
    exit; ``capture=False`` lets the output through (stdout and stderr are then None)."""
    return subprocess.run(
        [program, *argv],
        capture_output=capture,
        text=True,
        env={**playbook_env(), **(env or {})},
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def local_inventory(tmp_path: Path, hostfile: str) -> Path:
    """inventory/ in ``tmp_path``: the hostfile, every host local, the run and report roots in
    ``tmp_path``, the fabric 192.168.100.0/24."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hostfile").write_text(hostfile)
    (inventory / "group_vars" / "all.yml").write_text(
        "ansible_connection: local\n"
        f"ansible_python_interpreter: {sys.executable}\n"
        "nccl_fabric_cidr: 192.168.100.0/24\n"
        f"nccl_run_root: {tmp_path}\n"
        f"nccl_report_root: {tmp_path / 'reports'}\n"
    )
    return inventory


def run_play_with_facts(
    tmp_path: Path,
    play: str,
    name: str,
    hostfile: str,
    facts: dict[str, Any],
    extra_vars: dict[str, Any],
    args: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``play`` (YAML) as playbooks/.test-<name>-<pid>.yml on :func:`local_inventory`, with each
    host's facts from ``facts`` (``facts_file``), run id t1 and ``extra_vars``."""
    inventory = local_inventory(tmp_path, hostfile)
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    playbook = ROOT / "playbooks" / f".test-{name}-{os.getpid()}.yml"
    playbook.write_text(play)
    variables = {"facts_file": str(tmp_path / "facts.json"), "nccl_run_id": "t1", **extra_vars}
    try:
        return ansible_playbook(
            str(playbook), *args, "-i", str(inventory), "-e", json.dumps(variables), timeout=timeout
        )
    finally:
        playbook.unlink()


def closing_lines(output: str) -> list[str]:
    """What ansible-playbook printed after its PLAY RECAP's host lines: the closing summary
    (plugins/callback/nccl_console.py); [] when there is no recap."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("PLAY RECAP")]
    if not starts:
        return []
    rest = lines[starts[-1] + 1 :]
    while rest and rest[0].strip():  # the recap's host lines
        rest = rest[1:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    return rest


def column_starts(header: str, names: list[str]) -> list[int]:
    """Where each of ``names`` starts in a table's ``header`` line."""
    return [header.index(name) for name in names]


def assert_plain_console(output: str, run_id: str, verdict: str) -> list[str]:
    """The closing summary is the last thing printed, as plain lines: the verdict first, no
    quoted YAML string, no escapes, no colour, the hosts table aligned; -> its lines."""
    lines = closing_lines(output)
    assert lines, output[-4000:]
    assert lines[0] == f"nccl-preflight run {run_id}: {verdict}", lines
    text = "\n".join(lines)
    assert "\\n" not in output and "msg: '#" not in output and "\x1b" not in output
    assert "| host |" not in output  # no Markdown table anywhere on the console
    hosts = lines[lines.index("Hosts:") + 1 :]
    hosts = hosts[: hosts.index("")] if "" in hosts else hosts
    starts = column_starts(hosts[0], ["host", "ranks", "pre-flight", "status"])
    for row in hosts[1:]:
        assert all(row[s] != " " and row[s - 1] == " " for s in starts[1:]), hosts
    assert any(line.startswith("Report: ") and run_id in line for line in lines), text
    return lines
