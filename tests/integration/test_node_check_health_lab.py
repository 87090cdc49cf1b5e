# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check as a health check operators can leave on (issue 36 item 6), on a real Slurm
(tests/lab/slurm.py: 3 healthy hosts) with the node bundle, the wrapper docs/slurm.md shows and
the lab hosts' Python (torch and the standard library only); tests/lab/health_check.py watches.

- As HealthCheckProgram every 5 s for a minute, every check importing torch (the worst case,
  ``--torch-max-age 0``): never more than one node-check checking per node at any sample, no
  node ever drained or down, every node idle at the end.
- A torch import made to time out (``--timeout 0.3``) is reported unfinished and drains nothing.
- On a host: a second node-check exits at once while one runs; node-check killed (SIGKILL of its
  pid; Slurm's killpg, SIGTERM then SIGKILL 10 ms later) leaves no torch probe; and slurmd's own
  kill of a HealthCheckProgram after 60 s leaves none of its processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.node.processes import descendants, is_alive, process_table, start_time
from tests.lab.base import node_python
from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.health_check import HealthCheckSetup, Watch, wait_ended
from tests.polling import wait_or_fail

INTERVAL = 5  # HealthCheckInterval, seconds
# How long the health check runs every INTERVAL s: six intervals (each imports torch on every
# node: --torch-max-age 0), a watch sample every 0.5 s; longer windows are bench/'s
# (bench/node_check_health.py).
WINDOW = 30
PROBE_MARK = "import json, platform, sys"  # the torch probe's code (node/parse.py PYTHON_PROBE)


@pytest.fixture(scope="module")
def health_lab(
    lab_factory: LabFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Lab, HealthCheckSetup]]:
    require_slurm()
    lab = lab_factory(3, slurm=True)
    setup = HealthCheckSetup(tmp_path_factory.mktemp("node-check-health")).write(lab)
    try:
        yield lab, setup
    finally:  # the lab as the other tests expect it: its own slurm.conf, every host idle
        lab.slurm_reconfigure()
        wait_ended(setup.pyz)
        for node in lab.slurm_nodes:
            lab.scontrol("update", f"nodename={node}", "state=resume", check=False)
        lab.slurm_wait_idle()


def run_health_check(lab: Lab, setup: HealthCheckSetup, seconds: float, *args: str) -> Watch:
    """node-check ``args`` as HealthCheckProgram every INTERVAL s for ``seconds``, watched;
    then configured away and every node-check ended."""
    setup.args = ("--drain", *args)
    setup.write(lab)
    setup.clear(lab.slurm_nodes)
    watch = Watch(lab, setup.pyz).start()
    try:
        lab.slurm_reconfigure(setup.slurm_lines(INTERVAL))
        time.sleep(seconds)
    finally:
        lab.slurm_reconfigure()
        wait_ended(setup.pyz)
        watch.stop()
    return watch


@pytest.mark.lab
def test_every_5_s_healthy_nodes_stay_idle_with_one_node_check_each(
    health_lab: tuple[Lab, HealthCheckSetup],
) -> None:
    lab, setup = health_lab
    watch = run_health_check(lab, setup, WINDOW, "--torch-max-age", "0")
    assert watch.samples >= 20 and len(watch.loads) >= 5, "the watch did not sample"
    assert watch.bad_states == []  # never drained, draining or down, at any sample
    assert set(watch.most_checking) == set(lab.slurm_nodes), watch.most_checking
    assert all(n <= 1 for n in watch.most_checking.values()), watch.most_checking
    for node in lab.slurm_nodes:
        lines = setup.verdicts(node)
        assert any(": healthy (" in line for line in lines), lines
        assert setup.drains(node) == []
    assert set(lab.slurm_node_states().values()) == {"idle"}


@pytest.mark.lab
def test_a_torch_import_made_to_time_out_drains_nothing(
    health_lab: tuple[Lab, HealthCheckSetup],
) -> None:
    lab, setup = health_lab
    watch = run_health_check(lab, setup, 30, "--timeout", "0.3", "--torch-max-age", "0")
    assert watch.bad_states == []
    for node in lab.slurm_nodes:
        lines = setup.verdicts(node)
        unfinished = [line for line in lines if f"{node}: unfinished: " in line]
        assert unfinished, lines
        assert "the torch probe (import torch)" in unfinished[0]
        assert "did not finish within --timeout 0.3 s" in unfinished[0]
        assert "nothing drained" in unfinished[0]
        log = setup.log(node).read_text()
        assert "not drained: this node-check could not finish in its own time" in log
    assert set(lab.slurm_node_states().values()) == {"idle"}


# ------------------------------------------------------------------ on a host, by hand


