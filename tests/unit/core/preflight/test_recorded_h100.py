# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the project makes of a second real GPU machine: one NVIDIA H100 80GB HBM3 (an SXM5 module,
700 W, HGX Module Id 8) passed alone into a Firecracker VM (driver 580.159.04, CUDA 13.0, torch
2.11.0+cu130, NCCL 2.28.9), recorded by tests/device/record_h100.sh on 2026-11-26
(tests/fixtures/README.md, "Recorded on a GPU machine - one NVIDIA H100"). Each test feeds a
recording to the project's real parsers and judges and asserts what they make of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_preflight.core.preflight import host_checks as pf
from nccl_preflight.core.transport import describe, parse_nccl_log
from nccl_preflight.node import gpu_health
from nccl_preflight.node.parse import parse_nvidia_smi_csv, parse_python_probe
from nccl_preflight.slurm.node_check import finding_line
from tests.recorded_gpu import FIXTURES, LONE_HEALTHY_GPU, Machine, text

H100 = Machine("h100-vm")
HOST = H100.host
SETTINGS = {"require_gpu": True, "order": [HOST]}
SOCKET_LOG = "nccl_logs/recorded-h100-vm-socket-one-rank-2.28.9.log"  # INIT,NET,ENV; pid 589
GRAPH_LOG = "nccl_logs/recorded-h100-vm-graph-one-rank-2.28.9.log"  # INIT,GRAPH,NET; pid 1066
NO_NVLINK = (
    "vm: no GPU here reports an NVLink (nvidia-smi nvlink -s lists none); its one GPU has no "
    "peer on this host: nothing to check"
)


# --------------------------------------------------------------------------- node parsers
def test_query_csv_is_the_one_h100() -> None:
    gpus = parse_nvidia_smi_csv(text("nvidia-smi/h100-vm.csv"))
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "driver_version": "580.159.04",
            "memory_total_mib": 81559,
            "uuid": "GPU-04de7f0e-92c0-6e12-8807-763bb4d108d0",
            "pci_bus_id": "00000000:00:06.0",
        }
    ]
    assert gpus == H100.readers()["gpus"]
    table = text("nvidia-smi/h100-vm-table.txt")  # the same minute: the SXM5's 700 W cap
    assert "0MiB /  81559MiB" in table and "70W /  700W" in table


def test_smi_query_reads_the_sxm5_h100() -> None:
    raw = text("gpu/q-h100-vm.txt")
    assert "Module Id                                      : 8" in raw  # an HGX baseboard slot
    query = gpu_health.parse_smi_query(raw)
    assert (query["driver_version"], query["cuda_version"]) == ("580.159.04", "13.0")
    [gpu] = query["gpus"]
    assert (gpu["name"], gpu["bus_id"], gpu["bus_key"]) == (
        "NVIDIA H100 80GB HBM3",
        "00000000:00:06.0",
        "0000:00:06",
    )
    assert set(gpu["ecc"].values()) == {0} and gpu["ecc_mode"] == "Enabled"
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert gpu["pcie"] == {
        "gen_max": 5,
        "gen_current": 5,
        "gen_device_max": 5,
        "gen_host_max": None,  # "N/A" behind the VM's virtual root port
        "width_max": 16,
        "width_current": 16,
    }
    assert (gpu["fabric_state"], gpu["fabric_status"]) == (None, None)  # "N/A": no NVSwitch
    assert [k for k, active in gpu["clock_reasons"].items() if active] == ["Idle"]
    assert query == H100.readers()["gpu_health"]["query"]


def test_a_lone_sxm5_h100_lists_no_nvlink_and_no_nic() -> None:
    """An NVLink module without its baseboard's NVSwitches: nvidia-smi nvlink -s printed nothing
    (rc 0), as the H200's did, and topo -m lists the one GPU (ANSI-underlined header) alone."""
    assert (FIXTURES / "gpu/nvlink-h100-vm.txt").read_bytes() == b""
    assert gpu_health.parse_nvlink_status("") == [] == H100.readers()["gpu_health"]["nvlink"]
    raw = (FIXTURES / "gpu/topo-h100-vm.txt").read_bytes()
    assert raw.startswith(b"\t\x1b[4mGPU0\tCPU Affinity")
    topology = gpu_health.parse_topology(raw.decode())
    assert topology == {"nics": [], "gpus": [{"index": 0, "nics": {}}]}
    assert topology == H100.readers()["gpu_health"]["topology"]


def test_torch_probe() -> None:
    probe = parse_python_probe(text("torch/probe-h100-vm.json"))
    assert (probe["torch_version"], probe["cuda_version"], probe["nccl_version"]) == (
        "2.11.0+cu130",
        "13.0",
        "2.28.9",
    )
    assert (probe["cuda_available"], probe["device_count"], probe["reason"]) == (True, 1, "")


