# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A first run whose hosts never answer (a name that does not resolve, an SSH port that refuses)
ends as ``unreachable`` (exit 11) with a report naming each host and its fix, as a lab host that
drops out among others does (roles/report/tasks/main.yml writes the plan no later stage wrote).

Real ansible-playbook through bin/nccl-preflight, no traffic beyond this machine: the address
that does not resolve (the host's ansible_host) has a 70-character label, which the resolver
refuses without sending a query (a DNS label is at most 63), and the refusing port is a closed
one on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from nccl_preflight.core.exit_classes import BY_NAME
from tests.jenkins_schema import validate_report_junit
from tests.verdict_schema import validate_verdict

ROOT = Path(__file__).resolve().parents[3]
UNRESOLVABLE = "unresolvable-node"
REFUSING = "refusing-node"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_hosts_that_never_answer_are_unreachable_with_a_report(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "hostfile").write_text(f"{UNRESOLVABLE}\n{REFUSING} slots=2\n")
    (inventory / "host_vars" / f"{UNRESOLVABLE}.yml").write_text(
        f"ansible_host: {'a' * 70}.invalid\n"
    )
    (inventory / "host_vars" / f"{REFUSING}.yml").write_text(
        f"ansible_host: 127.0.0.1\nansible_port: {closed_port()}\n"
    )
    reports = tmp_path / "reports"
    report_root = ["-e", f"nccl_report_root={reports}"]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "-i", str(inventory), *report_root],
        cwd=ROOT,
        env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    unreachable = BY_NAME["unreachable"]
    assert done.returncode == unreachable.code == 11, output
    assert "unreachable (exit 11)" in done.stderr
    assert "Could not resolve hostname" in output and "Connection refused" in output
    (run_dir,) = [p for p in reports.iterdir() if p.name != "latest"]
    verdict = validate_verdict(json.loads((run_dir / "verdict.json").read_text()))
    assert verdict["class"] == "unreachable" and verdict["classes"] == ["unreachable"]
    heads = [f for f in verdict["findings"] if not f["consequence"]]
    assert [f["host"] for f in heads] == [UNRESOLVABLE, REFUSING]
    for finding in heads:
        assert finding["fix"].startswith(f"ansible {finding['host']} -m ansible.builtin.ping")
    # every planned rank is there, never started, under its host's cause (slots=2: ranks 1, 2)
    ranks = sorted(
        ((f["host"], f["rank"]) for f in verdict["findings"] if f["consequence"]),
        key=lambda pair: pair[1],
    )
    assert ranks == [(UNRESOLVABLE, 0), (REFUSING, 1), (REFUSING, 2)]
    validate_report_junit(run_dir)
    page = (run_dir / "report.html").read_text()
    assert UNRESOLVABLE in page and REFUSING in page
