# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_facts.py on recorded outputs: a node whose tools answer from tests/fixtures/, its
/sys and /proc (the ``sysfs`` fixture: tests/unit/conftest.py), the facts the module returned."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible.module_utils.nccl_preflight.node import facts as node_facts

from tests.module_exit import ModuleExit as Exit
from tests.playbook_run import ROOT

FIXTURES = ROOT / "tests" / "fixtures"


TOOLS = {"ip": "/usr/sbin/ip", "nvidia-smi": "/usr/bin/nvidia-smi"}


GPU_HEALTH = {
    "-q": "gpu/q-h100x8.txt",
    "topo": "gpu/topo-h100x8-nv18.txt",
    "nvlink": "gpu/nvlink-a100x8.txt",
}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class FakeNode:
    """Answers run_command like a node would, from recorded outputs; records every argv."""

    def __init__(self, tools: dict[str, str] | None = None) -> None:
        self.tools = dict(TOOLS if tools is None else tools)
        self.calls: list[list[str]] = []
        self.addr = (0, fixture("ip/addr.json"), "")
        self.route = (0, fixture("ip/route-get.json"), "")
        self.gpus = (0, fixture("nvidia-smi/h100x8.csv"), "")

    def find_tool(self, module: basic.AnsibleModule, name: str) -> str | None:
        if os.sep in name:
            return name if os.access(name, os.X_OK) else None
        return self.tools.get(name)

    def run_command(self, argv: list[str], **kwargs: object) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        if os.path.basename(argv[0]) == "timeout":  # GPU health reads: timeout -k 5 60 <argv>
            argv = argv[4:]
        if argv[0] == self.tools.get("ip") and argv[1:] == ["-j", "-d", "addr", "show"]:
            return self.addr
        if argv[0] == self.tools.get("ip") and argv[1:4] == ["-j", "route", "get"]:
            return self.route
        if argv[0] == self.tools.get("nvidia-smi") and argv[1] in GPU_HEALTH:
            return 0, fixture(GPU_HEALTH[argv[1]]), ""  # nvidia-smi -q, topo -m, nvlink -s
        if os.path.basename(argv[0]) in ("dmesg", "journalctl", "systemctl"):
            return 1, "", "not recorded"  # GPU health: tests/unit/node/test_gpu_health_facts.py
        if argv[0] == self.tools.get("nvidia-smi"):
            assert argv[1:] == [
                "--query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id",
                "--format=csv,noheader,nounits",
            ]
            return self.gpus
        if len(argv) == 3 and argv[1] == "-c":  # the python probe: really run it
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
            return done.returncode, done.stdout, done.stderr
        raise AssertionError(f"unexpected command {argv}")


def use_node(monkeypatch: pytest.MonkeyPatch, fake: FakeNode, sysfs: Path) -> FakeNode:
    """nccl_facts sees ``fake``'s tools and answers and the sysfs and /proc trees of ``sysfs``
    (it reads them through the node room's facts, node/facts.py)."""
    monkeypatch.setattr(node_facts, "find_tool", fake.find_tool)
    monkeypatch.setattr(
        basic.AnsibleModule, "run_command", lambda self, argv, **kw: fake.run_command(argv, **kw)
    )
    monkeypatch.setattr(node_facts, "SYS_ROOT", str(sysfs / "sys"))
    monkeypatch.setattr(node_facts, "PROC_ROOT", str(sysfs / "proc"))
    return fake


def facts_of(outcome: Exit) -> dict:
    assert not outcome.failed, outcome.result
    assert outcome.result["changed"] is False
    return outcome.result["ansible_facts"]["nccl"]