# --------------------------------------------------------------------------- judges
def test_gpu_health_judges_the_healthy_h100() -> None:
    by_check = H100.gpu_health_results()
    assert {check: r["status"] for check, r in by_check.items()} == LONE_HEALTHY_GPU
    assert by_check["gpu_memory"]["message"] == (
        "vm: no uncorrectable memory error, nothing pending (1 GPUs report ECC counters; no "
        "correctable error)"
    )
    # It said "no GPU here has NVLink (PCIe-only or NVLink-C2C GPUs)" of this SXM5 module.
    assert by_check["gpu_nvlink"]["message"] == NO_NVLINK
    assert "PCIe-only" not in by_check["gpu_nvlink"]["message"]
    assert by_check["gpu_fabric"]["message"].startswith("vm: no NVSwitch fabric")


def test_gpu_and_versions_checks_of_the_recorded_node() -> None:
    gpu = pf.check_gpu({HOST: H100.observation()}, HOST, SETTINGS, [HOST])
    assert (gpu["status"], gpu["message"]) == (
        "passed",
        "vm: 1 x NVIDIA H100 80GB HBM3, driver 580.159.04, 1 ranks planned, torch sees 1 CUDA "
        "devices",
    )
    versions = pf.check_versions({HOST: H100.observation()}, HOST, SETTINGS, [HOST])
    assert (versions["status"], versions["message"]) == (
        "passed",
        "vm: python 3.12.3, torch 2.11.0+cu130, cuda 13.0, nccl 2.28.9, driver 580.159.04",
    )


# --------------------------------------------------------------------------- the rank script
def test_the_rank_json_of_the_h100_run() -> None:
    """The rank script as fixed after the H200 recording reads the open kernel module's driver
    version on the machine itself (the H200's rank JSON said "for")."""
    doc = json.loads(text("rank_json/h100-nccl-one-rank/rank-0.json"))
    assert (doc["backend"], doc["device"], doc["status"]) == ("nccl", "cuda:0", "passed")
    assert doc["versions"] == {
        "python": "3.12.3",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "nccl": "2.28.9",
        "driver": "580.159.04",
    }
    statuses = [t["status"] for t in doc["tests"]]
    assert (statuses.count("passed"), statuses.count("skipped"), len(statuses)) == (15, 8, 23)


# --------------------------------------------------------------------------- NCCL logs
@pytest.mark.parametrize("name", [SOCKET_LOG, GRAPH_LOG])
def test_one_rank_nccl_logs(name: str) -> None:
    """NCCL_DEBUG_SUBSYS=GRAPH adds the topology NCCL built ("PCI[48.0] - GPU/0-60", the path
    lines "(1/48.0/PHB)", "Pattern 4, ... type LOC/PIX"): none of it is read as a transport."""
    log = text(name)
    if name == GRAPH_LOG:
        assert "+ PCI[48.0] - GPU/0-60" in log and "type LOC/PIX" in log
    parsed = parse_nccl_log(log)
    assert (parsed["pids"], parsed["net"], parsed["transports"], parsed["warnings"]) == (
        [589 if name == SOCKET_LOG else 1066],
        "Socket",
        [],
        [],
    )
    assert (parsed["nvls_channels"], parsed["net_channels"]) == (0, 0)
    assert describe(parsed) == (
        "network Socket chosen, no channel crossed the network; NET/IB found no device"
    )


def test_one_rank_run_reports_pass_with_eight_skips(tmp_path: Path) -> None:
    H100.one_rank_run_suite(tmp_path, "h100-nccl-one-rank", SOCKET_LOG, 589)


# --------------------------------------------------------------------------- node-check
def test_node_check_of_the_recorded_facts_says_what_it_said_there_but_two_fixes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """node/facts.py's facts of the H100 VM judged again here give node-check's recorded output
    (gpu/node-check-h100-vm.txt and .json) line for line, but two lines its real output showed
    wrong: gpu_nvlink called the SXM5 H100 "PCIe-only or NVLink-C2C", and with no ip command the
    hostname fix read "map vm to its fabric address <fabric address>"."""
    host, results = H100.node_check(monkeypatch)
    assert host == HOST
    recorded = text("gpu/node-check-h100-vm.txt").splitlines()
    assert recorded[-1].startswith(f"node-check: vm: 2 check(s) failed ({len(results)} checks, ")
    now = {r["check"]: finding_line(r) for r in results}
    there = {line.split(":")[0]: line for line in recorded[:-1]}
    assert list(now) == list(there)
    changed = {check for check in now if now[check] != there[check]}
    assert changed == {"gpu_nvlink", "hostname"}
    assert "PCIe-only or NVLink-C2C" in there["gpu_nvlink"]
    assert now["gpu_nvlink"] == f"gpu_nvlink: skipped: {NO_NVLINK}"
    assert "<fabric address>" in there["hostname"]
    assert now["hostname"].endswith(
        "[fix: getent hosts vm  (on vm); map vm to the address of eth0 (ip -4 addr show eth0) "
        "in /etc/hosts instead of 127.0.0.1]"
    )
    assert now["interface"] == there["interface"]  # the missing ip named, as fixed for the H200
    doc = json.loads(text("gpu/node-check-h100-vm.json"))
    assert doc["exit"] == 1 and doc["host"] == HOST
    same = [r for r in results if r["check"] not in changed]
    keys = ("check", "status", "message", "hint", "host")
    assert [{k: r[k] for k in keys} for r in same] == [
        {k: r[k] for k in keys} for r in doc["results"] if r["check"] not in changed
    ]
