# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""GPU node health: the parsers (src/nccl_preflight/node/gpu_health.py) on every recording in
tests/fixtures/gpu/, and the checks (core/preflight/gpu_checks.py) on observations built
from them. Variants made inside a test (a GPU marked busy, MIG enabled) say so where they are."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nccl_preflight.core.preflight import gpu_checks as checks
from nccl_preflight.node import gpu_health as parse
from nccl_preflight.node.parse import parse_nvidia_smi_csv

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def health(query: str | None = "gpu/q-h100x8.txt", **parts: object) -> dict:
    out = {
        "query": parse.parse_smi_query(text(query)) if query else None,
        "query_reason": "",
        "topology": parse.parse_topology(text("gpu/topo-h100x8-nv18.txt")),
        "topology_reason": "",
        "nvlink": parse.parse_nvlink_status(text("gpu/nvlink-a100x8.txt")),
        "nvlink_reason": "",
        "kernel_log": {"source": "dmesg", "xids": []},
        "kernel_log_reason": "",
        "nvswitch": False,
        "fabric_manager": {"state": "active", "reason": ""},
        "cuda_visible_devices": None,
        "dcgm": {"level": 0, "results": None, "reason": "nccl_dcgm_diag_level is 0 (off)"},
    }
    out.update(parts)
    return out


def observation(
    gpu_health: dict | None = None,
    csv: str = "gpu/query-h100x8.csv",
    nproc: int = 8,
    device_count: int = 8,
    rdma: tuple[str, ...] = ("mlx5_0",),
) -> dict:
    return {
        "backend": "nccl",
        "ifname": "ibp12s0",
        "nproc_per_node": nproc,
        "python": "/usr/bin/python3",
        "python_facts": {"torch_version": "2.13.0", "device_count": device_count, "reason": ""},
        "facts": {
            "gpus": parse_nvidia_smi_csv(text(csv)),
            "gpus_reason": "",
            "interfaces": {"ibp12s0": {"rdma_devices": list(rdma)}},
            "gpu_health": health() if gpu_health is None else gpu_health,
        },
    }


def results(observations: dict, host: str, **settings: object) -> dict[str, dict]:
    settings = {"require_gpu": True, "order": list(observations), **settings}
    return {r["check"]: r for r in checks.nccl_gpu_health_results(observations, host, settings)}


# --------------------------------------------------------------------------- parsers
def test_smi_query_of_an_h100_node() -> None:
    data = parse.parse_smi_query(text("gpu/q-h100x8.txt"))
    assert data["driver_version"] == "535.183.01"
    assert [g["bus_id"] for g in data["gpus"]][:2] == ["00000000:53:00.0", "00000000:64:00.0"]
    gpu = data["gpus"][0]
    assert gpu["bus_key"] == "0000:53:00"
    assert gpu["pcie"] == {
        "gen_max": 5,
        "gen_current": 5,
        "gen_device_max": 5,
        "gen_host_max": None,
        "width_max": 16,
        "width_current": 16,
    }
    assert gpu["ecc"] == {
        "volatile_uncorrectable": 0,
        "volatile_correctable": 0,
        "aggregate_uncorrectable": 0,
        "aggregate_correctable": 0,
    }
    assert gpu["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert gpu["retired_pages"]["pending"] is None  # N/A on Hopper: rows are remapped instead
    assert (gpu["fabric_state"], gpu["fabric_status"]) == ("Completed", "Success")
    assert gpu["clock_reasons"]["Idle"] is True
    assert gpu["clock_reasons"]["HW Thermal Slowdown"] is False
    assert (gpu["persistence_mode"], gpu["mig_mode"], gpu["compute_mode"]) == (
        "Enabled",
        "Disabled",
        "Default",
    )


def test_smi_query_variants() -> None:
    a10 = parse.parse_smi_query(text("gpu/q-a10-remap-pending.txt"))["gpus"][0]
    assert a10["remapped_rows"]["pending"] is True
    assert a10["remapped_rows"]["uncorrectable"] == 4
    assert a10["fabric_state"] is None
    idle = parse.parse_smi_query(text("gpu/q-rtx4090x8-idle.txt"))["gpus"][0]
    assert idle["pcie"]["gen_current"] == 1 and idle["pcie"]["gen_max"] == 4
    assert idle["pcie"]["width_current"] == idle["pcie"]["width_max"] == 16
    assert idle["performance_state"] == "P8"
    bad = parse.parse_smi_query(text("gpu/q-h100x8-ecc-x4.txt"))["gpus"][3]
    assert bad["bus_id"] == "00000000:86:00.0"
    assert bad["pcie"]["width_current"] == 4
    assert bad["ecc"]["volatile_uncorrectable"] == bad["ecc"]["aggregate_uncorrectable"] == 2


def test_volta_ecc_layout() -> None:
    recorded = text("gpu/q-titanv-volta.txt")
    (gpu,) = parse.parse_smi_query(recorded)["gpus"]
    assert gpu["name"] == "NVIDIA TITAN V"
    assert set(gpu["ecc"].values()) == {None}  # every counter N/A on this board
    assert gpu["remapped_rows"]["pending"] is None  # "Remapped Rows : N/A" before Ampere
    # Variant made here: 3 double-bit errors in the volatile Total, 1 pending retired page.
    lines = recorded.splitlines()
    start = lines.index("            Double Bit")
    total = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("Total"))
    lines[total] = lines[total].replace("N/A", "3")
    variant = "\n".join(lines).replace(
        "Pending Page Blacklist            : N/A", "Pending Page Blacklist            : Yes"
    )
    (gpu,) = parse.parse_smi_query(variant)["gpus"]
    assert gpu["ecc"]["volatile_uncorrectable"] == 3
    assert gpu["ecc"]["aggregate_uncorrectable"] is None
    assert gpu["retired_pages"]["pending"] is True