def node_check_in_host(
    lab: Lab, setup: HealthCheckSetup, host: int, config: Path, *args: str
) -> subprocess.Popen[str]:
    """node-check started in lab host ``host`` as slurmd would start it: its node's name, the
    lab's SLURM_CONF, a process group of its own (lab.popen: a new session)."""
    node = lab.slurm_nodes[host]
    env = {**os.environ, "SLURMD_NODENAME": node, "SLURM_CONF": str(lab.slurm_conf)}
    argv = [node_python(), str(setup.pyz), "node-check", "--config", str(config)]
    argv += ["--state-dir", str(setup.state_dir), "--drain", *args]
    return lab.popen(host, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def slow_config(setup: HealthCheckSetup, marker: str) -> Path:
    """A config whose 'python' never answers: a shell waiting on `sleep <marker>`."""
    python = setup.where / f"python-slow-{marker}"
    python.write_text(f"#!/bin/sh\nsleep {marker}\n")
    python.chmod(0o755)
    config = setup.where / f"slow-{marker}.yaml"
    config.write_text(setup.config_text + f"nccl_python: {python}\n")
    return config


def below(pid: int, mark: str) -> dict[int, int]:
    """{pid: start time} of the processes below ``pid`` whose command line holds ``mark``."""
    found = {}
    for child, started in descendants(pid, process_table()).items():
        try:
            line = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if mark in line:
            found[child] = started
    return found


@pytest.mark.lab
def test_a_second_node_check_exits_at_once_while_one_runs(
    health_lab: tuple[Lab, HealthCheckSetup],
) -> None:
    lab, setup = health_lab
    marker = f"71.{os.getpid() % 10000}"
    first = node_check_in_host(lab, setup, 0, slow_config(setup, marker), "--timeout", "300")
    try:
        wait_or_fail(
            lambda: below(first.pid, f"sleep {marker}"),
            timeout=60,
            what="the first one's torch probe",
        )
        config = setup.where / "nccl-preflight.yaml"
        second = node_check_in_host(lab, setup, 0, config)
        out, err = second.communicate(timeout=120)
        assert second.returncode in (0, 1, 3), out + err  # the last verdict's, or 0
        [line] = out.splitlines()
        node = lab.slurm_nodes[0]
        assert line.startswith(
            f"node-check: {node}: another node-check is running on this node (pid {first.pid}, "
        ), line
        assert "this one checks nothing and exits at once" in line
        assert first.poll() is None  # the first one still checks
    finally:
        first.kill()
        first.communicate(timeout=60)
    wait_or_fail(
        lambda: not below(1, f"sleep {marker}"), timeout=30, what="the first one's probe to end"
    )


@pytest.mark.lab
@pytest.mark.parametrize("how", ["SIGKILL to its pid", "Slurm's killpg"])
def test_killing_node_check_leaves_no_torch_probe(
    health_lab: tuple[Lab, HealthCheckSetup], how: str
) -> None:
    lab, setup = health_lab
    config = setup.where / "nccl-preflight.yaml"
    proc = node_check_in_host(lab, setup, 1, config, "--torch-max-age", "0", "--timeout", "300")
    try:
        wait_or_fail(
            lambda: below(proc.pid, PROBE_MARK), timeout=60, what="the torch probe to start"
        )
        left = {**below(proc.pid, ""), proc.pid: start_time(proc.pid)}
        if how == "SIGKILL to its pid":
            proc.send_signal(signal.SIGKILL)
        else:  # src/common/run_command.c _kill_pg: slurmd's end of a HealthCheckProgram
            os.killpg(proc.pid, signal.SIGTERM)
            time.sleep(0.01)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    alive = lambda: [pid for pid, st in left.items() if is_alive(pid, st)]  # noqa: E731
    wait_or_fail(lambda: not alive(), timeout=30, what=f"{how}: every process of node-check to end")
    state = json.loads((setup.state_dir / f"node-check-{lab.slurm_nodes[1]}.json").read_text())
    assert state["last"]["verdict"] == "unfinished", state
    assert lab.slurm_node_states()[lab.slurm_nodes[1]] == "idle"


@pytest.mark.lab
def test_slurms_own_kill_after_60_s_leaves_nothing(
    health_lab: tuple[Lab, HealthCheckSetup],
) -> None:
    """slurmd kills a HealthCheckProgram after 60 s (killpg SIGTERM, SIGKILL 10 ms later): the
    torch probe below it (here one that never answers: a shell waiting on a sleep) ends with it,
    the verdict kept is unfinished, and nothing is drained."""
    lab, setup = health_lab
    marker = f"72.{os.getpid() % 10000}"
    setup.config_text, plain = slow_config(setup, marker).read_text(), setup.config_text
    setup.args = ("--drain", "--timeout", "3600", "--torch-max-age", "0")
    try:
        setup.write(lab)
        setup.clear(lab.slurm_nodes)
        lab.slurm_reconfigure(setup.slurm_lines(INTERVAL))
        wait_or_fail(
            lambda: below(1, f"sleep {marker}"), timeout=120, what="a slow node-check to start"
        )
        lab.slurm_reconfigure()  # no new one: the running ones go on until slurmd kills them
        sleeps = below(1, f"sleep {marker}")
        assert 1 <= len(sleeps) <= len(lab.slurm_nodes)  # one per node at most
        # slurmd's kill comes 60 s after each start; its guard ends the rest at once
        alive = lambda: [pid for pid, st in sleeps.items() if is_alive(pid, st)]  # noqa: E731
        wait_or_fail(
            lambda: not alive(), timeout=120, what="slurmd's kill to end every torch probe"
        )
        wait_ended(setup.pyz, 120)
        assert not below(1, f"sleep {marker}")
        verdicts = [
            json.loads((setup.state_dir / f"node-check-{node}.json").read_text())["last"]
            for node in lab.slurm_nodes
            if (setup.state_dir / f"node-check-{node}.json").exists()
        ]
        assert verdicts and all(v["verdict"] == "unfinished" for v in verdicts), verdicts
        assert set(lab.slurm_node_states().values()) == {"idle"}
    finally:
        setup.config_text = plain
        setup.write(lab)
