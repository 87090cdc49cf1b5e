# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The unit tests' shared fixtures (their builders: tests/builders/): a small /sys and /proc and
the facts module run on recorded answers, node-check's fake GPU node and scontrol, the launch
module's fake torchrun, run directory and environment-printing Python."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import nccl_facts
import pytest
from ansible.module_utils.nccl_preflight.node import facts as node_facts

from nccl_preflight.node.processes import start_time, write_json
from tests.builders.launch import action
from tests.builders.node_check import FakeRunner
from tests.builders.torchrun import ENV_KEYS, FAKE_TORCHRUN
from tests.module_exit import ModuleExit as Exit
from tests.module_exit import run_module_main


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """A small /sys and /proc: speed of the fabric port, an RDMA device under it."""
    sys_root = tmp_path / "sys"
    net = sys_root / "class" / "net"
    for name, speed in (("enp1s0f0np0", "200000\n"), ("enp1s0f1np1", "-1\n")):
        (net / name).mkdir(parents=True)
        (net / name / "speed").write_text(speed, encoding="utf-8")
    (sys_root / "class" / "infiniband" / "rocep1s0f0" / "device" / "net" / "enp1s0f0np0").mkdir(
        parents=True
    )
    proc = tmp_path / "proc" / "sys" / "net" / "ipv4"
    proc.mkdir(parents=True)
    (proc / "ip_local_port_range").write_text("32768\t60999\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Exit]:
    return lambda **args: run_module_main(monkeypatch, nccl_facts.main, args)


@pytest.fixture
def gpu_node(monkeypatch: pytest.MonkeyPatch, sysfs: Path) -> FakeRunner:
    monkeypatch.setattr(node_facts, "SYS_ROOT", str(sysfs / "sys"))
    monkeypatch.setattr(node_facts, "PROC_ROOT", str(sysfs / "proc"))
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    monkeypatch.setattr(node_facts.socket, "gethostname", lambda: "gpu07.invalid")
    return FakeRunner()


@pytest.fixture
def scontrol(tmp_path: Path) -> Path:
    """A fake scontrol first on PATH: appends its argv (one JSON list per call) to a file."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "scontrol.calls"
    script = bindir / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(record)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    script.chmod(0o755)
    return record


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_TORCHRUN.format(python=sys.executable))
    path.chmod(0o755)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "nccl-preflight-run-node1"
    path.mkdir(mode=0o700)
    (path / "nccl.env").write_text(
        "NCCL_SOCKET_IFNAME='eth1'\nGLOO_SOCKET_IFNAME='eth1'\nNCCL_DEBUG=WARN\n"
        "export NCCL_IB_HCA='mlx5_0 mlx5_1'  # comment\n"
    )
    (path / "check.py").write_text("print('hello')\n")
    return path


@pytest.fixture
def env_python(tmp_path: Path) -> Path:
    """A "python" that prints, as JSON, the part of its environment the tests look at."""
    script = tmp_path / "env-python"
    script.write_text(
        f"#!{sys.executable}\nimport json, os\n"
        f"print(json.dumps({{k: os.environ.get(k) for k in {ENV_KEYS!r}}}))\n"
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    lines: list[str] = []
    monkeypatch.setattr(action.display, "display", lambda msg, **kw: lines.append(msg))
    return lines


SLEEP = "import time; time.sleep(300)"


@pytest.fixture
def main_process() -> Iterator[subprocess.Popen]:
    """What stands in for ansible-playbook: the tether watches it."""
    proc = subprocess.Popen([sys.executable, "-c", SLEEP])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture
def node_run(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen]]:
    """A run directory with a recorded listener-like process."""
    run_dir = tmp_path / "nccl-preflight-t1-node1"
    (run_dir / "preflight").mkdir(parents=True, mode=0o700)
    listener = subprocess.Popen([sys.executable, "-c", SLEEP])
    write_json(
        run_dir / "preflight" / "listener.pid",
        {"pid": listener.pid, "start_time": start_time(listener.pid)},
    )
    yield run_dir, listener
    if listener.poll() is None:
        listener.kill()
    listener.wait()
