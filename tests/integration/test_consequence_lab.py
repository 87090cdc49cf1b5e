# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One cause, its consequences under it, on a 3-host lab with the whole playbook (issue 25, item 3).

A firewall fault on one host makes other hosts' probes fail too; those failures are consequences
of that host's firewall: verdict.json points them at it, report.html's headline names only the
host at fault and folds them under it, summary.md indents them under it, and the JUnit keeps
every testcase, a consequence saying of what. Nothing of the run is left on the hosts. (The
master dropping MASTER_PORT, every host's probe of it a consequence: test_frontends_agree_lab's
run of that fault through validate.yml asserts the same folding.)
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.builders.lab_runs import assert_folded, ephemeral_range, validate
from tests.lab.fixtures import LabFactory
from tests.lab.harness import Lab

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab3(lab_factory: LabFactory) -> Lab:
    """A 3-host lab, as in the issue: a ring of three, so each host has its own neighbour."""
    return lab_factory(3)


def run_with_drop(lab: Lab, tmp_path: Path, host: int, port: int | tuple[int, int]) -> tuple:
    """The whole playbook with ``port`` dropped on hosts[host]; -> (result, report dir).

    The listeners behind the drop wait for probes that never come: preflight_collect_wait 1 s
    (not the default 8) hands them to the stop task after every host's probes sooner, which
    collects what they saw all the same; how they are collected is not under test here."""
    run_id = f"cause-{uuid.uuid4().hex[:8]}"
    undo = lab.firewall_drop(lab.hosts[host], port)
    try:
        result = validate(lab, tmp_path, run_id, preflight_collect_wait=1)
    finally:
        undo()
    return result, tmp_path / run_id, run_id


def test_a_host_dropping_its_own_ephemeral_range_is_the_only_one_failing(
    lab3: Lab, tmp_path: Path
) -> None:
    names = [h.inventory_name for h in lab3.hosts]
    result, report_dir, run_id = run_with_drop(lab3, tmp_path, 1, ephemeral_range(lab3, 1))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    # node1's probe of node2's ring listener, and node2's own probes (the replies to its
    # ephemeral ports are dropped): each says whose finding it is a consequence of.
    assert f"(a consequence of {names[1]}'s firewall)" in output
    consequences = {(names[0], "tcp_ring"), (names[1], "tcp_ring"), (names[1], "tcp_master_port")}
    assert_folded(lab3, report_dir, run_id, names[1], consequences)
