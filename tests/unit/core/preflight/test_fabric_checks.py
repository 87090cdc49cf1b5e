# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/preflight/fabric_checks.py: the fabric checks, on facts read from tests/fixtures/sysfs."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nccl_preflight.core.preflight import fabric_checks as fc
from nccl_preflight.node.fabric_choice import nccl_fabric_choice
from nccl_preflight.node.fabric_facts import read_gpudirect, read_rdma

SYSFS = Path(__file__).resolve().parents[3] / "fixtures" / "sysfs"
HOSTS = ["node1", "node2"]
MIB = 1024**2


def fabric(tree: str | None = None, gpudirect: str | None = None, memlock="unlimited") -> dict:
    rdma, reason = read_rdma(str(SYSFS / tree / "sys")) if tree else ([], "no RDMA device: none")
    gd_root = SYSFS / (gpudirect or "nowhere")
    return {
        "rdma": rdma,
        "rdma_reason": reason,
        "gpudirect": read_gpudirect(str(gd_root / "sys"), str(gd_root / "proc")),
        "limits": {
            "memlock_soft": memlock,
            "memlock_hard": memlock,
            "shm": {
                "path": "/dev/shm",
                "size_bytes": 64 * 1024 * MIB,
                "free_bytes": 60 * 1024 * MIB,
            },
            "ip_local_port_range": [32768, 60999],
        },
        "nccl_config": {"files": [], "env": {}, "effective": {}},
        "ssh_address": "",
    }


def observation(i: int, ifname: str = "enp1s0f1np1", gpus: int = 0, **fab) -> dict:
    address = f"10.100.216.{i + 1}"
    return {
        "facts": {
            "interfaces": {
                "lo": {"name": "lo", "state": "unknown", "ipv4": [{"address": "127.0.0.1"}]},
                ifname: {
                    "name": ifname,
                    "state": "up",
                    "ipv4": [{"address": address, "prefixlen": 24}],
                    "ipv6": [],
                    "rdma_devices": [],
                },
            },
            "gpus": [{"index": n, "name": "NVIDIA GB10"} for n in range(gpus)],
            "fabric": fabric(**fab),
        },
        "ifname": ifname,
        "address": address,
        "backend": "nccl" if gpus else "gloo",
    }


def results(observations: dict, host: str, **settings) -> dict[str, dict]:
    out = fc.nccl_fabric_results(observations, host, {"order": list(observations), **settings})
    assert [r["check"] for r in out] == list(fc.FABRIC_CHECKS)
    return {r["check"]: r for r in out}


def spark_pair(**changes) -> dict:
    obs = {
        h: observation(i + 1, tree="spark", gpudirect="spark", gpus=1) for i, h in enumerate(HOSTS)
    }
    # node1 is the one the Spark fixture was read on: its fabric address is in the RoCE v2 GID.
    obs["node1"]["address"] = "10.100.216.2"
    obs["node1"]["facts"]["interfaces"]["enp1s0f1np1"]["ipv4"][0]["address"] = "10.100.216.2"
    obs["node2"]["address"] = "10.100.216.2"
    for host, change in changes.items():
        change(obs[host])
    return obs


# ------------------------------------------------------------------------------------ rdma
def test_rdma_skipped_without_devices_with_the_reason():
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    r = results(obs, "node1")["rdma"]
    assert r["status"] == "skipped" and "no RDMA device" in r["message"]


def test_rdma_passes_on_spark_and_names_the_down_ports():
    r = results(spark_pair(), "node1")["rdma"]
    assert r["status"] == "passed", r
    assert "rocep1s0f1:1 Ethernet 200" in r["message"]
    assert "rocep1s0f0:1" in r["message"]  # down, not on the fabric


def test_rdma_fails_when_the_fabric_port_is_down():
    def down(o):
        port = next(d for d in o["facts"]["fabric"]["rdma"] if d["name"] == "rocep1s0f1")["ports"][
            0
        ]
        port["state"], port["phys_state"] = "DOWN", "Polling"

    r = results(spark_pair(node2=down), "node2")["rdma"]
    assert r["status"] == "failed"
    assert "rocep1s0f1:1 is DOWN/Polling (netdev enp1s0f1np1)" in r["message"]
    assert "ibstat rocep1s0f1 1" in r["hint"] and "on node2" in r["hint"]


