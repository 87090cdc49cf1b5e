# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/parse.py on recorded real outputs (tests/fixtures/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_preflight.node import parse as p
from tests.builders.facts import fixture

# --- nvidia-smi ------------------------------------------------------------------------------


def test_h100_node_has_eight_identical_gpus_in_order() -> None:
    gpus = p.parse_nvidia_smi_csv(fixture("nvidia-smi/h100x8.csv"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g["driver_version"] for g in gpus} == {"550.90.07"}
    assert {g["memory_total_mib"] for g in gpus} == {81559}
    assert len({g["uuid"] for g in gpus}) == 8
    assert gpus[0]["pci_bus_id"] == "00000000:19:00.0"
    assert gpus[7]["pci_bus_id"] == "00000000:DB:00.0"
    assert set(gpus[0]) == {
        "index",
        "name",
        "driver_version",
        "memory_total_mib",
        "uuid",
        "pci_bus_id",
    }


def test_gb10_spark_reports_memory_as_not_available() -> None:
    (gpu,) = p.parse_nvidia_smi_csv(fixture("nvidia-smi/gb10-spark.csv"))
    assert gpu == {
        "index": 0,
        "name": "NVIDIA GB10",
        "driver_version": "580.126.09",
        "memory_total_mib": None,
        "uuid": "GPU-2dee1e25-b3b5-007e-2b55-79f2d0f2ebe5",
        "pci_bus_id": "0000000F:01:00.0",
    }


def test_seven_of_eight_gpus_is_visible_in_the_parse() -> None:
    gpus = p.parse_nvidia_smi_csv(fixture("nvidia-smi/h100x7-missing-one.csv"))
    assert len(gpus) == 7
    assert "00000000:BB:00.0" not in {g["pci_bus_id"] for g in gpus}
    assert [g["index"] for g in gpus] == list(range(7))


def test_mixed_models_are_visible_in_the_parse() -> None:
    gpus = p.parse_nvidia_smi_csv(fixture("nvidia-smi/h100x8-mixed-model.csv"))
    names = [g["name"] for g in gpus]
    assert sorted(set(names)) == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]
    assert names.index("NVIDIA H100 PCIe") == 3


def test_nvidia_smi_variants_units_and_not_supported_values() -> None:
    text = "\n0, NVIDIA A100-SXM4-80GB, [Not Supported], 81920 MiB, [N/A], N/A\n\n"
    (gpu,) = p.parse_nvidia_smi_csv(text)
    assert gpu["memory_total_mib"] == 81920
    assert gpu["driver_version"] is None
    assert gpu["uuid"] is None
    assert gpu["pci_bus_id"] is None
    assert p.parse_nvidia_smi_csv("") == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (fixture("nvidia-smi/no-devices.txt"), ["line 1 has 1 fields", "expected 6"]),
        ("0, NVIDIA GB10, 580.126.09, [N/A], GPU-x\n", ["line 1 has 5 fields"]),
        ("0, a, 1, 2, u, b\nx, a, 1, 2, u, b\n", ["line 2", "index 'x'"]),
        ("0, a, 1, lots, u, b\n", ["line 1", "memory.total 'lots'"]),
    ],
)
def test_nvidia_smi_garbage_raises_with_the_line(text: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        p.parse_nvidia_smi_csv(text)
    for word in words:
        assert word in str(info.value)


# --- ip -j -------------------------------------------------------------------------------------


def test_ip_addr_fixture_interfaces() -> None:
    interfaces = p.parse_ip_addr(fixture("ip/addr.json"))
    assert list(interfaces) == [
        "lo",
        "enp1s0f0np0",
        "br-mgmt",
        "mgmt0-br",
        "mgmt0",
        "cable1",
        "enp1s0f1np1",
    ]
    lo = interfaces["lo"]
    assert lo["state"] == "unknown"
    assert lo["mtu"] == 65536
    assert lo["kind"] is None
    assert lo["ipv4"] == [{"address": "127.0.0.1", "prefixlen": 8}]
    assert lo["ipv6"] == [{"address": "::1", "prefixlen": 128, "scope": "host"}]

    fabric = interfaces["enp1s0f0np0"]
    assert fabric["name"] == "enp1s0f0np0"
    assert (fabric["state"], fabric["mtu"], fabric["kind"]) == ("up", 9000, "veth")
    assert fabric["ipv4"] == [{"address": "192.168.100.10", "prefixlen": 24}]
    assert [(a["address"], a["scope"]) for a in fabric["ipv6"]] == [
        ("fd00:100::10", "global"),
        ("fe80::f406:4eff:fea4:2e5a", "link"),
    ]
    assert fabric["speed_mbps"] is None
    assert fabric["rdma_devices"] == []

    assert interfaces["br-mgmt"]["kind"] == "bridge"
    assert interfaces["br-mgmt"]["ipv4"] == [{"address": "10.10.0.10", "prefixlen": 24}]
    assert interfaces["mgmt0"]["ipv4"] == []
    assert interfaces["cable1"]["state"] == "down"
    assert interfaces["enp1s0f1np1"]["state"] == "lowerlayerdown"


def test_ip_addr_without_details_has_no_kind() -> None:
    text = json.dumps(
        [{"ifname": "eth0", "operstate": "UP", "mtu": 1500, "addr_info": [{"family": "inet"}]}]
    )
    assert p.parse_ip_addr(text)["eth0"] == {
        "name": "eth0",
        "state": "up",
        "mtu": 1500,
        "speed_mbps": None,
        "kind": None,
        "ipv4": [],
        "ipv6": [],
        "rdma_devices": [],
    }


@pytest.mark.parametrize("text", ["", 'Object "addr" is unknown', '{"ifname": "lo"}'])
def test_ip_addr_not_a_json_list_raises(text: str) -> None:
    with pytest.raises(ValueError, match="ip -j -d addr show"):
        p.parse_ip_addr(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("route-get.json", ("192.168.100.11", "enp1s0f0np0", "192.168.100.10")),
        ("route-get-ipv6.json", ("fd00:100::11", "enp1s0f0np0", "fd00:100::10")),
        ("route-get-local.json", ("127.0.0.1", "lo", "127.0.0.1")),
    ],
)
def test_route_get_fixtures(name: str, expected: tuple[str, str, str]) -> None:
    route = p.parse_route_get(fixture(f"ip/{name}"))
    assert (route["destination"], route["interface"], route["source"]) == expected


