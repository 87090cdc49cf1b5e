# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check (slurm/node_check.py) on a recorded node: the runner of FakeNode's answers, an H200's
nvidia-smi, a Python that answers the torch probe, the command line and the scontrol it called."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.builders.facts import FakeNode, fixture
from tests.playbook_run import ROOT

BIN = ROOT / "bin" / "nccl-preflight"


class FakeRunner(FakeNode):
    """FakeNode's recorded answers behind the runner's interface (node/runner.py)."""

    def get_bin_path(self, arg: str, required: bool = False, opt_dirs: object = None) -> str | None:
        return self.tools.get(arg)

    def seconds_left(self) -> float:
        return 30.0


# One machine's recordings (tests/fixtures/README.md: one NVIDIA H200 in a VM), by nvidia-smi's
# first argument.
H200 = {
    "--query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id": "nvidia-smi/h200-vm.csv",
    "-q": "gpu/q-h200-vm.txt",
    "topo": "gpu/topo-h200-vm.txt",
    "nvlink": "gpu/nvlink-h200-vm.txt",
}


def answer_as_h200(node: FakeRunner) -> None:
    plain = node.run_command

    def run_command(argv: list[str], **kwargs: object) -> tuple[int, str, str]:
        if argv[0] == node.tools["nvidia-smi"] and argv[1] in H200:
            node.calls.append(list(argv))
            return 0, fixture(H200[argv[1]]), ""
        return plain(argv, **kwargs)

    node.run_command = run_command  # type: ignore[method-assign]


def fake_python(tmp_path: Path) -> Path:
    """A 'python' whose torch probe answers what the lab nodes' Python answered (recorded)."""
    script = tmp_path / "python-recorded"
    out = ROOT / "tests" / "fixtures" / "torch" / "probe-cpu-lab-node.json"
    script.write_text(f"#!/bin/sh\ncat {out}\n")
    script.chmod(0o755)
    return script


def node_check_cmd(
    tmp_path: Path, config: str, *args: str, slurmd: str | None = None
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yml"
    path.write_text(config.replace("PYTHON", str(fake_python(tmp_path))))
    env = {k: v for k, v in os.environ.items() if k != "SLURMD_NODENAME"}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    if slurmd:
        env["SLURMD_NODENAME"] = slurmd
    state = ["--state-dir", str(tmp_path / "state")]  # this test's own lock and verdict
    return subprocess.run(
        [sys.executable, str(BIN), "node-check", "--config", str(path), *state, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def calls(record: Path) -> list[list[str]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


HEALTHY = "nccl_socket_ifname: lo\nnccl_backend: gloo\nnccl_python: PYTHON\n"


MISSING_IF = "nccl_socket_ifname: nosuch0\nnccl_backend: gloo\nnccl_python: PYTHON\n"
