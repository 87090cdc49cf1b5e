# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node/netlink.py against iproute2 on the same kernel: what `ip -j -d addr show` and `ip -j
route get` say (read by node/parse.py) and what the netlink reader says must be the same, on
this machine and in network namespaces made for the test (veth pairs up and down, a bridge, IPv4
and IPv6 addresses, a namespace with no route). The namespaces run in child processes
(`unshare --net`), are gone with them and carry no traffic."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_preflight.node import netlink
from nccl_preflight.node.parse import parse_ip_addr, parse_route_get

SRC = str(Path(__file__).resolve().parents[3] / "src")
IP = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
pytestmark = pytest.mark.skipif(IP is None, reason="no iproute2 here to compare with")
NEEDS_NETNS = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a network namespace of its own needs root and unshare",
)

# Run inside the namespace: both readers' answers as one JSON object.
COMPARE = f"""
import json, subprocess, sys
from nccl_preflight.node import netlink
from nccl_preflight.node.parse import parse_ip_addr, parse_route_get
out = {{"mine": netlink.interfaces(),
       "theirs": parse_ip_addr(subprocess.run([{IP!r}, "-j", "-d", "addr", "show"],
                                              capture_output=True, text=True, check=True).stdout),
       "routes": {{}}}}
for dst in sys.argv[1:]:
    ip = subprocess.run([{IP!r}, "-j", "route", "get", dst], capture_output=True, text=True)
    try:
        mine = netlink.route_get(dst)
    except OSError as exc:
        mine = {{"errno": exc.errno, "strerror": exc.strerror}}
    out["routes"][dst] = {{"mine": mine, "rc": ip.returncode, "stderr": ip.stderr.strip(),
                          "theirs": parse_route_get(ip.stdout) if ip.returncode == 0 else None}}
print(json.dumps(out))
"""


def in_namespace(setup: str, *destinations: str) -> dict:
    # The script and the destinations as sh's positional parameters: nothing is quoted twice.
    script = f'set -e\n{setup}\nexec "$0" -c "$@"'
    done = subprocess.run(
        ["unshare", "--net", "sh", "-c", script, sys.executable, COMPARE, *destinations],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_this_machines_interfaces_and_routes_read_as_ip_reads_them() -> None:
    shown = subprocess.run([IP, "-j", "-d", "addr", "show"], capture_output=True, text=True)
    assert netlink.interfaces() == parse_ip_addr(shown.stdout)
    for name, interface in netlink.interfaces().items():
        for address in [a["address"] for a in interface["ipv4"]] + ["127.0.0.1"]:
            ip = subprocess.run([IP, "-j", "route", "get", address], capture_output=True, text=True)
            assert netlink.route_get(address) == parse_route_get(ip.stdout), (name, address)


@NEEDS_NETNS
def test_veth_bridge_and_both_families_read_as_ip_reads_them() -> None:
    seen = in_namespace(
        f"""{IP} link set lo up
{IP} link add fab0 type veth peer name fab1
{IP} link add fab7 type veth peer name fab8
{IP} link add br9 type bridge
{IP} link set fab0 mtu 9000 up
{IP} link set fab1 up
{IP} addr add 10.77.0.1/24 dev fab0
{IP} addr add 10.77.0.5/24 dev fab0
{IP} addr add 10.77.7.1/30 dev fab7
{IP} addr add fd00:77::1/64 dev fab0 nodad""",
        "10.77.0.9",
        "10.77.7.2",
        "fd00:77::9",
        "127.0.0.1",
    )
    assert seen["mine"] == seen["theirs"]
    fab0 = seen["mine"]["fab0"]
    assert (fab0["kind"], fab0["mtu"], seen["mine"]["br9"]["kind"]) == ("veth", 9000, "bridge")
    assert [a["address"] for a in fab0["ipv4"]] == ["10.77.0.1", "10.77.0.5"]
    assert seen["mine"]["fab7"]["state"] == "down" and seen["mine"]["fab7"]["ipv4"]
    down = seen["routes"].pop("10.77.7.2")  # its interface is down: no route, for both
    assert down["rc"] != 0 and down["mine"]["errno"] == 101
    for dst, route in seen["routes"].items():
        assert route["rc"] == 0 and route["mine"] == route["theirs"], dst
    assert seen["routes"]["10.77.0.9"]["mine"]["interface"] == "fab0"


@NEEDS_NETNS
def test_no_route_is_the_kernels_answer_as_ip_prints_it() -> None:
    seen = in_namespace(f"{IP} link set lo up", "10.9.9.9", "fd00:9::9")
    assert seen["mine"] == seen["theirs"] and set(seen["mine"]) == {"lo"}
    for route in seen["routes"].values():
        assert route["rc"] != 0 and route["theirs"] is None
        assert route["mine"]["errno"] == 101  # ENETUNREACH
        assert route["stderr"].endswith(route["mine"]["strerror"])  # Network is unreachable
