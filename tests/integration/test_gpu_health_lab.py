# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""GPU node health on the lab: every host's PATH holds an `nvidia-smi` test double that replays a
recording (tests/integration/nvidia_smi_double.py, never shipped), then the real playbook runs
the pre-flight over SSH with nccl_backend=nccl and nccl_require_gpu=true.

Hosts 1 and 3 replay a healthy 8 x H100 node (tests/fixtures/gpu/q-h100x8.txt); host 2 replays
the same node with uncorrectable ECC errors and a PCIe x4 link on GPU 3 (q-h100x8-ecc-x4.txt).
Host 2 and its GPU 3 are named; the other hosts pass the GPU health checks.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.builders.lab_runs import Run
from tests.lab.harness import SBIN_PATH

pytestmark = pytest.mark.lab

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu"
DOUBLE = Path(__file__).resolve().parent / "nvidia_smi_double.py"
FAULTY = 1  # 0-based rank of the host with the bad GPU
HEALTH_CHECKS = ("gpu_memory", "gpu_pcie", "gpu_nvlink", "gpu_fabric", "gpu_modes", "gpu_topology")


def replay_dir(root: Path, name: str, q: str) -> Path:
    """<root>/<name>/bin/nvidia-smi (the double) and <root>/<name>/replay (its recordings)."""
    replay = root / name / "replay"
    replay.mkdir(parents=True)
    for source, target in (
        ("query-h100x8.csv", "query.csv"),
        (q, "q.txt"),
        ("topo-h100x8-nv18.txt", "topo.txt"),
        ("nvlink-a100x8.txt", "nvlink.txt"),
    ):
        shutil.copyfile(FIXTURES / source, replay / target)
    bin_dir = root / name / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOUBLE}" "$@"\n')
    tool.chmod(0o755)
    root.chmod(0o755)
    return root / name


def test_one_host_with_ecc_errors_and_a_x4_link_is_named(
    lab_factory, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    root = tmp_path_factory.mktemp("gpu-double")
    host_env = {}
    for rank in range(3):
        q = "q-h100x8-ecc-x4.txt" if rank == FAULTY else "q-h100x8.txt"
        home = replay_dir(root, f"host{rank}", q)
        host_env[rank] = {
            "PATH": f"{home / 'bin'}:{SBIN_PATH}",
            "NVIDIA_SMI_REPLAY": str(home / "replay"),
        }
    lab = lab_factory(3, host_env=host_env)
    run = Run(
        lab,
        lab.inventory_dir,
        tmp_path,
        "-e",
        "nccl_backend=nccl",
        "-e",
        "nccl_require_gpu=true",
    )
    assert run.proc.returncode != 0, run.output[-3000:]
    bad_host = lab.hosts[FAULTY].inventory_name

    memory = run.result(FAULTY, "gpu_memory")
    assert memory["status"] == "failed", memory
    assert memory["message"].startswith(
        f"{bad_host}: GPU 3 (00000000:86:00.0): 2 uncorrectable ECC errors (volatile)"
    )
    pcie = run.result(FAULTY, "gpu_pcie")
    assert pcie["status"] == "failed", pcie
    assert (
        f"{bad_host}: GPU 3 (00000000:86:00.0): PCIe link trained down to x4 of x16"
        in pcie["message"]
    )
    assert "7 GPUs x16, 1 GPU x4 differ from the other hosts (8 GPUs x16)" in pcie["message"]
    # ...and the play's own output says it, grouped under that host.
    assert f"{bad_host}: GPU 3 (00000000:86:00.0): PCIe link trained down" in run.output
    # The facts came from the double over SSH: every host lists the recording's GPUs.
    for rank in range(3):
        model = run.result(rank, "gpu_model")
        assert model["status"] == "passed" and "NVIDIA H100 80GB HBM3" in model["message"], model

    for rank in (0, 2):
        for check in HEALTH_CHECKS:
            result = run.result(rank, check)
            assert result["status"] == "passed", result
        assert run.result(rank, "gpu_xid")["status"] != "failed"  # this machine's real kernel log
        assert run.result(rank, "gpu_dcgm")["status"] == "skipped"
    for rank in range(3):
        # torch here is the CPU build: it sees no CUDA device, and says so on every host.
        visible = run.result(rank, "gpu_visible")
        assert visible["status"] == "failed"
        assert "torch.cuda.device_count() is 0" in visible["message"]
    assert {(r, c) for r, c in run.failed() if c.startswith("gpu_") and c != "gpu_visible"} == {
        (FAULTY, "gpu_memory"),
        (FAULTY, "gpu_pcie"),
    }