def test_rdma_rate_lower_than_the_other_hosts_names_both_figures():
    obs = {
        "node1": observation(1, ifname="ib0", tree="ib-ndr"),
        "node2": observation(2, ifname="ib0", tree="ib-ndr"),
        "node3": observation(3, ifname="ib0", tree="ib-ndr-degraded"),
    }
    r = results(obs, "node3")["rdma"]
    assert r["status"] == "failed"
    assert "mlx5_5:1 runs at 200 Gb/s, the other hosts at 400 Gb/s" in r["message"]
    assert "(200 Gb/sec (4X HDR))" in r["message"]
    assert results(obs, "node1")["rdma"]["status"] == "passed"


def test_roce_fabric_address_must_be_in_a_v2_gid():
    obs = spark_pair()
    obs["node2"]["address"] = "10.100.216.3"
    r = results(obs, "node2")["rdma"]
    assert r["status"] == "failed"
    assert "no RoCE v2 GID carrying the fabric address 10.100.216.3" in r["message"]
    assert "3=10.100.216.2" in r["message"]


def test_roce_v1_gid_alone_does_not_carry_the_fabric_address():
    """A port whose fabric address is only in a RoCE v1 GID fails: NCCL's default GID type is
    v2, so a v1 GID for the same address is not enough (the Spark fixture has both types for
    10.100.216.2; here its v2 GIDs for it are gone, its v1 GIDs stay)."""

    def drop_v2_for_fabric_address(host_obs: dict) -> None:
        for device in host_obs["facts"]["fabric"]["rdma"]:
            for port in device["ports"]:
                port["gids"] = [
                    g
                    for g in port["gids"]
                    if not (g["type"] == "v2" and g["address"] == "10.100.216.2")
                ]

    obs = spark_pair(node2=drop_v2_for_fabric_address)
    v1 = [
        g
        for device in obs["node2"]["facts"]["fabric"]["rdma"]
        for port in device["ports"]
        for g in port["gids"]
        if g["type"] == "v1" and g["address"] == "10.100.216.2"
    ]
    assert v1, "the fixture must keep a v1 GID carrying the address for this test to mean much"
    r = results(obs, "node2")["rdma"]
    assert r["status"] == "failed"
    assert "no RoCE v2 GID carrying the fabric address 10.100.216.2" in r["message"]


# ------------------------------------------------------------------------------------ NCCL_IB_HCA
def test_ib_hca_unset_is_skipped():
    r = results(spark_pair(), "node1")["nccl_ib_hca"]
    assert r["status"] == "skipped" and "not set" in r["message"]


