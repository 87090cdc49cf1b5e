# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""core/preflight/host_checks.py: the verdict of every check from per-host observations.

GPU lists come from the recorded nvidia-smi fixtures through src/nccl_preflight/node/parse.py, as
library/nccl_facts.py would report them.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from ansible.module_utils.nccl_preflight.node.parse import parse_nvidia_smi_csv

from nccl_preflight.core.preflight import host_checks as pf
from nccl_preflight.core.preflight.judge import judge_node
from tests.builders.preflight import HOSTS, cluster, observation

NVSMI = Path(__file__).resolve().parents[3] / "fixtures" / "nvidia-smi"


def gpus(name: str) -> list[dict]:
    return parse_nvidia_smi_csv((NVSMI / name).read_text(encoding="utf-8"))


# nccl_backend: gloo set (the observations' backend): a CPU cluster, its GPU checks skipped.
SETTINGS = {"master": "node1", "order": HOSTS, "require_gpu": True, "requested_backend": "gloo"}


def verdicts(observations: dict, host: str, **settings) -> dict[str, dict]:
    results = pf.nccl_preflight_results(observations, host, {**SETTINGS, **settings})
    assert [r["check"] for r in results] == list(pf.CHECKS)
    assert all(
        r["host"] == host and r["status"] in ("passed", "failed", "skipped") for r in results
    )
    return {r["check"]: r for r in results}


def failed(observations: dict, **settings) -> set[tuple[str, str]]:
    return {
        (h, c)
        for h in HOSTS
        for c, r in verdicts(observations, h, **settings).items()
        if r["status"] == "failed"
    }


def with_gpus(obs: dict, fixture: str, cuda: bool = True) -> dict:
    obs = copy.deepcopy(obs)
    obs["backend"] = "nccl"
    obs["facts"]["gpus"] = gpus(fixture)
    obs["facts"]["gpus_reason"] = ""
    obs["facts"]["python"].update(
        cuda_available=cuda,
        cuda_version="12.4",
        nccl_version="2.21.5",
        device_count=len(gpus(fixture)),
    )
    return obs


def test_healthy_cluster_passes_and_skips_only_what_does_not_apply() -> None:
    obs = cluster()
    assert failed(obs) == set()
    v = verdicts(obs, "node2")
    assert v["gpu"]["status"] == "skipped" and "gloo" in v["gpu"]["message"]
    assert v["master_port_free"]["status"] == "skipped"  # only the master holds MASTER_PORT
    assert v["clock"]["status"] == "skipped"
    assert "speed 100000 Mb/s" in v["interface"]["message"]


def test_missing_interface_lists_the_ones_that_exist() -> None:
    bad = observation(3, ifname="ib0", address="")
    v = verdicts(cluster(node3=bad), "node3")
    assert v["interface"]["status"] == "failed"
    assert v["interface"]["message"] == (
        "node3: interface ib0 does not exist; interfaces present: enp1s0f0np0, lo"
    )
    assert (
        "ip link show" in v["interface"]["hint"] and "nccl_socket_ifname" in v["interface"]["hint"]
    )
    assert v["mtu"]["status"] == "skipped"


@pytest.mark.parametrize("name", ["^docker0,lo", "=enp1s0f0np0"])
def test_gloo_gets_concrete_interface_names_only(name: str) -> None:
    v = verdicts(cluster(node2=observation(2, ifname=name)), "node2")
    assert v["interface"]["status"] == "failed"
    assert "GLOO_SOCKET_IFNAME" in v["interface"]["message"]


def test_down_interface_and_missing_address_fail_and_virtual_names_only_warn() -> None:
    down = observation(2)
    down["facts"]["interfaces"]["enp1s0f0np0"]["state"] = "down"
    assert "is down" in verdicts(cluster(node2=down), "node2")["interface"]["message"]
    noaddr = observation(2, address="192.168.1.2")
    assert (
        "carries no address of the fabric"
        in verdicts(cluster(node2=noaddr), "node2")["interface"]["message"]
    )
    veth = observation(2)
    veth["facts"]["interfaces"]["veth1234"] = veth["facts"]["interfaces"].pop("enp1s0f0np0")
    veth["ifname"] = "veth1234"
    v = verdicts(cluster(node2=veth), "node2")["interface"]
    assert v["status"] == "passed" and "warning: veth1234 looks like a container" in v["message"]


def test_mtu_odd_host_is_named_with_the_table() -> None:
    odd = observation(3)
    odd["facts"]["interfaces"]["enp1s0f0np0"]["mtu"] = 1500
    obs = cluster(node3=odd)
    assert failed(obs) == {("node3", "mtu")}
    msg = verdicts(obs, "node3")["mtu"]
    assert msg["message"].startswith(
        "node3: MTU 1500 on enp1s0f0np0 differs from the other hosts (9000)"
    )
    assert "  node3  1500" in msg["message"] and "  node1  9000" in msg["message"]
    assert "ip link set dev enp1s0f0np0 mtu 9000" in msg["hint"]


