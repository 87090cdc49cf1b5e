# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the project makes of a real GPU machine: one NVIDIA H200 in a Firecracker VM (driver
580.159.04, CUDA 13.0, torch 2.11.0+cu130, NCCL 2.28.9), recorded by tests/device/record_gpu.sh
on 2026-11-26 (tests/fixtures/README.md, "Recorded on a GPU machine"). Each test feeds a recording
to the project's real parsers, judges and report writers and asserts what they make of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_preflight.core import hints
from nccl_preflight.core.preflight import gpu_checks
from nccl_preflight.core.preflight import host_checks as pf
from nccl_preflight.core.transport import describe, parse_nccl_log
from nccl_preflight.node import gpu_health
from nccl_preflight.node.fabric_facts import read_nccl_config
from nccl_preflight.node.parse import parse_nvidia_smi_csv, parse_python_probe
from nccl_preflight.node.run_progress import parse_torchrun_failures
from tests.check.support import load_script
from tests.jenkins_schema import validate_report_junit
from tests.recorded_gpu import FIXTURES, LONE_HEALTHY_GPU, Machine, text
from tests.report_build import build_report, build_verdict

H200 = Machine("h200-vm")
HOST = H200.host
DMESG = "gpu/dmesg-h200-vm-nvrm.txt"  # the kernel log's nvidia/NVRM lines, recorded


def readers() -> dict:
    return H200.readers()


def observation(nproc: int = 1) -> dict:
    return H200.observation(nproc, dmesg=DMESG)


# --------------------------------------------------------------------------- node parsers
def test_query_csv_is_the_one_h200() -> None:
    gpus = parse_nvidia_smi_csv(text("nvidia-smi/h200-vm.csv"))
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "driver_version": "580.159.04",
            "memory_total_mib": 143771,
            "uuid": "GPU-f94432f7-2b88-5eb9-0332-b9d75e5d60ee",
            "pci_bus_id": "00000000:00:06.0",
        }
    ]
    assert gpus == readers()["gpus"]
    # The same figures as the nvidia-smi table of the same minute.
    table = text("nvidia-smi/h200-vm-table.txt")
    assert "Driver Version: 580.159.04" in table and "0MiB / 143771MiB" in table


