# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check as slurmd's HealthCheckProgram on a Slurm lab (tests/lab/slurm.py), watched from
outside: shared by tests/integration/test_node_check_health_lab.py and bench/node_check_health.py.

- ``HealthCheckSetup``: the node bundle, a config and the two-line wrapper docs/slurm.md shows
  (its output appended to one log per node), and the slurm.conf lines that run it.
- ``node_checks``: the node-checks running now, per node, from /proc (the lab hosts are network
  namespaces: their processes are this machine's). A node-check that checks forks a guard, which
  forks the work (slurm/node_guard.py); one that finds its node busy forks nothing and exits.
  So per node: ``checking`` counts the node-checks that have a guard, ``processes`` every
  node-check process slurmd started (one exiting at once included).
- ``Watch``: a thread sampling node_checks, sinfo's states and the load average until stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab.base import PROJECT_ROOT, node_python
from tests.lab.harness import Lab

BAD_STATES = ("drain", "drng", "drained", "down", "fail")


@dataclass
class HealthCheckSetup:
    """The bundle, config and wrapper under ``where`` (see the module docstring)."""

    where: Path
    config_text: str = "nccl_socket_ifname: fab0\nnccl_backend: gloo\nnccl_require_gpu: false\n"
    args: Sequence[str] = ("--drain",)
    cpu: bool = False  # the wrapper notes node-check's CPU seconds (sh's times) per run

    @property
    def pyz(self) -> Path:
        return self.where / "nccl-preflight.pyz"

    @property
    def wrapper(self) -> Path:
        return self.where / "node-check.sh"

    @property
    def state_dir(self) -> Path:
        return self.where / "state"

    def log(self, node: str) -> Path:
        return self.where / f"{node}.log"

    def write(self, lab: Lab) -> HealthCheckSetup:
        """The bundle (bin/nccl-preflight bundle), the config, and the wrapper slurmd runs:
        no PATH and no SLURM_CONF from slurmd, so it sets both."""
        self.where.mkdir(parents=True, exist_ok=True)
        if not self.pyz.exists():  # this checkout's package, not another one a venv installed
            env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT / "src")}
            subprocess.run(
                [sys.executable, str(PROJECT_ROOT / "bin" / "nccl-preflight"), "bundle", "-o",
                 str(self.pyz)],
                check=True,
                capture_output=True,
                timeout=300,
                env=env,
            )  # fmt: skip
        config = self.where / "nccl-preflight.yaml"
        config.write_text(self.config_text)
        args = " ".join([*self.args, "--state-dir", str(self.state_dir)])
        run = (
            f"{node_python()} {self.pyz} node-check --config {config} {args} "
            f'>>{self.where}/"$SLURMD_NODENAME".log 2>&1'
        )
        if self.cpu:  # not exec: the shell waits, then `times` says its children's CPU time
            run = f'{run}\nrc=$?\ntimes >>{self.where}/"$SLURMD_NODENAME".cpu\nexit $rc'
        else:
            run = f"exec {run}"
        self.wrapper.write_text(
            f"#!/bin/sh\nexport PATH=/usr/bin:/bin SLURM_CONF={lab.slurm_conf}\n{run}\n"
        )
        self.wrapper.chmod(0o755)
        return self

    def slurm_lines(self, interval: int) -> list[str]:
        return [
            f"HealthCheckProgram={self.wrapper}",
            f"HealthCheckInterval={interval}",
            "HealthCheckNodeState=ANY",
        ]

    def cpu_seconds(self, node: str) -> list[float]:
        """node-check's CPU seconds (user + system, with all it started) of each run, from the
        wrapper's ``times`` (its second line: the children's)."""
        path = self.where / f"{node}.cpu"
        lines = path.read_text().splitlines() if path.exists() else []
        return [sum(_seconds(part) for part in line.split()) for line in lines[1::2]]

    def clear(self, nodes: Sequence[str]) -> None:
        """Forget the logs, the CPU notes and the state of earlier runs."""
        for node in nodes:
            for path in (self.log(node), self.where / f"{node}.cpu"):
                path.unlink(missing_ok=True)
        if self.state_dir.exists():
            for path in self.state_dir.iterdir():
                path.unlink()

    def lines(self, node: str) -> list[str]:
        """The node's log: what every node-check there printed."""
        if not self.log(node).exists():
            return []
        return self.log(node).read_text(errors="replace").splitlines()

    def verdicts(self, node: str) -> list[str]:
        """The verdict lines of the node's log, ``node-check: <node>: ...``: one per node-check
        that ended (checked, exited at once, or stopped)."""
        return [line for line in self.lines(node) if line.startswith(f"node-check: {node}: ")]

    def drains(self, node: str) -> list[str]:
        """The lines of the node's log saying node-check drained it (slurm/node_check.py
        drain's message)."""
        return [line for line in self.lines(node) if line.startswith("node-check: drained ")]