def test_mtu_tie_between_two_hosts_blames_the_one_that_differs_from_the_master() -> None:
    two = {"node1": observation(1), "node2": observation(2)}
    two["node2"]["facts"]["interfaces"]["enp1s0f0np0"]["mtu"] = 1400
    order = {"order": ["node1", "node2"]}
    assert verdicts(two, "node1", **order)["mtu"]["status"] == "passed"
    assert verdicts(two, "node2", **order)["mtu"]["status"] == "failed"


def test_hostname_on_127_0_1_1_fails_with_the_hosts_fix() -> None:
    bad = observation(4)
    bad["facts"]["hostname_addresses"] = ["127.0.1.1"]
    v = verdicts(cluster(node4=bad), "node4")["hostname"]
    assert v["status"] == "failed" and "node4" in v["message"] and "127.0.1.1" in v["message"]
    assert "/etc/hosts" in v["hint"] and "10.0.0.14" in v["hint"]


def test_hostname_on_loopback_passes_when_the_fabric_is_loopback_too() -> None:
    alone = observation(1, address="127.0.0.1")
    alone["facts"]["hostname_addresses"] = ["127.0.1.1"]
    v = verdicts({"node1": alone}, "node1", order=["node1"])["hostname"]
    assert v["status"] == "passed" and "single-machine" in v["message"]


def test_hostname_on_loopback_only_warns_in_a_run_of_one_host_on_a_real_fabric() -> None:
    """One GPU box validating itself over eth0 (the lent H100, tests/fixtures/validate_gpu):
    its peers are itself. With a second host, or judged alone for a cluster (node-check), it
    fails."""
    alone = observation(1)
    alone["facts"]["hostname"] = "vm"
    alone["facts"]["hostname_addresses"] = ["127.0.1.1"]
    v = verdicts({"node1": alone}, "node1", order=["node1"])["hostname"]
    assert v["status"] == "passed" and v["message"].startswith("node1: warning: its hostname vm")
    assert "run on this host alone" in v["message"] and "10.0.0.11" in v["hint"]
    two = {"node1": alone, "node2": observation(2)}
    assert verdicts(two, "node1", order=["node1", "node2"])["hostname"]["status"] == "failed"
    node_check = judge_node("node1", alone, SETTINGS)
    [hostname] = [r for r in node_check if r["check"] == "hostname"]
    assert hostname["status"] == "failed"


def test_master_addr_must_be_a_literal_of_the_hosts_family() -> None:
    obs = cluster(node2=observation(2, address="fd00::12"))
    v = verdicts(obs, "node2")["master_addr"]
    assert v["status"] == "failed" and "ipv6" in v["message"] and "ipv4" in v["message"]
    named = cluster()
    for o in named.values():
        o["master_addr"] = "node1.example"
    assert verdicts(named, "node3")["master_addr"]["status"] == "failed"


def test_busy_master_port_names_the_process() -> None:
    busy = observation(
        1,
        port_owner={
            "free": False,
            "listeners": [
                {
                    "address": "0.0.0.0",
                    "port": 29500,
                    "pid": 4242,
                    "comm": "python3",
                    "cmdline": "python3 -m http.server 29500",
                }
            ],
        },
        listeners={},
    )
    v = verdicts(cluster(node1=busy), "node1")["master_port_free"]
    assert v["status"] == "failed"
    assert v["message"] == (
        "node1: MASTER_PORT 29500 is already in use by pid 4242 "
        "(python3 -m http.server 29500) on 0.0.0.0"
    )
    assert "kill 4242" in v["hint"] and "nccl_master_port" in v["hint"]


def test_unreachable_master_names_both_ends_and_the_nc_command() -> None:
    obs = cluster()
    obs["node2"]["probes"][0].update(
        ok=False, error="timed out after 3 s", error_kind="timeout", elapsed_ms=3001
    )
    v = verdicts(obs, "node2")["tcp_master_port"]
    assert v["status"] == "failed"
    assert (
        "node2: cannot open TCP to node1 at 10.0.0.11:29500 (the master's MASTER_PORT 29500) "
        "from 10.0.0.12" in v["message"]
    )
    assert "packets are dropped" in v["message"]
    assert "nc -zv -s 10.0.0.12 10.0.0.11 29500  (on node2)" in v["hint"]


def test_probe_not_run_is_skipped_with_the_reason() -> None:
    obs = cluster(node3=observation(3, probes=[], probe_skip={"ring": "node4 has no address"}))
    v = verdicts(obs, "node3")
    assert (
        v["tcp_ring"]["status"] == "skipped" and "node4 has no address" in v["tcp_ring"]["message"]
    )