def test_gb10_reports_nothing_it_does_not_have() -> None:
    (gpu,) = parse.parse_smi_query(text("gpu/gb10-q-partial.txt"))["gpus"]
    assert gpu["name"] == "NVIDIA GB10"
    assert gpu["bus_key"] == "000f:01:00"
    assert set(gpu["pcie"].values()) == {None}
    assert set(gpu["ecc"].values()) == {None}
    assert gpu["remapped_rows"]["pending"] is None


def test_parsers_refuse_other_text() -> None:
    with pytest.raises(ValueError, match="GPU <bus id>"):
        parse.parse_smi_query(text("nvidia-smi/driver-not-loaded.txt"))
    with pytest.raises(ValueError, match="GPU0"):
        parse.parse_topology("No devices were found\n")
    with pytest.raises(ValueError, match="JSON"):
        parse.parse_dcgm_diag("Error: unable to connect to host engine")


def test_topology_with_nic_legend() -> None:
    topo = parse.parse_topology(text("gpu/topo-h100x8-nv18.txt"))
    assert topo["nics"] == [f"mlx5_{i}" for i in range(8)]
    assert len(topo["gpus"]) == 8
    assert topo["gpus"][0]["nics"]["mlx5_0"] == "PIX"
    assert topo["gpus"][0]["nics"]["mlx5_4"] == "SYS"
    assert topo["gpus"][5]["nics"]["mlx5_5"] == "PIX"


def test_nvlink_status() -> None:
    a100 = parse.parse_nvlink_status(text("gpu/nvlink-a100x8.txt"))
    assert len(a100) == 8
    assert all(len(g["links"]) == 12 and all(li["up"] for li in g["links"]) for g in a100)
    (v100,) = parse.parse_nvlink_status(text("gpu/nvlink-v100-two-inactive.txt"))
    assert [li["link"] for li in v100["links"] if not li["up"]] == [3, 5]
    (gone,) = parse.parse_nvlink_status(text("gpu/nvlink-a100-all-inactive.txt"))
    assert gone["index"] == 6 and gone["all_inactive"] and gone["links"] == []
    assert parse.parse_nvlink_status("") == []


def test_xids_from_kernel_logs() -> None:
    gsp = parse.parse_xids(text("gpu/dmesg-xid-119.txt"))
    assert [(e["xid"], e["bus"]) for e in gsp] == [(119, "0000:9b:00")] * 5
    assert "GSP" in gsp[0]["line"]
    assert [e["xid"] for e in parse.parse_xids(text("gpu/dmesg-xid-31-48.txt"))] == [31, 48]
    assert parse.parse_xids(text("gpu/dmesg-xid-79.txt"))[0]["bus"] == "0000:44:00"
    fallen = "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
    assert parse.parse_xids(fallen) == [{"xid": 79, "bus": "0000:01:00", "line": fallen}]


