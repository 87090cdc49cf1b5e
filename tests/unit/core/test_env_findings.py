# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The environment stage's findings (src/nccl_preflight/core/env_findings.py): a CIDR or interface
that matches nothing names what was asked and what each host has, and stops the run there."""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.env_findings import interface_table, nccl_env_findings, nccl_env_stop_text
from nccl_preflight.node.fabric_choice import nccl_fabric_candidate, nccl_fabric_choice


def facts(**interfaces: str) -> dict[str, Any]:
    return {
        "nccl": {
            "interfaces": {
                name: {"name": name, "state": "up", "ipv4": [{"address": a, "prefixlen": 24}]}
                for name, a in interfaces.items()
            }
        }
    }


HOSTS = {
    "node1": facts(eth0="198.18.3.2", fab0="10.0.3.11", lo="127.0.0.1"),
    "node2": facts(eth0="198.18.3.3", fab1="10.0.3.12", lo="127.0.0.1"),
}


def choices(cidr: str = "", ifname: str = "") -> dict[str, dict]:
    return {
        h: {
            **nccl_fabric_choice(f["nccl"], ifname, cidr),
            "cidr": cidr,
            "socket_ifname": ifname,
        }
        for h, f in HOSTS.items()
    }


def test_a_cidr_that_matches_nothing_is_an_error_per_host_naming_it_and_the_addresses() -> None:
    found = nccl_env_findings(choices(cidr="10.9.9.0/24"), HOSTS, ["node1", "node2"])
    assert [r["status"] for r in found.values()] == ["error", "error"]
    assert "nccl_fabric_cidr 10.9.9.0/24" in found["node1"]["message"]
    assert "fab0 10.0.3.11/24" in found["node1"]["message"]
    assert "fab1 10.0.3.12/24" in found["node2"]["message"]
    assert "MASTER_ADDR" in found["node1"]["message"]  # the master's address is missing too
    assert all(r["check"] == "environment" for r in found.values())
    text = nccl_env_stop_text(found)
    assert "10.9.9.0/24" in text and "eth0 198.18.3.3/24" in text
    # No advice to run what was just run.
    assert "ansible-playbook" not in text and "--tags" not in text


def test_an_interface_that_does_not_exist_names_it_and_the_interfaces_there() -> None:
    found = nccl_env_findings(choices(ifname="fab0"), HOSTS, ["node1", "node2"])
    assert found["node1"]["status"] == "skipped"  # fab0 exists on node1
    assert "because of node2" in found["node1"]["message"]
    assert found["node2"]["status"] == "error"
    assert "interface fab0 does not exist on node2" in found["node2"]["message"]
    assert "eth0 198.18.3.3/24, fab1 10.0.3.12/24, lo 127.0.0.1/24" in found["node2"]["message"]
    assert "nccl_socket_ifname" in found["node2"]["hint"]


def test_an_interface_without_an_address_in_the_cidr_says_so() -> None:
    found = nccl_env_findings(choices(cidr="10.0.3.0/24", ifname="eth0"), HOSTS, ["node1", "node2"])
    assert (
        "interface eth0 has no address in nccl_fabric_cidr 10.0.3.0/24"
        in (found["node1"]["message"])
    )


def test_nothing_when_every_host_has_a_fabric_address() -> None:
    assert nccl_env_findings(choices(cidr="10.0.3.0/24"), HOSTS, ["node1", "node2"]) == {}


def test_an_unreachable_host_alone_does_not_stop_the_run_but_is_named_when_it_stops() -> None:
    fine = {"node1": choices(cidr="10.0.3.0/24")["node1"], "node2": ""}  # hostvars' default
    assert nccl_env_findings(fine, HOSTS, ["node1", "node2"]) == {}
    bad = {"node1": choices(cidr="10.9.9.0/24")["node1"], "node2": None}
    found = nccl_env_findings(bad, HOSTS, ["node1", "node2"])
    assert found["node2"]["status"] == "error"
    assert "unreachable" in found["node2"]["message"]


def test_the_interface_table_says_down_and_no_address() -> None:
    table = interface_table({"b": {"state": "down", "ipv4": []}, "a": {"state": "up"}})
    assert table == "a no address, b (down) no address"
    assert interface_table({}) == "no interface at all"


THREE = {
    "node1": facts(eth0="198.18.3.2", fab0="10.0.3.11", lo="127.0.0.1"),
    "node2": facts(eth0="198.18.3.3", fab0="10.0.3.12", lo="127.0.0.1"),
    # fab0 renamed fabX, its address kept.
    "node3": facts(eth0="198.18.3.4", fabX="10.0.3.13", lo="127.0.0.1"),
}


def three_choices(hosts: dict[str, Any], cidr: str = "", ifname: str = "") -> dict[str, dict]:
    return {
        h: {**nccl_fabric_choice(f["nccl"], ifname, cidr), "cidr": cidr, "socket_ifname": ifname}
        for h, f in hosts.items()
    }


def test_the_fix_names_the_one_interface_in_the_other_hosts_fabric_network() -> None:
    found = nccl_env_findings(three_choices(THREE, ifname="fab0"), THREE, list(THREE))
    assert found["node3"]["status"] == "error"
    hint = found["node3"]["hint"]
    assert hint.startswith("set nccl_socket_ifname for node3 to fabX: "), hint
    assert "10.0.3.0/24, the other hosts' fabric network" in hint
    assert "the interface of the fabric" not in hint
    assert "fix: set nccl_socket_ifname for node3 to fabX" in nccl_env_stop_text(found)


def test_two_interfaces_in_the_fabric_network_name_none() -> None:
    hosts = {**THREE, "node3": facts(eth0="198.18.3.4", fabX="10.0.3.13", fabY="10.0.3.23")}
    hint = nccl_env_findings(three_choices(hosts, ifname="fab0"), hosts, list(hosts))["node3"][
        "hint"
    ]
    assert "to the interface of the fabric" in hint
    assert "fabX" not in hint and "fabY" not in hint


def test_no_interface_in_the_fabric_network_names_none() -> None:
    hosts = {**THREE, "node3": facts(eth0="198.18.3.4", fabX="10.0.9.13")}
    hint = nccl_env_findings(three_choices(hosts, ifname="fab0"), hosts, list(hosts))["node3"][
        "hint"
    ]
    assert "to the interface of the fabric" in hint and "fabX" not in hint


def test_the_one_interface_in_nccl_fabric_cidr_is_named_when_no_other_host_has_one() -> None:
    # Every host was given an interface it lacks: no peer network, but the CIDR.
    found = nccl_env_findings(
        three_choices(THREE, cidr="10.0.3.0/24", ifname="fab9"), THREE, list(THREE)
    )
    hint = found["node3"]["hint"]
    assert hint == (
        "set nccl_socket_ifname for node3 to fabX: the one interface of node3 with an address "
        "in nccl_fabric_cidr 10.0.3.0/24"
    )
    assert found["node1"]["hint"].endswith(
        "to fab0: the one interface of node1 with an address in nccl_fabric_cidr 10.0.3.0/24"
    )


def test_the_candidate_choice_counts_routable_addresses_in_the_networks() -> None:
    interfaces = THREE["node3"]["nccl"]["interfaces"]
    assert nccl_fabric_candidate(interfaces, ["10.0.3.0/24"]) == "fabX"
    assert nccl_fabric_candidate(interfaces, ["10.0.3.0/24", "198.18.3.0/24"]) == ""  # two
    assert nccl_fabric_candidate(interfaces, ["10.7.0.0/16"]) == ""  # none
    assert nccl_fabric_candidate(interfaces, ["127.0.0.0/8"]) == ""  # loopback never
    assert nccl_fabric_candidate(interfaces, []) == ""