def test_ib_hca_names_a_missing_device_and_lists_the_present_ones():
    extra = {h: {"NCCL_IB_HCA": "mlx5_9"} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "failed"
    assert "mlx5_9 does not exist" in r["message"] and "from nccl_extra_env" in r["message"]
    assert "rocep1s0f1:1 (ACTIVE)" in r["message"] and "rocep1s0f0:1 (DOWN)" in r["message"]


def test_ib_hca_on_a_host_without_rdma_says_none():
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    extra = {h: {"NCCL_IB_HCA": "mlx5_9"} for h in HOSTS}
    r = results(obs, "node2", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "failed"
    assert "mlx5_9 does not exist" in r["message"] and "present: none" in r["message"]


def test_ib_hca_leaving_out_half_of_the_spark_port_warns():
    extra = {h: {"NCCL_IB_HCA": "=rocep1s0f1"} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "passed"
    assert "warning: active RDMA ports left out of it: roceP2p1s0f1:1" in r["message"]


def test_ib_hca_both_halves_and_prefix_match():
    extra = {h: {"NCCL_IB_HCA": "rocep1s0f1:1,roceP2p1s0f1:1"} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "passed" and "warning" not in r["message"]
    # prefix match: "roce" selects all four, the down ones are not a failure of the entry
    extra = {h: {"NCCL_IB_HCA": "roce"} for h in HOSTS}
    assert results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]["status"] == (
        "passed"
    )


def test_ib_hca_naming_a_down_device_fails():
    extra = {h: {"NCCL_IB_HCA": "=rocep1s0f0"} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "failed" and "rocep1s0f0 is not active (DOWN)" in r["message"]


def test_ib_hca_from_nccl_conf():
    def conf(o):
        o["facts"]["fabric"]["nccl_config"]["effective"]["NCCL_IB_HCA"] = {
            "value": "mlx5_0",
            "source": "/etc/nccl.conf",
        }

    r = results(spark_pair(node1=conf), "node1")["nccl_ib_hca"]
    assert r["status"] == "failed" and "(from /etc/nccl.conf)" in r["message"]


@pytest.mark.parametrize("value", ["mlx5_0::1", "mlx5 0", "mlx5_0,", "^"])
def test_ib_hca_bad_syntax(value):
    extra = {h: {"NCCL_IB_HCA": value} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "failed" and "is not valid" in r["message"]


def test_ib_hca_parse():
    assert fc.parse_ib_hca("^=mlx5_3:1,mlx5_4") == {
        "exclude": True,
        "exact": True,
        "entries": [{"name": "mlx5_3", "port": 1}, {"name": "mlx5_4", "port": None}],
    }


def test_ib_hca_excluding_every_active_port_fails():
    extra = {h: {"NCCL_IB_HCA": "^rocep1s0f1,roceP2p1s0f1"} for h in HOSTS}
    r = results(spark_pair(), "node1", extra_env_by_host=extra)["nccl_ib_hca"]
    assert r["status"] == "failed" and "excludes every active RDMA port" in r["message"]


# ------------------------------------------------------------------------------------ gpudirect
def test_gpudirect_dmabuf_on_spark_passes():
    r = results(spark_pair(), "node1")["gpudirect"]
    assert r["status"] == "passed" and "dma-buf" in r["message"]


def test_gpudirect_missing_names_the_module_to_load():
    obs = {
        h: observation(i + 1, ifname="ib0", tree="ib-ndr", gpudirect="gpudirect-none", gpus=8)
        for i, h in enumerate(HOSTS)
    }
    r = results(obs, "node2")["gpudirect"]
    assert r["status"] == "failed"
    assert "neither nvidia_peermem nor nv_peer_mem" in r["message"]
    assert "modprobe nvidia-peermem" in r["hint"]


def test_gpudirect_peermem():
    obs = {
        h: observation(i + 1, ifname="ib0", tree="ib-ndr", gpudirect="gpudirect-peermem", gpus=8)
        for i, h in enumerate(HOSTS)
    }
    r = results(obs, "node1")["gpudirect"]
    assert r["status"] == "passed" and "nvidia_peermem is loaded" in r["message"]


def test_gpudirect_skipped_without_gpu_or_rdma():
    obs = {h: observation(i + 1, gpus=1) for i, h in enumerate(HOSTS)}
    assert results(obs, "node1")["gpudirect"]["status"] == "skipped"
    obs = {h: observation(i + 1, tree="spark") for i, h in enumerate(HOSTS)}
    assert "no GPU" in results(obs, "node1")["gpudirect"]["message"]


# ------------------------------------------------------------------------------------ limits
def test_memlock_must_be_unlimited_with_rdma():
    obs = spark_pair()
    obs["node2"]["facts"]["fabric"]["limits"]["memlock_soft"] = 8 * MIB
    r = results(obs, "node2")["limits"]
    assert r["status"] == "failed"
    assert "memlock (ulimit -l) is 8 MiB, RDMA needs unlimited" in r["message"]
    assert "troubleshooting" in r["message"] and "limits.conf" in r["hint"]


def test_memlock_lower_than_the_others_is_the_odd_one_out():
    obs = {h: observation(i + 1, memlock=8 * MIB) for i, h in enumerate(["a", "b", "c"])}
    obs["b"]["facts"]["fabric"]["limits"]["memlock_soft"] = 64 * 1024
    r = results(obs, "b")["limits"]
    assert r["status"] == "failed"
    assert "b: memlock (ulimit -l) is 64 KiB, lower than the other hosts' 8 MiB" in r["message"]
    assert results(obs, "a")["limits"]["status"] == "passed"


def test_shm_too_small_fails_with_nccl_and_warns_with_gloo():
    obs = {h: observation(i + 1, gpus=1) for i, h in enumerate(HOSTS)}
    obs["node1"]["facts"]["fabric"]["limits"]["shm"] = {
        "path": "/dev/shm",
        "size_bytes": 64 * MIB,
        "free_bytes": 64 * MIB,
    }
    r = results(obs, "node1")["limits"]
    assert r["status"] == "failed" and "/dev/shm has 64 MiB free of 64 MiB" in r["message"]
    assert "--shm-size" in r["hint"]
    gloo = copy.deepcopy(obs)
    gloo["node1"]["backend"] = "gloo"
    r = results(gloo, "node1")["limits"]
    assert r["status"] == "passed" and "warning: /dev/shm has 64 MiB" in r["message"]


def test_limits_passed_lists_what_it_saw():
    obs = {h: observation(i + 1, memlock=8 * MIB) for i, h in enumerate(HOSTS)}
    r = results(obs, "node1")["limits"]
    assert r["status"] == "passed"
    assert r["message"] == "node1: memlock 8 MiB, /dev/shm 60 GiB free, ephemeral ports 32768-60999"


# ------------------------------------------------------------------------------------ nccl_config
def _conf(name: str, value: str, source: str = "/etc/nccl.conf"):
    def change(o):
        o["facts"]["fabric"]["nccl_config"]["effective"][name] = {"value": value, "source": source}

    return change


def test_ib_disable_in_nccl_conf_fails_on_a_host_with_rdma():
    obs = spark_pair(node1=_conf("NCCL_IB_DISABLE", "1"), node2=_conf("NCCL_IB_DISABLE", "1"))
    r = results(obs, "node1")["nccl_config"]
    assert r["status"] == "failed"
    assert "NCCL_IB_DISABLE=1 from /etc/nccl.conf: NCCL falls back to TCP sockets" in r["message"]
    assert "grep NCCL_ /etc/nccl.conf" in r["hint"]


def test_the_inventory_setting_the_same_variable_wins():
    obs = spark_pair(node1=_conf("NCCL_IB_DISABLE", "1"), node2=_conf("NCCL_IB_DISABLE", "1"))
    extra = {h: {"NCCL_IB_DISABLE": "1"} for h in HOSTS}
    r = results(obs, "node1", extra_env_by_host=extra)["nccl_config"]
    assert r["status"] == "passed"


def test_net_socket_from_the_environment_fails_with_rdma():
    obs = spark_pair(node1=_conf("NCCL_NET", "Socket", "environment"))
    r = results(obs, "node1")["nccl_config"]
    assert r["status"] == "failed" and "NCCL_NET=Socket from environment" in r["message"]


def test_p2p_disable_fails_with_several_gpus_only():
    obs = {h: observation(i + 1, gpus=8) for i, h in enumerate(HOSTS)}
    for o in obs.values():
        _conf("NCCL_P2P_DISABLE", "1")(o)
    assert results(obs, "node1")["nccl_config"]["status"] == "failed"
    obs = {h: observation(i + 1, gpus=1) for i, h in enumerate(HOSTS)}
    for o in obs.values():
        _conf("NCCL_P2P_DISABLE", "1")(o)
    r = results(obs, "node1")["nccl_config"]
    assert r["status"] == "passed" and "NCCL_P2P_DISABLE=1 (/etc/nccl.conf)" in r["message"]


def test_an_override_on_one_host_only_is_named_on_that_host():
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    _conf("NCCL_IB_DISABLE", "1")(obs["node2"])
    r2 = results(obs, "node2")["nccl_config"]
    assert r2["status"] == "failed"
    assert (
        "NCCL_IB_DISABLE=1 from /etc/nccl.conf differs from the other hosts (unset)"
        in (r2["message"])
    )
    r1 = results(obs, "node1")["nccl_config"]
    assert r1["status"] == "passed" and "NCCL_IB_DISABLE" not in r1["message"]


# ------------------------------------------------------------------------------------ fabric
def test_fabric_warns_when_the_ssh_network_carries_nccl():
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    o = obs["node1"]
    o["facts"]["fabric"]["ssh_address"] = o["address"]
    o["facts"]["interfaces"]["ib0"] = {
        "name": "ib0",
        "state": "up",
        "ipv4": [{"address": "192.168.50.1", "prefixlen": 24}],
        "ipv6": [{"address": "fe80::1", "prefixlen": 64}],
        "rdma_devices": ["mlx5_0"],
    }
    r = results(obs, "node1")["fabric"]
    assert r["status"] == "passed"
    assert "warning: enp1s0f1np1 is the network Ansible reaches node1 on" in r["message"]
    assert "ib0 192.168.50.1" in r["message"]
    assert "warning: enp1s0f1np1 has no RDMA device, but ib0 has one" in r["message"]
    quiet = results(obs, "node2")["fabric"]
    assert "warning" not in quiet["message"]


def test_fabric_choice_prefers_the_rdma_netdev_with_an_address():
    facts = {
        "interfaces": {
            "eno1": {"state": "up", "ipv4": [{"address": "10.0.0.5"}], "rdma_devices": []},
            "enp1s0f1np1": {
                "state": "up",
                "ipv4": [{"address": "10.100.216.2"}],
                "rdma_devices": ["rocep1s0f1"],
            },
            "enP2p1s0f1np1": {
                "state": "up",
                "ipv4": [{"address": "169.254.3.1"}],
                "rdma_devices": ["roceP2p1s0f1"],
            },
        },
        "route": {"destination": "10.0.0.1", "interface": "eno1", "source": "10.0.0.5"},
    }
    assert nccl_fabric_choice(facts) == {
        "ifname": "enp1s0f1np1",
        "address": "10.100.216.2",
        "reason": "",
    }
    # explicit settings still win
    assert nccl_fabric_choice(facts, "eno1")["ifname"] == "eno1"


# ------------------------------------------------------------------------------------ judge
def test_judge_appends_to_every_host_and_keeps_absent_ones():
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    judged = fc.nccl_fabric_judge(
        {"node1": [{"check": "interface"}], "node2": None}, obs, {"order": HOSTS}
    )
    assert judged["node2"] is None
    assert [r["check"] for r in judged["node1"]] == ["interface", *fc.FABRIC_CHECKS]


def test_a_host_without_observation_fails_every_fabric_check():
    out = fc.nccl_fabric_results({"node1": observation(1)}, "node2", {})
    assert {r["status"] for r in out} == {"failed"} and len(out) == len(fc.FABRIC_CHECKS)


def test_expect_net():
    spark = spark_pair()["node1"]["facts"]
    assert fc.nccl_expect_net(spark, "enp1s0f1np1")["network"] == "ib"
    plain = observation(1)["facts"]
    got = fc.nccl_expect_net(plain, "enp1s0f1np1")
    assert got["network"] == "socket" and "no RDMA device" in got["reason"]
    assert fc.nccl_expect_net(plain, "x", "any")["network"] == "any"


def test_what_nccl_env_sets_itself_is_no_override():
    # per-host NCCL_SOCKET_IFNAME in nccl.conf (a common recipe) never reaches the ranks
    obs = {h: observation(i + 1) for i, h in enumerate(HOSTS)}
    _conf("NCCL_SOCKET_IFNAME", "eth0")(obs["node1"])
    _conf("NCCL_DEBUG", "WARN", "environment")(obs["node1"])
    r = results(obs, "node1")["nccl_config"]
    assert r["status"] == "passed"
    assert r["message"] == "node1: no NCCL setting from nccl.conf or the environment"


def test_nccl_expect_net_is_validated_with_the_other_inputs():
    from nccl_preflight.core.inputs import nccl_input_problems

    good = {
        "nccl_master_port": 29500,
        "nccl_backend": "auto",
        "nccl_nproc_per_node": 1,
        "nccl_run_timeout": 60,
        "nccl_check_args": [],
        "nccl_extra_env": {},
    }
    assert nccl_input_problems({**good, "nccl_expect_net": "ib"}) == []
    assert nccl_input_problems({**good, "nccl_expect_net": "IB"}) == [
        "nccl_expect_net is 'IB', not one of auto, ib, socket, any"
    ]