def test_dcgm_diag_json() -> None:
    rows = parse.parse_dcgm_diag(text("gpu/dcgmi-diag-r1-fail.json"))
    assert len(rows) == 9
    assert {r["test"]: r["status"] for r in rows}["Persistence Mode"] == "Fail"


def test_dcgm_4_shape() -> None:
    # Made here in the shape facebookresearch/gcm#38 describes for DCGM 4.x: root "DCGM
    # Diagnostic", a test_summary per test, results per entity.
    data = (
        '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": ['
        '{"name": "memory", "test_summary": {"status": "Pass"}, "results": ['
        '{"entity_group": "GPU", "entity_id": 0, "status": "Pass"},'
        '{"entity_group": "GPU", "entity_id": 1, "status": "Fail",'
        ' "warnings": [{"warning": "Uncorrectable ECC error"}]}]},'
        '{"name": "software", "test_summary": {"status": "Pass"}}]}]}}'
    )
    rows = parse.parse_dcgm_diag(data)
    assert [(r["test"], r["gpu"], r["status"]) for r in rows] == [
        ("memory", "0", "Pass"),
        ("memory", "1", "Fail"),
        ("software", None, "Pass"),
    ]
    assert rows[1]["info"] == "Uncorrectable ECC error"


# --------------------------------------------------------------------------- checks
def test_healthy_h100_node_passes_every_check() -> None:
    got = results({"n1": observation()}, "n1")
    assert list(got) == list(checks.GPU_CHECKS)
    statuses = {c: r["status"] for c, r in got.items()}
    assert statuses == {
        "gpu_memory": "passed",
        "gpu_xid": "passed",
        "gpu_pcie": "passed",
        "gpu_nvlink": "passed",
        "gpu_fabric": "passed",
        "gpu_topology": "passed",
        "gpu_modes": "passed",
        "gpu_visible": "passed",
        "gpu_dcgm": "skipped",
    }
    assert "96 NVLinks of 8 GPUs" in got["gpu_nvlink"]["message"]
    assert "8 GPUs Completed/Success, nvidia-fabricmanager active" in got["gpu_fabric"]["message"]
    assert "GPU 0 (00000000:53:00.0) -> mlx5_0 (PIX)" in got["gpu_topology"]["message"]
    assert "warning" not in got["gpu_topology"]["message"]
    assert "nccl_dcgm_diag_level is 0" in got["gpu_dcgm"]["message"]
    # The recording's GPU 2 runs under the platform's power brake: a warning, not a failure.
    assert (
        "warning: n1: GPU 2 (00000000:75:00.0): clocks slowed now by HW Power Brake"
        in (got["gpu_modes"]["message"])
    )


def test_ecc_errors_and_x4_link_name_the_host_and_gpu() -> None:
    observations = {
        "n1": observation(),
        "n2": observation(health("gpu/q-h100x8-ecc-x4.txt")),
        "n3": observation(),
    }
    bad = results(observations, "n2")
    memory, pcie = bad["gpu_memory"], bad["gpu_pcie"]
    assert memory["status"] == "failed"
    assert memory["message"] == (
        "n2: GPU 3 (00000000:86:00.0): 2 uncorrectable ECC errors (volatile); "
        "2 uncorrectable ECC errors (aggregate)"
    )
    assert "nvidia-smi -q -d ECC" in memory["hint"]
    assert pcie["status"] == "failed"
    assert (
        "n2: GPU 3 (00000000:86:00.0): PCIe link trained down to x4 of x16 (Gen5 of Gen5)"
        in (pcie["message"])
    )
    assert "7 GPUs x16, 1 GPU x4 differ from the other hosts (8 GPUs x16)" in pcie["message"]
    for host in ("n1", "n3"):
        good = results(observations, host)
        assert good["gpu_memory"]["status"] == good["gpu_pcie"]["status"] == "passed"


