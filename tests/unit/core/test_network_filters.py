# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Fabric-interface choice and input validation filters, on facts shaped like nccl_facts'."""

from __future__ import annotations

import pytest

from nccl_preflight.core.inputs import (
    INPUT_NAMES,
    nccl_cidr_problem,
    nccl_ifname_problem,
    nccl_input_names,
    nccl_input_problems,
)
from nccl_preflight.core.variables import ELSEWHERE, VARIABLES
from nccl_preflight.node.fabric_choice import nccl_fabric_choice


def interface(name: str, *ipv4: str, ipv6: tuple[str, ...] = ()) -> dict:
    return {
        "name": name,
        "state": "up",
        "mtu": 1500,
        "ipv4": [{"address": a, "prefixlen": 24} for a in ipv4],
        "ipv6": [{"address": a, "prefixlen": 64, "scope": "global"} for a in ipv6],
    }


SPARK_A = {
    "interfaces": {
        "lo": interface("lo", "127.0.0.1"),
        "enP7s7": interface("enP7s7", "10.20.0.5"),
        "enp1s0f0np0": interface("enp1s0f0np0", "192.168.100.10", ipv6=("fe80::1",)),
    },
    "route": {"destination": "10.20.0.5", "interface": "enP7s7", "source": "10.20.0.5"},
}
SPARK_B = {
    "interfaces": {
        "lo": interface("lo", "127.0.0.1"),
        "enP7s7": interface("enP7s7", "10.20.0.6"),
        "enp1s0f1np1": interface("enp1s0f1np1", "192.168.100.11"),
    },
    "route": {"destination": "10.20.0.5", "interface": "enP7s7", "source": "10.20.0.6"},
}


def test_cidr_picks_each_hosts_own_interface_name() -> None:
    a = nccl_fabric_choice(SPARK_A, "", "192.168.100.0/24")
    b = nccl_fabric_choice(SPARK_B, "", "192.168.100.0/24")
    assert (a["ifname"], a["address"]) == ("enp1s0f0np0", "192.168.100.10")
    assert (b["ifname"], b["address"]) == ("enp1s0f1np1", "192.168.100.11")


def test_explicit_interface_wins_over_cidr() -> None:
    choice = nccl_fabric_choice(SPARK_A, "enP7s7", "192.168.100.0/24")
    assert choice["ifname"] == "enP7s7"
    # The address must still be on the fabric: none of enP7s7's is, so none is claimed.
    assert choice["address"] == ""


def test_explicit_interface_absent_lists_the_present_ones() -> None:
    choice = nccl_fabric_choice(SPARK_B, "enp1s0f0np0", "")
    assert choice["address"] == ""
    assert "enp1s0f0np0" in choice["reason"]
    assert "enp1s0f1np1" in choice["reason"] and "lo" in choice["reason"]


def test_without_cidr_the_route_to_the_master_decides() -> None:
    choice = nccl_fabric_choice(SPARK_B, "", "")
    assert (choice["ifname"], choice["address"]) == ("enP7s7", "10.20.0.6")


def test_on_the_master_the_interface_holding_its_address_wins_over_lo() -> None:
    facts = {
        "interfaces": SPARK_A["interfaces"],
        "route": {"destination": "192.168.100.10", "interface": "lo", "source": "192.168.100.10"},
    }
    choice = nccl_fabric_choice(facts, "", "")
    assert (choice["ifname"], choice["address"]) == ("enp1s0f0np0", "192.168.100.10")


def test_no_route_and_no_cidr_says_why() -> None:
    facts = {"interfaces": SPARK_A["interfaces"], "route": {}, "route_reason": "ip not found"}
    expected = {"ifname": "", "address": "", "reason": "ip not found"}
    assert nccl_fabric_choice(facts, "", "") == expected


def test_cidr_without_match_says_which_cidr() -> None:
    choice = nccl_fabric_choice(SPARK_A, "", "172.31.0.0/16")
    assert choice["ifname"] == "" and "172.31.0.0/16" in choice["reason"]


