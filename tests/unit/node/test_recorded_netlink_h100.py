# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The lent H100 VM has no iproute2: its interfaces and routes as node/netlink.py read them
there, checked against the same machine's sysfs, and node-check's judgement of the facts
gathered so (recorded by tests/device/netlink_gpu.sh on 2026-11-26; tests/fixtures/README.md,
"Without iproute2 on the H100"). Before, its interface and fabric checks failed ("ip (iproute2)
not found"); now only its hostname check does (vm maps to 127.0.0.1 in its /etc/hosts)."""

from __future__ import annotations

import json

import pytest

from tests.recorded_gpu import Machine, text

VM = Machine("h100-vm-netlink")


def test_netlink_read_what_sysfs_says_of_every_interface_on_the_vm() -> None:
    read = json.loads(text("gpu/netlink-h100-vm.json"))
    sysfs = {}
    for line in text("gpu/sys-class-net-h100-vm.txt").splitlines():
        name, state, mtu = line.split()[:3]
        sysfs[name] = (state, int(mtu))
    interfaces = read["interfaces"]
    assert {n: (i["state"], i["mtu"]) for n, i in interfaces.items()} == sysfs
    assert interfaces["eth0"]["ipv4"] == [{"address": "192.0.2.2", "prefixlen": 24}]
    assert interfaces["ifb0"]["kind"] == "ifb" and interfaces["eth0"]["kind"] is None
    assert read["routes"]["192.0.2.2"] == {
        "destination": "192.0.2.2",
        "interface": "lo",  # its own address: the local table
        "source": "192.0.2.2",
    }


def test_the_facts_gathered_without_ip_are_what_netlink_read() -> None:
    facts = json.loads(text("gpu/facts-h100-vm-netlink.json"))
    read = json.loads(text("gpu/netlink-h100-vm.json"))["interfaces"]
    assert facts["interfaces_reason"] == ""
    for name, interface in facts["interfaces"].items():
        assert {k: v for k, v in interface.items() if k not in ("speed_mbps", "rdma_devices")} == {
            k: v for k, v in read[name].items() if k not in ("speed_mbps", "rdma_devices")
        }


def test_node_check_judges_the_vm_as_it_did_there_only_its_hostname_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host, results = VM.node_check(monkeypatch)
    seen = {r["check"]: r for r in results}
    there = {
        line.split(":")[0]: line.split(":")[1].strip()
        for line in text("gpu/node-check-h100-vm-netlink.txt").splitlines()
        if not line.startswith("node-check:")
    }
    assert host == "vm" and {check: seen[check]["status"] for check in there} == there
    assert [c for c, status in there.items() if status == "failed"] == ["hostname"]
    assert "eth0 is up, address 192.0.2.2, MTU 1400" in seen["interface"]["message"]
    assert seen["fabric"]["message"] == "vm: NCCL and Gloo use eth0 (192.0.2.2)"
