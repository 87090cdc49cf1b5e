# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/fabric_facts.py on the sysfs trees of tests/fixtures/sysfs (see
README)."""

from __future__ import annotations

import resource
from pathlib import Path

from nccl_preflight.node.fabric_facts import (
    gather_fabric,
    gid_address,
    gid_type,
    parse_nccl_conf,
    read_gpudirect,
    read_limits,
    read_nccl_config,
    read_rdma,
    ssh_address,
)

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def tree(name: str) -> str:
    return str(SYSFS / name / "sys")


def test_roce_port_gids_types_addresses_and_netdev():
    devices, reason = read_rdma(tree("roce-cx6"))
    assert reason == ""
    [device] = devices
    assert device["name"] == "mlx5_0" and device["node_type"] == "CA"
    [port] = device["ports"]
    assert (port["state"], port["phys_state"], port["link_layer"]) == (
        "ACTIVE",
        "LinkUp",
        "Ethernet",
    )
    assert port["rate_gbps"] == 100.0
    assert port["netdevs"] == ["ens1f0"]
    assert [(g["index"], g["type"], g["address"]) for g in port["gids"]] == [
        (0, "v1", "fe80::e42:a1ff:fe5d:4db8"),
        (1, "v2", "fe80::e42:a1ff:fe5d:4db8"),
        (2, "v1", "fe80::1186:a6b1:3f0b:c441"),
        (3, "v2", "fe80::1186:a6b1:3f0b:c441"),
        (4, "v1", "172.19.0.60"),
        (5, "v2", "172.19.0.60"),
    ]
    # the empty slot (index 6, all zeros) is not a GID
    assert all(g["netdev"] == "ens1f0" for g in port["gids"])


def test_infiniband_ports_active_and_down():
    devices, _ = read_rdma(tree("ib-ndr"))
    ports = {d["name"]: d["ports"][0] for d in devices}
    assert ports["mlx5_5"]["state"] == "ACTIVE" and ports["mlx5_5"]["rate_gbps"] == 400.0
    assert ports["mlx5_5"]["link_layer"] == "InfiniBand"
    assert ports["mlx5_5"]["gids"][0]["address"] == "fe80::9c63:c003:55:48ae"
    assert ports["mlx5_0"]["state"] == "DOWN"
    assert ports["mlx5_0"]["netdevs"] == []


def test_spark_four_devices_two_active():
    devices, _ = read_rdma(tree("spark"))
    active = [d["name"] for d in devices if d["ports"][0]["state"] == "ACTIVE"]
    assert sorted(active) == ["roceP2p1s0f1", "rocep1s0f1"]
    port = next(d for d in devices if d["name"] == "rocep1s0f1")["ports"][0]
    v2 = [g["address"] for g in port["gids"] if g["type"] == "v2"]
    assert "10.100.216.2" in v2


def test_no_rdma_says_why(tmp_path):
    devices, reason = read_rdma(str(tmp_path))
    assert devices == [] and "does not exist" in reason


def test_gpudirect_peermem_loaded():
    root = SYSFS / "gpudirect-peermem"
    gd = read_gpudirect(str(root / "sys"), str(root / "proc"))
    assert gd["peermem"] == "nvidia_peermem" and gd["nvidia_loaded"] is True
    # proprietary module: no dma-buf, peermem is the way
    assert gd["dmabuf"] is False and "proprietary" in gd["dmabuf_reason"]


def test_gpudirect_dmabuf_on_spark():
    root = SYSFS / "spark"
    gd = read_gpudirect(str(root / "sys"), str(root / "proc"))
    assert gd["peermem"] is None
    assert gd["dmabuf"] is True and gd["driver_version"] == "580.126.09"


def test_gpudirect_neither():
    root = SYSFS / "gpudirect-none"
    gd = read_gpudirect(str(root / "sys"), str(root / "proc"))
    assert gd["peermem"] is None and gd["dmabuf"] is False
    assert "older than 5.12" in gd["dmabuf_reason"]


def test_gpudirect_without_driver(tmp_path):
    gd = read_gpudirect(str(tmp_path), str(tmp_path))
    assert gd["nvidia_loaded"] is False and gd["dmabuf"] is None


def test_limits_are_this_process_limits(tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys" / "net" / "ipv4").mkdir(parents=True)
    (proc / "sys" / "net" / "ipv4" / "ip_local_port_range").write_text("32768\t60999\n")
    limits = read_limits(str(proc), str(tmp_path))
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert limits["memlock_soft"] == ("unlimited" if soft == resource.RLIM_INFINITY else soft)
    assert limits["ip_local_port_range"] == [32768, 60999]
    assert limits["shm"]["size_bytes"] > 0 and limits["shm"]["reason"] == ""
    missing = read_limits(str(proc), str(tmp_path / "nope"))
    assert missing["shm"]["size_bytes"] is None and "cannot read" in missing["shm"]["reason"]


def test_nccl_conf_parsed_as_nccl_does():
    text = (
        "# comment\nNCCL_IB_DISABLE=1\nNCCL_IB_HCA=mlx5_0:1,mlx5_1\nNCCL_IB_DISABLE=0\nnoequals\n"
    )
    assert parse_nccl_conf(text) == {"NCCL_IB_DISABLE": "1", "NCCL_IB_HCA": "mlx5_0:1,mlx5_1"}


def test_nccl_config_precedence_environment_then_user_then_etc(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "nccl.conf").write_text("NCCL_IB_DISABLE=1\nNCCL_NET=Socket\nNCCL_DEBUG=WARN\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_NET=IB\n")
    cfg = read_nccl_config(str(etc), environ={"HOME": str(home), "NCCL_DEBUG": "INFO"})
    eff = cfg["effective"]
    assert eff["NCCL_DEBUG"] == {"value": "INFO", "source": "environment"}
    assert eff["NCCL_NET"] == {"value": "IB", "source": str(home / ".nccl.conf")}
    assert eff["NCCL_IB_DISABLE"] == {"value": "1", "source": str(etc / "nccl.conf")}
    assert [f["path"] for f in cfg["files"]] == [str(home / ".nccl.conf"), str(etc / "nccl.conf")]
    assert cfg["env"] == {"NCCL_DEBUG": "INFO"}


def test_nccl_conf_file_variable_replaces_the_user_file(tmp_path):
    conf = tmp_path / "site.conf"
    conf.write_text("NCCL_P2P_DISABLE=1\n")
    cfg = read_nccl_config(
        str(tmp_path), environ={"HOME": "/nonexistent", "NCCL_CONF_FILE": str(conf)}
    )
    assert cfg["files"][0]["path"] == str(conf)
    assert cfg["effective"]["NCCL_P2P_DISABLE"]["source"] == str(conf)


def test_gid_helpers():
    assert gid_address("0000:0000:0000:0000:0000:ffff:0a64:d802") == "10.100.216.2"
    assert gid_address("not a gid") is None
    assert gid_type("RoCE v2") == "v2" and gid_type("IB/RoCE v1") == "v1"


def test_ssh_address():
    assert ssh_address({"SSH_CONNECTION": "10.0.0.1 50000 10.0.0.2 22"}) == "10.0.0.2"
    assert ssh_address({}) == ""


def test_gather_fabric_keys(tmp_path):
    root = SYSFS / "spark"
    fabric = gather_fabric(str(root / "sys"), str(root / "proc"), str(tmp_path), str(tmp_path), {})
    assert set(fabric) == {
        "rdma",
        "rdma_reason",
        "gpudirect",
        "limits",
        "nccl_config",
        "ssh_address",
    }
    assert len(fabric["rdma"]) == 4


def test_an_unreadable_part_does_not_fail_the_host(tmp_path):
    bad = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    (bad / "gids").mkdir(parents=True)
    (bad / "gids" / "0").write_text("fe80:0000:0000:0000:0000:0000:0000:0001\n")
    (bad / "gids" / "notanindex").write_text("x\n")
    fabric = gather_fabric(str(tmp_path / "sys"), str(tmp_path), str(tmp_path), str(tmp_path), {})
    [port] = fabric["rdma"][0]["ports"]
    assert [g["index"] for g in port["gids"]] == [0] and port["state"] is None
    fabric = gather_fabric(str(tmp_path / "sys"), str(tmp_path), str(tmp_path), str(tmp_path), None)
    assert set(fabric["limits"]) >= {"memlock_soft", "shm"}