def test_remapped_rows_pending_fails() -> None:
    obs = observation(health("gpu/q-a10-remap-pending.txt"), nproc=1, device_count=1)
    obs["facts"]["gpus"] = [{"index": 0, "pci_bus_id": "00000000:07:00.0", "uuid": "x"}]
    memory = results({"a": obs}, "a")["gpu_memory"]
    assert memory["status"] == "failed"
    assert "GPU 0 (00000000:07:00.0): remapped rows pending (4 uncorrectable" in memory["message"]


def test_idle_generation_drop_is_power_saving_busy_one_is_not() -> None:
    gpus_csv = "\n".join(
        f"{i}, NVIDIA GeForce RTX 4090, 535.154.05, 24564, GPU-{i}, {g['bus_id']}"
        for i, g in enumerate(parse.parse_smi_query(text("gpu/q-rtx4090x8-idle.txt"))["gpus"])
    )
    obs = observation(health("gpu/q-rtx4090x8-idle.txt"))
    obs["facts"]["gpus"] = parse_nvidia_smi_csv(gpus_csv)
    idle = results({"w": obs}, "w")["gpu_pcie"]
    assert idle["status"] == "passed"
    assert "Gen1 of Gen4 at idle (P8: power saving)" in idle["message"]
    # Variant made here: the same GPU reported busy (P0, Idle not active).
    busy = copy.deepcopy(obs)
    gpu = busy["facts"]["gpu_health"]["query"]["gpus"][0]
    gpu["performance_state"], gpu["clock_reasons"]["Idle"] = "P0", False
    got = results({"w": busy}, "w")["gpu_pcie"]
    assert got["status"] == "failed"
    assert "GPU 0 (" in got["message"] and "Gen1 of Gen4 while busy" in got["message"]


def test_inactive_nvlinks_fail() -> None:
    nvlink = parse.parse_nvlink_status(text("gpu/nvlink-v100-two-inactive.txt"))
    got = results({"v": observation(health(nvlink=nvlink))}, "v")["gpu_nvlink"]
    assert got["status"] == "failed"
    assert "v: GPU 3 (00000000:86:00.0): NVLink 3, 5 inactive" in got["message"]
    gone = parse.parse_nvlink_status(text("gpu/nvlink-a100-all-inactive.txt"))
    got = results({"v": observation(health(nvlink=gone))}, "v")["gpu_nvlink"]
    assert "GPU 6 (00000000:B9:00.0): every NVLink is inactive" in got["message"]
    none = results({"v": observation(health(nvlink=[]))}, "v")["gpu_nvlink"]
    assert none["status"] == "skipped" and "no GPU here reports an NVLink" in none["message"]


def test_nvlink_count_compared_across_hosts() -> None:
    fewer = parse.parse_nvlink_status(text("gpu/nvlink-a100x8.txt"))
    for entry in fewer:
        entry["links"] = entry["links"][:6]  # variant made here: 6 links listed per GPU, all up
    observations = {h: observation() for h in ("a", "b", "c")}
    observations["c"] = observation(health(nvlink=fewer))
    got = results(observations, "c")["gpu_nvlink"]
    assert got["status"] == "failed"
    assert "NVLinks per GPU (6 up) differ from the other hosts (12 up)" in got["message"]


def test_xid_checks() -> None:
    fatal = {"source": "dmesg", "xids": parse.parse_xids(text("gpu/dmesg-xid-31-48.txt"))}
    got = results({"x": observation(health(kernel_log=fatal))}, "x")["gpu_xid"]
    assert got["status"] == "failed"
    assert (
        "x: GPU at PCI 000d:00:00: Xid 48 x1: double-bit (uncorrectable) ECC error"
        in (got["message"])
    )
    assert "warning: x: GPU at PCI 000d:00:00: Xid 31" in got["message"]
    app = {"source": "dmesg", "xids": fatal["xids"][:1]}
    assert results({"x": observation(health(kernel_log=app))}, "x")["gpu_xid"]["status"] == (
        "passed"
    )
    # Variant made here: the Xid 79 line of the recording, on the bus of this node's GPU 3.
    line = text("gpu/dmesg-xid-79.txt").replace("0000:44:00", "0000:86:00")
    gone = {"source": "journalctl -k -b", "xids": parse.parse_xids(line)}
    got = results({"x": observation(health(kernel_log=gone))}, "x")["gpu_xid"]
    assert "x: GPU 3 (00000000:86:00.0): Xid 79 x1: GPU has fallen off the bus" in got["message"]
    unread = observation(health(kernel_log=None, kernel_log_reason="dmesg failed (rc=1)"))
    got = results({"x": unread}, "x")["gpu_xid"]
    assert got["status"] == "skipped" and "dmesg failed (rc=1)" in got["message"]