def test_firewall_findings_fail_uncertain_ones_warn_and_unreadable_skips() -> None:
    finding = {
        "text": "iptables filter chain INPUT rule 3 (...) drops tcp/29500",
        "certain": True,
        "fix": "iptables -I INPUT 3 -p tcp -s 10.0.0.12 --dport 29500 -j ACCEPT",
    }
    obs = cluster()
    obs["node1"]["firewall"]["findings"] = [finding]
    v = verdicts(obs, "node1")["firewall"]
    assert v["status"] == "failed" and v["message"].startswith("node1: iptables filter chain INPUT")
    assert "allow it (on node1): iptables -I INPUT 3" in v["hint"]
    obs["node1"]["firewall"]["findings"] = [{**finding, "certain": False}]
    assert verdicts(obs, "node1")["firewall"]["status"] == "passed"
    obs["node1"]["firewall"] = {
        "findings": [],
        "tools": {
            "iptables": {
                "present": True,
                "read": False,
                "error": "iptables-save exited 4: Permission denied",
            }
        },
    }
    v = verdicts(obs, "node1")["firewall"]
    assert v["status"] == "skipped" and "preflight_become_firewall" in v["hint"]


def test_seven_of_eight_gpus_fails_with_the_plain_sentence() -> None:
    obs = {h: with_gpus(o, "h100x8.csv") for h, o in cluster().items()}
    obs["node3"] = with_gpus(observation(3), "h100x7-missing-one.csv")
    assert len(obs["node3"]["facts"]["gpus"]) == 7
    # every host 7 GPUs (none lost beside the others), 8 ranks planned: the plain sentence
    sevens = {h: with_gpus(o, "h100x7-missing-one.csv") for h, o in cluster().items()}
    v = verdicts(sevens, "node3")["gpu"]
    assert v["status"] == "failed" and v["message"] == "node3 has 7 GPUs, 8 ranks planned"
    assert "nvidia-smi -L" in v["hint"]
    # one host with 7 among hosts with 8: its lost GPU first, with the table
    v = verdicts(obs, "node3")["gpu"]
    assert v["status"] == "failed", v
    assert v["message"].startswith("node3: nvidia-smi lists 7 GPUs, other hosts 8 (")
    assert verdicts(obs, "node1")["gpu"]["status"] == "passed"
    assert "8 x NVIDIA H100 80GB HBM3, driver 550.90.07" in verdicts(obs, "node1")["gpu"]["message"]


def test_two_gpu_models_across_hosts_and_within_a_host() -> None:
    obs = {h: with_gpus(o, "h100x8.csv") for h, o in cluster().items()}
    obs["node4"] = with_gpus(observation(4), "gb10-spark.csv")
    obs["node4"]["nproc_per_node"] = 1
    v = verdicts(obs, "node4")["gpu_model"]
    assert v["status"] == "failed" and "node4: GPU model NVIDIA GB10 differs" in v["message"]
    assert "  node1  NVIDIA H100 80GB HBM3" in v["message"]
    assert verdicts(obs, "node1")["gpu_model"]["status"] == "passed"
    obs["node2"] = with_gpus(observation(2), "h100x8-mixed-model.csv")
    v2 = verdicts(obs, "node2")["gpu_model"]
    assert v2["status"] == "failed" and "mixes GPU models" in v2["message"]


def test_gpu_checks_skip_with_reason_for_gloo_or_when_not_required() -> None:
    obs = {h: with_gpus(o, "h100x8.csv") for h, o in cluster().items()}
    v = verdicts(obs, "node1", require_gpu=False)
    assert v["gpu"]["status"] == v["gpu_model"]["status"] == "skipped"
    assert "nccl_require_gpu is false" in v["gpu"]["message"]


def test_torch_without_cuda_and_no_gpu_fail_on_nccl() -> None:
    obs = {h: with_gpus(o, "h100x8.csv") for h, o in cluster().items()}
    obs["node2"] = with_gpus(observation(2), "h100x8.csv", cuda=False)
    v = verdicts(obs, "node2")["gpu"]
    assert v["status"] == "failed" and "does not see CUDA" in v["message"]
    assert "torch.cuda.is_available()" in v["hint"]
    nogpu = copy.deepcopy(obs["node1"])
    nogpu["facts"]["gpus"] = []
    nogpu["facts"]["gpus_reason"] = "nvidia-smi failed: NVIDIA-SMI has failed"
    assert "NVIDIA-SMI has failed" in verdicts({**obs, "node1": nogpu}, "node1")["gpu"]["message"]