def test_smi_query_reads_the_h200_counters() -> None:
    query = gpu_health.parse_smi_query(text("gpu/q-h200-vm.txt"))
    assert (query["driver_version"], query["cuda_version"]) == ("580.159.04", "13.0")
    [gpu] = query["gpus"]
    assert (gpu["name"], gpu["bus_id"], gpu["bus_key"]) == (
        "NVIDIA H200",
        "00000000:00:06.0",
        "0000:00:06",
    )
    assert gpu["ecc"] == {
        "volatile_uncorrectable": 0,
        "volatile_correctable": 0,
        "aggregate_uncorrectable": 0,
        "aggregate_correctable": 5101,
    }
    assert gpu["remapped_rows"] == {
        "correctable": 1,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert gpu["pcie"]["width_current"] == gpu["pcie"]["width_max"] == 16
    assert gpu["pcie"]["gen_current"] == gpu["pcie"]["gen_max"] == 5
    assert (gpu["fabric_state"], gpu["fabric_status"]) == (None, None)  # "N/A" in a VM
    assert gpu["clock_reasons"]["Idle"] is True
    # What the node's readers made of the same -q on the machine.
    assert query == readers()["gpu_health"]["query"]


def test_topology_with_ansi_underline_and_no_nic() -> None:
    raw = (FIXTURES / "gpu/topo-h200-vm.txt").read_bytes()
    assert raw.startswith(b"\t\x1b[4mGPU0\t") and b"\x1b[0m\n" in raw  # nvidia-smi's own bytes
    topology = gpu_health.parse_topology(raw.decode())
    assert topology == {"nics": [], "gpus": [{"index": 0, "nics": {}}]}
    assert topology == readers()["gpu_health"]["topology"]


def test_nvlink_of_one_h200_in_a_vm_prints_nothing() -> None:
    assert (FIXTURES / "gpu/nvlink-h200-vm.txt").read_bytes() == b""  # rc 0, no output
    assert gpu_health.parse_nvlink_status("") == [] == readers()["gpu_health"]["nvlink"]


def test_nvrm_boot_lines_are_no_xid() -> None:
    log = text("gpu/dmesg-h200-vm-nvrm.txt")
    assert "FBHUB Interrupt detected" in log
    assert gpu_health.parse_xids(log) == [] == readers()["gpu_health"]["kernel_log"]["xids"]


def test_torch_probe() -> None:
    probe = parse_python_probe(text("torch/probe-h200-vm.json"))
    assert {k: probe[k] for k in ("torch_version", "cuda_available", "cuda_version")} == {
        "torch_version": "2.11.0+cu130",
        "cuda_available": True,
        "cuda_version": "13.0",
    }
    assert (probe["nccl_version"], probe["device_count"], probe["reason"]) == ("2.28.9", 1, "")


# --------------------------------------------------------------------------- judges
def test_gpu_health_judges_the_healthy_h200() -> None:
    """Aggregate correctable ECC (5101 since manufacture) and one row remapped for a
    correctable error, nothing pending, no remapping failure: healthy. NVIDIA's NVML
    (nvmlDeviceGetRemappedRows, docs.nvidia.com/deploy/nvml-api) calls for a reset only when a
    remapping is pending and for replacement when one failed; the rule (docs/design.md
    "gpu_memory") fails only those and uncorrectable errors, and shows the correctable count."""
    by_check = H200.gpu_health_results(dmesg=DMESG)
    assert {check: r["status"] for check, r in by_check.items()} == LONE_HEALTHY_GPU
    assert by_check["gpu_memory"]["message"] == (
        "vm: no uncorrectable memory error, nothing pending (1 GPUs report ECC counters; "
        "GPU 0 (00000000:00:06.0) 5101 correctable (aggregate))"
    )
    assert "1 GPU x16" in by_check["gpu_pcie"]["message"]
    assert "no GPU here reports an NVLink" in by_check["gpu_nvlink"]["message"]
    assert "the run uses no RDMA NIC" in by_check["gpu_topology"]["message"]
    assert "torch sees 1 CUDA devices for 1 ranks" in by_check["gpu_visible"]["message"]


def test_gpu_and_versions_checks_of_the_recorded_node() -> None:
    settings = {"require_gpu": True, "order": [HOST]}
    gpu = pf.check_gpu({HOST: observation()}, HOST, settings, [HOST])
    assert (gpu["status"], gpu["message"]) == (
        "passed",
        "vm: 1 x NVIDIA H200, driver 580.159.04, 1 ranks planned, torch sees 1 CUDA devices",
    )
    versions = pf.check_versions({HOST: observation()}, HOST, settings, [HOST])
    assert versions["status"] == "passed"
    # judged alone: no "the same on every host" (a node check compares with no other host)
    assert versions["message"] == (
        "vm: python 3.12.3, torch 2.11.0+cu130, cuda 13.0, nccl 2.28.9, driver 580.159.04"
    )


def test_two_ranks_on_the_one_gpu_fail_the_preflight() -> None:
    """The layout of the recorded duplicate-GPU run (two ranks, one GPU) is caught before launch."""
    settings = {"require_gpu": True, "order": [HOST]}
    assert pf.check_gpu({HOST: observation(nproc=2)}, HOST, settings, [HOST])["status"] == "failed"
    visible = gpu_checks.check_visible(observation(nproc=2), settings)
    assert visible["status"] == "failed"
    assert "torch.cuda.device_count() is 1" in visible["message"]


# --------------------------------------------------------------------------- the rank script
def test_rank_script_reads_the_open_kernel_modules_driver_version() -> None:
    nc = load_script()
    path = FIXTURES / "gpu/proc-driver-nvidia-version-h200-vm.txt"
    assert "Open Kernel Module for x86_64  580.159.04" in path.read_text()
    assert nc.nvidia_driver_version(str(path)) == "580.159.04"
    # The recorded rank JSON shows what the old pattern read there: the word after "Module".
    recorded = json.loads(text("rank_json/h200-nccl-one-rank/rank-0.json"))
    assert recorded["versions"]["driver"] == "for"


def test_rank_script_keeps_nccls_last_error() -> None:
    """torch's NCCL error says "run with NCCL_DEBUG=WARN for details" on its first line; NCCL's
    reason is on the lines after "Last error:". The exception text is the recorded one (the last
    line of the recorded traceback onwards)."""
    nc = load_script()
    doc = json.loads(text("rank_json/h200-duplicate-gpu/rank-0.json"))
    traceback = doc["tests"][1]["details"]["traceback"]
    exc_text = traceback.split("torch.distributed.DistBackendError: ", 1)[1]
    message = nc.first_line(RuntimeError(exc_text))
    assert message == (
        "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, invalid usage "
        "(run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9; NCCL's last error: "
        "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60"
    )
    assert nc.first_line(RuntimeError("one line\nsecond")) == "one line"
    assert nc.first_line(RuntimeError("")) == "RuntimeError"


# --------------------------------------------------------------------------- NCCL logs
def test_one_rank_nccl_log() -> None:
    parsed = parse_nccl_log(text("nccl_logs/recorded-h200-vm-socket-one-rank-2.28.9.log"))
    assert parsed["warnings"] == []  # "Could not get speed", "dlvsym failed" are INFO lines
    assert describe(parsed) == "network Socket chosen, no channel crossed the network; " + (
        "NET/IB found no device"
    )


def test_one_rank_run_reports_pass_with_eight_skips(tmp_path: Path) -> None:
    log = "nccl_logs/recorded-h200-vm-socket-one-rank-2.28.9.log"
    H200.one_rank_run_suite(tmp_path, "h200-nccl-one-rank", log, 588)


@pytest.mark.parametrize("source", ["rank JSON and NCCL log", "rank JSON", "NCCL log"])
def test_duplicate_gpu_names_two_ranks_on_one_gpu(tmp_path: Path, source: str) -> None:
    name = "nccl_logs/recorded-h200-vm-duplicate-gpu-2.28.9.log"
    logs = {0: H200.lines_of_pid(name, 666), 1: H200.lines_of_pid(name, 667)}
    run = H200.run_dir(tmp_path, "h200-duplicate-gpu", 2, None if source == "rank JSON" else logs)
    if source == "NCCL log":  # a rank JSON without torch's "Last error:" (older torch)
        for rank in (0, 1):
            path = run / HOST / f"rank-{rank}.json"
            doc = json.loads(path.read_text())
            doc["tests"][1]["details"]["traceback"] = "(no traceback)"
            path.write_text(json.dumps(doc))
    build_report(run)
    validate_report_junit(run)
    verdict = build_verdict(run)
    assert verdict["class"] == "rank_lost"
    found = {f["rank"]: f for f in verdict["findings"] if f["test"] == "init"}
    assert sorted(found) == [0, 1]
    for finding in found.values():
        assert finding["fix"].startswith(
            "Two ranks share one GPU: ranks 0 and 1 on vm both run on the GPU at PCI 0000:00:06.0"
        )
        assert "slots=N in the hostfile" in finding["fix"]
        assert "CUDA_VISIBLE_DEVICES" in finding["fix"]
        assert "raise the timeout" not in finding["fix"]


def test_nccl_bus_id_is_the_pci_address() -> None:
    # NCCL's busId of 00000000:00:06.0 is 0x60 (the log's "busId 60"); int64ToBusId's layout.
    assert hints.pci_address("60") == "0000:00:06.0"
    assert hints.pci_address("1b000") == "0000:1b:00.0"
    assert hints.pci_address("100041") == "0001:00:04.1"


def test_torchrun_report_of_the_duplicate_gpu_run() -> None:
    failures = parse_torchrun_failures(text("runfaults/torchrun-duplicate-gpu-h200-vm.log"))
    assert [(f["rank"], f["pid"], f["exitcode"], f["root_cause"]) for f in failures] == [
        (0, 666, 1, True),
        (1, 667, 1, False),
    ]


def test_the_container_images_nccl_version_is_no_nccl_setting(tmp_path: Path) -> None:
    """The recorded machine's environment held NCCL_VERSION=2.28.3-1 (its CUDA image's libnccl2
    package; torch ran its own NCCL 2.28.9). The readers took it for an NCCL setting, so
    nccl_config listed it and a host without it would have differed from the others."""
    recorded = readers()["fabric"]["nccl_config"]
    assert recorded["effective"] == {"NCCL_VERSION": {"value": "2.28.3-1", "source": "environment"}}
    environ = {"HOME": str(tmp_path), "NCCL_VERSION": "2.28.3-1", "NCCL_IB_DISABLE": "1"}
    config = read_nccl_config(str(tmp_path), environ=environ)
    assert config["env"] == {"NCCL_IB_DISABLE": "1"}
    assert config["effective"] == {"NCCL_IB_DISABLE": {"value": "1", "source": "environment"}}