def test_fabric_manager_and_fabric_state() -> None:
    down = observation(health(fabric_manager={"state": "inactive", "reason": ""}))
    got = results({"f": down}, "f")["gpu_fabric"]
    assert got["status"] == "failed"
    assert "the nvidia-fabricmanager service is inactive" in got["message"]
    # Variant made here: GPU 2's fabric still being set up.
    training = observation()
    gpu = training["facts"]["gpu_health"]["query"]["gpus"][2]
    gpu["fabric_state"], gpu["fabric_status"] = "In Progress", None
    got = results({"f": training}, "f")["gpu_fabric"]
    assert "GPU 2 (00000000:75:00.0): fabric state In Progress" in got["message"]
    a10 = observation(health("gpu/q-a10-remap-pending.txt"))
    assert results({"f": a10}, "f")["gpu_fabric"]["status"] == "skipped"


def test_topology_warns_when_every_run_nic_is_across_the_cpus() -> None:
    got = results({"t": observation()}, "t", extra_env={"NCCL_IB_HCA": "=mlx5_4:1"})
    top = got["gpu_topology"]
    assert top["status"] == "passed"
    assert "warning: t: GPU 0 (00000000:53:00.0) -> mlx5_4 (SYS)" in top["message"]
    assert "GPU 4 (00000000:97:00.0) -> mlx5_4 (PIX)" in top["message"]
    assert "NCCL_IB_HCA" in top["hint"]
    excluded = results({"t": observation()}, "t", extra_env={"NCCL_IB_HCA": "^mlx5_0"})
    assert "mlx5_0" not in excluded["gpu_topology"]["message"].split("(NCCL_IB_HCA")[0]
    none = results({"t": observation()}, "t", extra_env={"NCCL_IB_DISABLE": "1"})["gpu_topology"]
    assert none["status"] == "skipped" and "NCCL talks over sockets" in none["message"]


def test_modes() -> None:
    obs = observation()
    gpus = obs["facts"]["gpu_health"]["query"]["gpus"]
    # Variants made here: MIG on GPU 1, HW thermal slowdown on GPU 2, persistence off on GPU 3.
    gpus[1]["mig_mode"] = "Enabled"
    gpus[2]["clock_reasons"]["HW Thermal Slowdown"] = True
    gpus[3]["persistence_mode"] = "Disabled"
    got = results({"m": obs}, "m")["gpu_modes"]
    assert got["status"] == "failed"
    assert "m: GPU 1 (00000000:64:00.0): MIG mode is enabled" in got["message"]
    assert (
        "m: GPU 2 (00000000:75:00.0): clocks slowed now by HW Thermal Slowdown" in (got["message"])
    )
    assert "warning: m: GPU 3 (00000000:86:00.0): persistence mode disabled" in got["message"]
    exclusive = observation(nproc=16)
    for gpu in exclusive["facts"]["gpu_health"]["query"]["gpus"]:
        gpu["compute_mode"] = "Exclusive_Process"
    got = results({"m": exclusive}, "m")["gpu_modes"]
    assert "compute mode Exclusive_Process with more ranks than GPUs" in got["message"]


def test_torch_view_and_cuda_visible_devices() -> None:
    hidden = observation(health(cuda_visible_devices=""))
    got = results({"v": hidden}, "v")["gpu_visible"]
    assert got["status"] == "failed" and "CUDA_VISIBLE_DEVICES is empty" in got["message"]
    got = results({"v": observation(nproc=2)}, "v", extra_env={"CUDA_VISIBLE_DEVICES": "0,9"})
    assert "names GPU 9, which does not exist" in got["gpu_visible"]["message"]
    uuid = observation(nproc=1)
    ok = results({"v": uuid}, "v", extra_env={"CUDA_VISIBLE_DEVICES": "GPU-566e6f65"})
    assert ok["gpu_visible"]["status"] == "passed"
    cpu_torch = results({"v": observation(device_count=0)}, "v")["gpu_visible"]
    assert cpu_torch["status"] == "failed"
    assert (
        "torch.cuda.device_count() is 0 in /usr/bin/python3, 8 ranks planned"
        in (cpu_torch["message"])
    )


