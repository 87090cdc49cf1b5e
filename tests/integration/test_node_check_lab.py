# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check under a real Slurm (tests/lab/slurm.py): the node bundle run by every slurmd through
a two-line wrapper, as docs/slurm.md shows it, with the lab hosts' Python (torch and the standard
library only).

- As HealthCheckProgram, it drains only the host whose fabric link is down, with a reason that
  starts ``nccl-preflight:`` and names the check and what it found; the healthy host stays idle.
- Each node-check also writes its node's metrics (--textfile, a directory per lab host): the
  bad host's interface check 0 and its verdict failed, the healthy host's checks all 1.
- As Prolog, a job asked for on that host does not run there: srun says the node's Prolog failed,
  the host is drained with node-check's reason, and the same job runs on the healthy host.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import prom_text
from tests.lab.base import node_python
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.polling import wait_or_fail

ROOT = Path(__file__).resolve().parents[2]
INTERVAL = 5  # HealthCheckInterval, seconds
REASON = "nccl-preflight: interface: interface fab0 is down"


@pytest.fixture(scope="module")
def checked_lab(
    lab_factory: LabFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Lab, Path]]:
    """A 2-host Slurm lab and the wrapper slurmd runs: node-check --drain from the bundle."""
    require_slurm()
    lab = lab_factory(2, slurm=True)
    where = tmp_path_factory.mktemp("node-check")
    pyz = where / "nccl-preflight.pyz"
    subprocess.run(
        [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "bundle", "-o", str(pyz)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    config = where / "nccl-preflight.yaml"
    # the lab has no GPU: a CPU node, said so (under the defaults node-check fails it: gpu)
    config.write_text("nccl_socket_ifname: fab0\nnccl_backend: gloo\nnccl_require_gpu: false\n")
    wrapper = where / "node-check.sh"
    # slurmd runs it with no PATH and no SLURM_CONF (the lab's slurm.conf is not the default)
    # --textfile: each node its own node_exporter directory (one machine holds the lab's hosts)
    wrapper.write_text(
        f"#!/bin/sh\nexport PATH=/usr/bin:/bin SLURM_CONF={lab.slurm_conf}\n"
        f'mkdir -p {where}/textfile-"$SLURMD_NODENAME"\n'
        f"exec {node_python()} {pyz} node-check --config {config} --drain "
        f'--textfile {where}/textfile-"$SLURMD_NODENAME" '
        f'>>{where}/"$SLURMD_NODENAME".log 2>&1\n'
    )
    wrapper.chmod(0o755)
    try:
        yield lab, wrapper
    finally:  # the lab as the other tests expect it: its own slurm.conf, every host idle
        lab.reset_faults()
        lab.slurm_reconfigure()
        wait_checks_ended(pyz)
        for node in lab.slurm_nodes:
            lab.scontrol("update", f"nodename={node}", "state=resume", check=False)
        lab.slurm_wait_idle()


def wait_checks_ended(pyz: Path, timeout: float = 120) -> None:
    """Until no node-check from ``pyz`` runs on any lab host (their processes are visible here:
    the hosts are network namespaces). After the health check is configured away, one started
    before can still end later and drain its node again, after a test resumed it."""

    def running() -> bool:
        found = subprocess.run(["pgrep", "-f", str(pyz)], capture_output=True, check=False)
        return found.returncode == 0

    wait_or_fail(lambda: not running(), timeout=timeout, what=f"the node-checks of {pyz} to end")


def node_field(lab: Lab, node: str, field: str) -> str:
    out = lab.scontrol("show", "node", "-o", node).stdout
    return out.split(f" {field}=", 1)[1].split(" ")[0] if f" {field}=" in out else ""


def reason_of(lab: Lab, node: str) -> str:
    """The node's reason, whole (sinfo -R cuts it at 20 characters)."""
    out = lab.slurm_cmd("sinfo", "-h", "-N", "-n", node, "-o", "%E").stdout.strip()
    return out.splitlines()[0] if out else ""


def found_checks(path: Path) -> dict[str, float]:
    """{check: 1 passed / 0 failed} of a node's nccl_preflight.prom (core/metrics.py)."""
    return prom_text.parse(path.read_text())["nccl_preflight_check"].by("check")


def checked(log: Path) -> list[str]:
    """The lines of the wrapper's log of one node from node-check runs that checked: not from one
    that found another node-check still checking (slurmd starts one every HealthCheckInterval
    whatever the machine's load), which checks nothing and exits at once."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [
        line
        for line in lines
        if line.startswith("node-check: ") and "another node-check is running" not in line
    ]


@pytest.mark.lab
def test_health_check_drains_only_the_bad_node_with_its_reason(
    checked_lab: tuple[Lab, Path],
) -> None:
    lab, wrapper = checked_lab
    good, bad = lab.slurm_nodes
    lab.slurm_reconfigure(
        [
            f"HealthCheckProgram={wrapper}",
            f"HealthCheckInterval={INTERVAL}",
            "HealthCheckNodeState=ANY",
        ]
    )
    lab.link_down(bad)
    # the bound only guards against a hang: a round every INTERVAL s, each a torch import
    wait_or_fail(
        lambda: lab.slurm_node_states().get(bad) == "drain", timeout=120, what=f"{bad} drained"
    )
    assert reason_of(lab, bad) == REASON
    assert node_field(lab, bad, "Reason").startswith("nccl-preflight:")
    # the healthy node ran its check after the fault too, and stays in service
    good_log = wrapper.parent / f"{good}.log"
    seen = len(checked(good_log))
    wait_or_fail(
        lambda: len(checked(good_log)) > seen, timeout=120, what=f"a health check on {good}"
    )
    assert "healthy" in checked(good_log)[-1]
    assert lab.slurm_node_states()[good] == "idle"
    bad_log = (wrapper.parent / f"{bad}.log").read_text()
    assert "interface: failed: " in bad_log and f"drained {bad}: {REASON}" in bad_log
    # node_exporter's textfile of each node: the bad one's interface 0, the good one's all 1
    for node, interface, verdict in ((good, 1, "healthy"), (bad, 0, "failed")):
        text = (wrapper.parent / f"textfile-{node}" / "nccl_preflight.prom").read_text()
        found = prom_text.parse(text)
        assert found["nccl_preflight_check"].value(check="interface", node=node) == interface
        states = found["nccl_preflight_node_check_verdict"].by("verdict")
        assert states[verdict] == 1, text
    good_checks = found_checks(wrapper.parent / f"textfile-{good}" / "nccl_preflight.prom")
    assert set(good_checks.values()) == {1}, good_checks


@pytest.mark.lab
def test_as_prolog_a_job_does_not_run_on_the_bad_node(checked_lab: tuple[Lab, Path]) -> None:
    lab, wrapper = checked_lab
    good, bad = lab.slurm_nodes
    # No health check: only the Prolog judges. slurmd answers srun's launch only after the
    # Prolog: MessageTimeout (10 s by default) must cover node-check (a torch import), and this
    # loaded machine can take longer than a real node (docs/slurm.md).
    lab.slurm_reconfigure([f"Prolog={wrapper}", "MessageTimeout=60"])
    wait_checks_ended(wrapper.parent / "nccl-preflight.pyz")  # the previous test's health checks
    lab.link_down(bad)
    lab.scontrol("update", f"nodename={bad}", "state=resume", check=False)
    lab.slurm_wait_idle()
    job = lab.srun("-w", bad, "-N1", "hostname", check=False, timeout=120)
    assert job.returncode != 0
    # srun words it by when slurmd reports the Prolog's exit: before the launch ("Prolog
    # failure on node X") or as the step's launch failing ("... failed on node X: Job prolog
    # failed"); both seen on this lab
    assert (
        f"Prolog failure on node {bad}" in job.stderr
        or f"failed on node {bad}: Job prolog failed" in job.stderr
    ), job.stderr
    assert job.stdout.strip() == ""  # hostname never ran there
    # Drained: "drng" (draining) first while slurmctld still completes the refused job.
    wait_or_fail(
        lambda: lab.slurm_node_states().get(bad) == "drain", timeout=60, what=f"{bad} drained"
    )
    assert reason_of(lab, bad) == REASON
    ran = lab.srun("-w", good, "-N1", "hostname", timeout=120)
    assert ran.stdout.strip() == good