def test_route_get_unreachable_prints_nothing_to_parse() -> None:
    assert fixture("ip/route-get-unreachable.rc").strip() == "2"
    assert "Network is unreachable" in fixture("ip/route-get-unreachable.stderr")
    with pytest.raises(ValueError):
        p.parse_route_get(fixture("ip/route-get-unreachable.stdout"))
    with pytest.raises(ValueError, match="no route with a device"):
        p.parse_route_get("[]")


# --- sysfs / procfs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100000\n", 100000), ("25000", 25000), ("-1\n", None), ("0", None), ("", None), ("x", None)],
)
def test_parse_speed(text: str, expected: int | None) -> None:
    assert p.parse_speed(text) == expected


def test_parse_port_range() -> None:
    assert p.parse_port_range("32768\t60999\n") == [32768, 60999]
    for bad in ("", "32768", "a b", "1 2 3"):
        with pytest.raises(ValueError, match="ip_local_port_range"):
            p.parse_port_range(bad)


def test_read_port_range_from_this_machine() -> None:
    low, high = p.read_port_range("/proc")
    assert 0 < low <= high <= 65535


def write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_read_speed_from_a_sysfs_tree(tmp_path: Path) -> None:
    write(tmp_path / "class/net/enp1s0f0np0/speed", "200000\n")
    write(tmp_path / "class/net/veth0/speed", "-1\n")
    assert p.read_speed_mbps("enp1s0f0np0", str(tmp_path)) == 200000
    assert p.read_speed_mbps("veth0", str(tmp_path)) is None
    assert p.read_speed_mbps("absent0", str(tmp_path)) is None


def test_find_rdma_devices_reads_all_three_sysfs_places(tmp_path: Path) -> None:
    ib = tmp_path / "class/infiniband"
    (ib / "mlx5_0/device/net/enp1s0f0np0").mkdir(parents=True)
    write(ib / "mlx5_0/ports/1/gid_attrs/ndevs/0", "enp1s0f0np0\n")
    write(ib / "mlx5_0/ports/1/gid_attrs/ndevs/1", "bond0\n")
    write(ib / "mlx5_0/ports/1/gid_attrs/ndevs/2", "")
    (tmp_path / "class/net/enp1s0f1np1/device/infiniband/rocep1s0f1").mkdir(parents=True)
    (tmp_path / "class/net/eth0").mkdir(parents=True)
    assert p.find_rdma_devices(str(tmp_path)) == {
        "enp1s0f0np0": ["mlx5_0"],
        "bond0": ["mlx5_0"],
        "enp1s0f1np1": ["rocep1s0f1"],
    }
    assert p.find_rdma_devices(str(tmp_path / "nothing")) == {}


def test_unique_addresses_keeps_order() -> None:
    infos = [
        (2, 1, 6, "", ("127.0.1.1", 0)),
        (10, 1, 6, "", ("::1", 0, 0, 0)),
        (2, 1, 6, "", ("127.0.1.1", 0)),
    ]
    assert p.unique_addresses(infos) == ["127.0.1.1", "::1"]


# --- python probe ----------------------------------------------------------------------------


def test_python_probe_runs_on_this_python_with_torch() -> None:
    torch = pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-c", p.PYTHON_PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    facts = p.parse_python_probe(done.stdout)
    assert facts["executable"] == sys.executable
    assert facts["version"] == ".".join(str(v) for v in sys.version_info[:3])
    assert facts["torch_version"] == torch.__version__
    assert facts["cuda_available"] is torch.cuda.is_available()
    assert facts["cuda_version"] == torch.version.cuda
    assert facts["npu_available"] is False


def test_python_probe_without_torch_says_why() -> None:
    # -S: no site-packages, so torch cannot be imported
    done = subprocess.run(
        [sys.executable, "-S", "-c", p.PYTHON_PROBE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    facts = p.parse_python_probe(done.stdout)
    assert facts["torch_version"] is None
    assert facts["device_count"] == 0
    assert facts["reason"].startswith("torch is not importable: ModuleNotFoundError")


def test_parse_python_probe_skips_noise_and_checks_keys() -> None:
    good = json.dumps(dict.fromkeys(p.PYTHON_KEYS, None))
    assert p.parse_python_probe(f"warning: something\n{good}\n")["reason"] is None
    with pytest.raises(ValueError, match="lacks"):
        p.parse_python_probe('{"executable": "/x"}')
    with pytest.raises(ValueError, match="no JSON object"):
        p.parse_python_probe("Segmentation fault\n")


def test_empty_python_facts_has_every_key() -> None:
    facts = p.empty_python_facts("python '/nope' not found", "/nope")
    assert tuple(facts) == p.PYTHON_KEYS
    assert facts["reason"] == "python '/nope' not found"
    assert facts["executable"] == "/nope"
    assert facts["device_count"] == 0