def test_dcgm() -> None:
    fail = {"level": 1, "results": parse.parse_dcgm_diag(text("gpu/dcgmi-diag-r1-fail.json"))}
    got = results({"d": observation(health(dcgm=fail))}, "d")["gpu_dcgm"]
    assert got["status"] == "failed"
    assert "d: all GPUs: Deployment/Persistence Mode Fail" in got["message"]
    assert "warning: d: all GPUs: Deployment/Environment Variables Warn" in got["message"]
    ok = {"level": 1, "results": parse.parse_dcgm_diag(text("gpu/dcgmi-diag-r1-pass.json"))}
    got = results({"d": observation(health(dcgm=ok))}, "d")["gpu_dcgm"]
    assert got["status"] == "passed" and "9 of 9 results Pass" in got["message"]
    absent = {"level": 1, "results": None, "reason": "dcgmi not found"}
    got = results({"d": observation(health(dcgm=absent))}, "d")["gpu_dcgm"]
    assert got["status"] == "skipped" and "dcgmi not found" in got["message"]


def test_skipped_with_the_reason() -> None:
    gloo = {**observation(), "backend": "gloo"}
    explicit = results({"g": gloo}, "g", requested_backend="gloo")  # nccl_backend: gloo, set
    assert {r["status"] for r in explicit.values()} == {"skipped"}
    assert "the backend is gloo" in explicit["gpu_memory"]["message"]
    off = results({"g": observation()}, "g", require_gpu=False)
    assert "nccl_require_gpu is false" in off["gpu_pcie"]["message"]
    unread = observation(health(None, query_reason="nvidia-smi -q failed (rc=15)"))
    got = results({"g": unread}, "g")["gpu_memory"]
    assert got["status"] == "skipped" and "nvidia-smi -q failed (rc=15)" in got["message"]
    off = results({"g": observation({})}, "g")["gpu_nvlink"]
    assert off["status"] == "skipped" and "nccl_gpu_health is false" in off["message"]
    nogpu = observation()
    nogpu["facts"]["gpus"], nogpu["facts"]["gpus_reason"] = [], "nvidia-smi not found on PATH"
    assert "nvidia-smi not found" in results({"g": nogpu}, "g")["gpu_modes"]["message"]


def test_gb10_spark_never_fails_on_what_it_does_not_report() -> None:
    obs = observation(
        health("gpu/gb10-q-partial.txt", topology=None, topology_reason="no GPU0", nvlink=[]),
        csv="nvidia-smi/gb10-spark.csv",
        nproc=1,
        device_count=1,
        rdma=(),
    )
    observations = {"spark-a": obs, "spark-b": copy.deepcopy(obs)}
    got = results(observations, "spark-a")
    assert "failed" not in {r["status"] for r in got.values()}, got
    assert got["gpu_memory"]["status"] == "passed"
    assert "ECC counters not reported" in got["gpu_memory"]["message"]
    # Variant made here: NVML's Gen1 x1 (Syllo/nvtop#426) beside a maximum of x16 on GB10.
    gpu = obs["facts"]["gpu_health"]["query"]["gpus"][0]
    gpu["pcie"].update(gen_current=1, width_current=1, gen_max=5, width_max=16)
    pcie = results(observations, "spark-a")["gpu_pcie"]
    assert pcie["status"] == "passed" and "NVLink-C2C: PCIe not judged" in pcie["message"]


def test_add_appends_to_every_host_and_keeps_dropped_hosts() -> None:
    base = {"a": [{"check": "gpu", "host": "a", "status": "passed"}], "b": None}
    out = checks.nccl_gpu_health_add(base, {"a": observation()}, {"require_gpu": True})
    assert out["b"] is None
    assert [r["check"] for r in out["a"]] == ["gpu", *checks.GPU_CHECKS]
    missing = checks.nccl_gpu_health_add({"c": []}, {"a": observation()}, {})
    assert {r["status"] for r in missing["c"]} == {"failed"}