def test_ipv6_fabric() -> None:
    facts = {"interfaces": {"ib0": interface("ib0", ipv6=("fd00:100::10",))}, "route": {}}
    choice = nccl_fabric_choice(facts, "", "fd00:100::/64")
    assert (choice["ifname"], choice["address"]) == ("ib0", "fd00:100::10")


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("enp1s0f0np0xxxxx", "16 characters"),
        ("eth 0", "outside letters"),
        ("eth0;reboot", "outside letters"),
        ("eth/0", "outside letters"),
        ("^docker", "outside letters"),
        ("..", "'.' or '..'"),
    ],
)
def test_bad_interface_names_are_refused(name: str, fragment: str) -> None:
    assert fragment in nccl_ifname_problem(name)


@pytest.mark.parametrize("name", ["lo", "eth0", "enp1s0f1np1", "ib0.8001", "bond-fabric_1"])
def test_kernel_interface_names_are_accepted(name: str) -> None:
    assert nccl_ifname_problem(name) == ""


def test_cidr_validation() -> None:
    assert nccl_cidr_problem("192.168.100.0/24") == ""
    assert nccl_cidr_problem("fd00::/64") == ""
    assert "host bits" in nccl_cidr_problem("192.168.100.1/24")
    assert "not a CIDR" in nccl_cidr_problem("192.168.100.0")


GOOD = {
    "nccl_socket_ifname": "",
    "nccl_fabric_cidr": "",
    "nccl_master_port": 29500,
    "nccl_backend": "auto",
    "nccl_nproc_per_node": 1,
    "nccl_run_timeout": 300,
    "nccl_slots": None,
    "nccl_check_args": [],
    "nccl_extra_env": {},
    "nccl_python": "",
}


def test_good_inputs_have_no_problem() -> None:
    assert nccl_input_problems(GOOD) == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"nccl_master_port": 80}, "nccl_master_port is 80, outside 1024-65535"),
        ({"nccl_master_port": "http"}, "nccl_master_port is 'http', not an integer"),
        ({"nccl_backend": "nvlink"}, "nccl_backend is 'nvlink', not one of"),
        ({"nccl_socket_ifname": "eth0 eth1"}, "nccl_socket_ifname 'eth0 eth1' holds"),
        ({"nccl_fabric_cidr": "10.0.0.0/33"}, "nccl_fabric_cidr '10.0.0.0/33' is not a CIDR"),
        ({"nccl_slots": 0}, "nccl_slots is 0, outside >= 1"),
        ({"nccl_check_args": "--max-bytes 1M"}, "nccl_check_args is '--max-bytes 1M', not a list"),
        ({"nccl_extra_env": {"NCCL IB": "1"}}, "nccl_extra_env key 'NCCL IB' is not"),
        ({"nccl_python": "python3"}, "nccl_python is 'python3', not an absolute path"),
        (
            {"nccl_report_textfile_dir": "/nonexistent/textfile"},
            "nccl_report_textfile_dir '/nonexistent/textfile' not a directory",
        ),
    ],
)
def test_each_bad_input_is_named(override: dict, expected: str) -> None:
    problems = nccl_input_problems({**GOOD, **override})
    assert len(problems) == 1
    assert problems[0].startswith(expected)


class _Reads(dict):
    """A host's values that remember every name looked at."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def get(self, key, default=None):  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):  # type: ignore[override]
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:  # type: ignore[override]
        self.read.add(key)
        return super().__contains__(key)


def test_input_names_are_every_variable_the_checks_read_and_no_more() -> None:
    """roles/validate_inputs looks up INPUT_NAMES; a name the checks read that is not there
    would never reach them on the Ansible path."""
    values = _Reads(GOOD)
    nccl_input_problems(values)
    assert values.read == set(INPUT_NAMES)
    known = set(VARIABLES) | {v.name for v in ELSEWHERE}
    assert set(INPUT_NAMES) <= known
    defined = ["nccl_run_dir", "nccl_backend", "nccl_master_port", "x"]
    assert nccl_input_names(defined) == ["nccl_master_port", "nccl_backend"]