def test_version_mismatch_is_one_message_with_the_table() -> None:
    obs = cluster()
    obs["node4"]["facts"]["python"]["torch_version"] = "2.12.0"
    assert failed(obs) == {("node4", "versions")}
    v = verdicts(obs, "node4")["versions"]
    assert v["message"].startswith("node4: torch 2.12.0 differs from the other hosts (2.13.0)")
    for h in HOSTS:
        assert f"  {h}  2.1" in v["message"]
    assert "import sys, torch" in v["hint"]


def test_expected_versions_pin_golden_values() -> None:
    v = verdicts(cluster(), "node1", expected_versions={"torch": "2.14.0", "nccl": ""})
    assert v["versions"]["status"] == "failed"
    assert "torch 2.13.0 but nccl_expected_versions pins 2.14.0" in v["versions"]["message"]


def test_unreadable_torch_fails_versions_with_the_python_command() -> None:
    obs = cluster()
    obs["node2"]["facts"]["python"].update(torch_version=None, reason="No module named 'torch'")
    v = verdicts(obs, "node2")["versions"]
    assert v["status"] == "failed" and "No module named 'torch'" in v["message"]


def test_clock_skew_bound() -> None:
    obs = cluster()
    obs["node2"]["clock"] += 30
    v = verdicts(obs, "node2", clock_check=True, clock_max_skew_s=5)
    assert v["clock"]["status"] == "failed" and "+30.0 s" in v["clock"]["message"]
    assert verdicts(obs, "node1", clock_check=True)["clock"]["status"] == "passed"


def test_host_without_observation_fails_every_check() -> None:
    results = pf.nccl_preflight_results({"node1": observation(1), "node2": {}}, "node2", SETTINGS)
    assert {r["status"] for r in results} == {"failed"}


def test_ring_peers_expected_connections_and_probe_plan() -> None:
    assert pf.nccl_preflight_ring_peers(HOSTS, "node4") == ["node1"]
    assert pf.nccl_preflight_ring_peers(HOSTS, "node2", True) == ["node1", "node3", "node4"]
    assert pf.nccl_preflight_ring_peers(["node1"], "node1") == []
    assert pf.nccl_preflight_expected_connections(HOSTS, "node1") == 1
    assert pf.nccl_preflight_expected_connections(HOSTS, "node1", True) == 3
    ports = {
        "node1": {"master": {"port": 29500, "error": ""}, "ring": {"port": 40001, "error": ""}},
        "node2": {"ring": {"port": 40002, "error": ""}},
    }
    addrs = {"node1": "10.0.0.11", "node2": "10.0.0.12"}
    plan = pf.nccl_preflight_probe_plan(ports, "node1", "node1", ["node1", "node2"], addrs)
    assert plan == {
        "targets": [
            {"name": "master", "host": "node1", "address": "10.0.0.11", "port": 29500},
            {"name": "ring", "host": "node2", "address": "10.0.0.12", "port": 40002},
        ],
        "skip": {},
    }
    busy = {"node1": {"master": {"port": 29500, "error": "Address already in use"}}}
    plan = pf.nccl_preflight_probe_plan(busy, "node2", "node1", ["node1", "node2"], addrs)
    assert plan["targets"] == [] and "Address already in use" in plan["skip"]["master"]
    assert "holds no ephemeral listener" in plan["skip"]["ring"]


def test_failures_text_groups_by_host_with_fixes() -> None:
    obs = cluster()
    obs["node4"]["facts"]["python"]["torch_version"] = "2.12.0"
    by_host = {h: pf.nccl_preflight_results(obs, h, SETTINGS) for h in HOSTS} | {"node5": None}
    text = pf.nccl_preflight_failures_text(by_host)
    assert text.startswith("node4: 1 check(s) failed\n  [versions] node4: torch 2.12.0")
    assert "    fix: " in text and "node1" not in text.split("\n")[0]
    assert "node5: no pre-flight results" in text
    assert pf.nccl_preflight_failures_text({h: by_host[h] for h in HOSTS[:3]}) == ""
    assert pf.nccl_preflight_failed_hosts(by_host) == ["node4", "node5"]


def test_judge_gives_every_present_host_its_results_and_none_to_the_absent() -> None:
    obs = cluster()
    obs["node4"]["facts"]["python"]["torch_version"] = "2.12.0"
    del obs["node3"]  # unreachable: it never observed anything
    judged = pf.judge_host_checks(obs, ["node1", "node2", "node4"], SETTINGS)
    assert list(judged) == HOSTS  # the inventory's order, absent hosts included
    assert judged["node3"] is None
    # The same verdicts as judging one host at a time.
    for host in ("node1", "node2", "node4"):
        assert judged[host] == pf.nccl_preflight_results(obs, host, SETTINGS)
    assert pf.nccl_preflight_failed_hosts(judged) == ["node3", "node4"]