def _seconds(text: str) -> float:
    """A duration as sh's ``times`` prints it: ``1m2.345s``."""
    minutes, _, rest = text.rstrip("s").partition("m")
    return float(minutes) * 60 + float(rest) if rest else float(minutes)


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _stat_ppid(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            text = fh.read()
        return int(text[text.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _node_of(pid: str) -> str | None:
    """The node a node-check runs for (its SLURMD_NODENAME); None when it is gone already."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = fh.read().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"SLURMD_NODENAME="):
            return item.split(b"=", 1)[1].decode(errors="replace")
    return "?"


def node_checks(pyz: Path) -> dict[str, dict[str, int]]:
    """{node: {"checking": n, "processes": n}} of the node-checks of ``pyz`` running now."""
    mine = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            line = _cmdline(pid)
            if str(pyz) in line and " node-check " in line:
                mine[int(pid)] = _stat_ppid(pid)
    found: dict[str, dict[str, int]] = {}
    for pid, ppid in mine.items():
        node = _node_of(str(pid))
        if ppid in mine or node is None:
            continue  # a guard or a work (counted with the node-check that forked it), or gone
        counts = found.setdefault(node, {"checking": 0, "processes": 0})
        counts["processes"] += 1
        counts["checking"] += any(parent == pid for parent in mine.values())
    return found


def wait_ended(pyz: Path, timeout: float = 180) -> None:
    """Until no node-check of ``pyz`` runs on any lab host (one started before the program was
    configured away can end later; slurmd kills one after 60 s)."""
    deadline = time.monotonic() + timeout
    while node_checks(pyz):
        if time.monotonic() > deadline:
            raise AssertionError(f"node-checks of {pyz} still running after {timeout:.0f} s")
        time.sleep(0.5)


@dataclass
class Watch:
    """Samples, every ``every`` s until stopped: node-checks per node, node states, load."""

    lab: Lab
    pyz: Path
    every: float = 0.5
    samples: int = 0
    most_checking: dict[str, int] = field(default_factory=dict)
    most_processes: dict[str, int] = field(default_factory=dict)
    bad_states: list[tuple[float, str, str]] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _sample(self, states_due: bool) -> None:
        for node, counts in node_checks(self.pyz).items():
            self.most_checking[node] = max(self.most_checking.get(node, 0), counts["checking"])
            self.most_processes[node] = max(self.most_processes.get(node, 0), counts["processes"])
        if states_due:
            for node, state in self.lab.slurm_node_states().items():
                if state.rstrip("*~#!%$@^-") in BAD_STATES:
                    self.bad_states.append((time.time(), node, state))
            self.loads.append(os.getloadavg()[0])
        self.samples += 1

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._sample(n % 4 == 0)  # sinfo every 4th sample: it costs a controller RPC
            n += 1
            self._stop.wait(self.every)

    def start(self) -> Watch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Watch:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        return self
