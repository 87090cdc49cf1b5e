# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight modules: nccl_preflight_observe's firewall read (through patch_module_args, tools
answered from fixtures),
the port owner look-up of src/nccl_preflight/node/port_owner.py (recorded /proc/net/tcp, a fake
/proc tree, a real socket), nccl_preflight_observe and src/nccl_preflight/node/listener.py (their
socket functions, on loopback only; the listener process itself:
tests/unit/ansible/test_preflight_listener.py)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import nccl_preflight_observe
import pytest
from ansible.module_utils import basic
from ansible.module_utils.nccl_preflight.node import listener as nccl_listener
from ansible.module_utils.nccl_preflight.node.port_owner import (
    describe_pid,
    listeners_on_port,
    parse_proc_net_tcp,
    port_owner,
    socket_owners,
)
from ansible.module_utils.nccl_preflight.node.tcp_connect import tcp_connect

from tests.module_exit import run_module_main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "firewall"


def read_firewall(monkeypatch, args: dict):
    """nccl_preflight_observe with no target and ``args`` as its firewall option, the way the
    pre-flight reads the firewall; -> the module's end (``.result`` is the firewall part of its
    result)."""
    ended = run_module_main(monkeypatch, nccl_preflight_observe.main, {"firewall": args})
    if not ended.failed:
        # It only reads: nothing changed, and no connection was tried.
        assert ended.result["changed"] is False and ended.result["results"] == []
        ended.result = ended.result["firewall"]
    return ended


def run_firewall_module(monkeypatch, outputs: dict[str, str | None], args: dict) -> dict:
    """outputs: tool argv[0] -> stdout, or None for "not installed"; every run is recorded."""
    calls: list[list[str]] = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return f"/usr/sbin/{name}" if outputs.get(name) is not None else None

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        name = os.path.basename(argv[0])
        return 0, outputs[name], ""

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    ended = read_firewall(monkeypatch, args)
    assert not ended.failed, ended.result
    ended.result["calls"] = calls
    return ended.result


ARGS = {
    "peers": ["10.77.0.12"],
    "address": "10.77.0.11",
    "ifname": "eth1",
    "ports": [
        {"label": "MASTER_PORT", "low": 29500},
        {"label": "ephemeral range", "low": 32768, "high": 60999},
    ],
}


def test_firewall_module_reports_iptables_once_and_only_reads(monkeypatch) -> None:
    outputs = {
        "iptables-save": (FIXTURES / "iptables-save-drops.txt").read_text(),
        "ip6tables-save": "",
        "nft": (FIXTURES / "nft-iptables-nft-drops.json").read_text(),
        "ufw": None,
        "firewall-cmd": None,
    }
    result = run_firewall_module(monkeypatch, outputs, ARGS)
    assert [(f["tool"], f["chain"], f["label"]) for f in result["findings"]] == [
        ("iptables", "NCCL-FENCE", "MASTER_PORT"),
        ("iptables", "NCCL-FENCE", "ephemeral range"),
    ]
    assert result["findings"][0]["text"].startswith("iptables filter chain NCCL-FENCE rule 1")
    assert result["tools"]["nftables"]["skipped_tables"] == ["ip filter"]
    # Only read-only invocations.
    assert sorted(c[0].rsplit("/", 1)[1] + " " + " ".join(c[1:]) for c in result["calls"]) == [
        "ip6tables-save ",
        "iptables-save ",
        "nft -j list ruleset",
    ]


def test_with_ufw_active_a_drop_inserted_before_ufws_chains_still_counts(monkeypatch) -> None:
    """Recorded together (record-ufw.sh): ufw allows 10.77.0.0/24, and an iptables rule put in
    INPUT before ufw's chains drops tcp/29500 from 10.77.0.12."""
    outputs = {
        "ufw": (FIXTURES / "ufw-status-verbose-recorded.txt").read_text(),
        "iptables-save": (FIXTURES / "iptables-save-ufw-custom-drop.txt").read_text(),
        "ip6tables-save": "",
        "nft": None,
        "firewall-cmd": None,
    }
    result = run_firewall_module(monkeypatch, outputs, ARGS)
    found = [(f["tool"], f["chain"], f["position"], f["label"]) for f in result["findings"]]
    # Nothing from ufw (it allows the fabric), nothing from ufw's own chains or its INPUT policy.
    assert found == [("iptables", "INPUT", 1, "MASTER_PORT")]
    assert result["findings"][0]["certain"] is True
    assert result["tools"]["iptables"]["note"].startswith("ufw's chains and policies")


def test_with_ufw_active_its_default_deny_is_reported_once_as_ufw(monkeypatch) -> None:
    """ufw allowing only 22/tcp beside the recorded iptables: ufw's deny is ufw's finding, the
    rule outside ufw's chains stays an iptables finding, nothing is reported twice."""
    outputs = {
        "ufw": (FIXTURES / "ufw-status-verbose-ssh-only.txt").read_text(),
        "iptables-save": (FIXTURES / "iptables-save-ufw-custom-drop.txt").read_text(),
        "ip6tables-save": "",
        "nft": None,
        "firewall-cmd": None,
    }
    result = run_firewall_module(monkeypatch, outputs, ARGS)
    found = [(f["tool"], f["chain"], f["label"]) for f in result["findings"]]
    assert found == [
        ("ufw", "default incoming policy", "MASTER_PORT"),
        ("ufw", "default incoming policy", "ephemeral range"),
        ("iptables", "INPUT", "MASTER_PORT"),
    ]


def fake_firewall_cmd(monkeypatch, zone: str) -> list[list[str]]:
    """Only firewall-cmd is installed, firewalld runs, eth1 is in zone public (``zone`` is its
    --list-all); services answer from the recordings, an unknown one fails as firewalld does.
    -> the list every call is recorded in."""
    calls: list[list[str]] = []

    def run_command(self, argv, **kwargs):
        calls.append(argv)
        arg = " ".join(argv[1:])
        if arg == "--state":
            return 0, "running\n", ""
        if arg.startswith("--get-zone-of-interface="):
            return 0, "public\n", ""
        if arg == "--zone=public --list-all":
            return 0, zone, ""
        name = arg.removeprefix("--info-service=")
        path = FIXTURES / f"firewalld-service-{name}.txt"
        if path.exists():
            return 0, path.read_text(), ""
        return 101, "", f"Error: INVALID_SERVICE: {name}"

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/firewall-cmd" if name == "firewall-cmd" else None

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    return calls


def test_firewalld_zone_services_are_read_and_open_their_ports(monkeypatch) -> None:
    zone = (FIXTURES / "firewalld-public-service-nccl.txt").read_text()
    calls = fake_firewall_cmd(monkeypatch, zone)
    ended = read_firewall(monkeypatch, ARGS)
    assert not ended.failed, ended.result
    # dhcpv6-client, nccl and ssh are read once each; nccl opens MASTER_PORT and the range.
    info = [c[1] for c in calls if c[1].startswith("--info-service=")]
    assert info == ["--info-service=dhcpv6-client", "--info-service=nccl", "--info-service=ssh"]
    assert ended.result["findings"] == []
    assert ended.result["tools"]["firewalld"]["active"] is True


def test_a_zone_service_firewalld_cannot_describe_makes_the_finding_a_warning(
    monkeypatch,
) -> None:
    zone = (FIXTURES / "firewalld-public-default.txt").read_text().replace("ssh", "ssh nccl-gone")
    fake_firewall_cmd(monkeypatch, zone)
    result = read_firewall(monkeypatch, ARGS).result
    assert [f["certain"] for f in result["findings"]] == [False, False]
    assert "services not read: nccl-gone" in result["findings"][0]["text"]
    assert "--info-service=nccl-gone exited 101" in result["tools"]["firewalld"]["error"]


def test_firewalld_installed_but_stopped_is_no_error(monkeypatch) -> None:
    def run_command(self, argv, **kwargs):
        return 252, "not running\n", ""

    monkeypatch.setattr(
        basic.AnsibleModule,
        "get_bin_path",
        lambda self, name, required=False, opt_dirs=None: (
            "/usr/bin/firewall-cmd" if name == "firewall-cmd" else None
        ),
    )
    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    tools = read_firewall(monkeypatch, ARGS).result["tools"]
    assert tools["firewalld"]["active"] is False and tools["firewalld"]["error"] == ""
    assert tools["firewalld"]["note"].startswith("not running: firewall-cmd --state exited 252")


def test_firewall_module_without_any_tool_passes(monkeypatch) -> None:
    result = run_firewall_module(monkeypatch, {}, ARGS)
    assert result["findings"] == [] and result["calls"] == []


def test_proc_net_tcp_listeners_on_a_port() -> None:
    rows = parse_proc_net_tcp((FIXTURES / "proc-net-tcp.txt").read_text())
    rows6 = parse_proc_net_tcp((FIXTURES / "proc-net-tcp6.txt").read_text())
    assert listeners_on_port(rows, 29556) == [
        {
            "local_address": "127.0.0.1",
            "local_port": 29556,
            "remote_address": "0.0.0.0",
            "remote_port": 0,
            "state": "0A",
            "uid": 0,
            "inode": 33531,
        }
    ]
    assert [(r["local_address"], r["inode"]) for r in listeners_on_port(rows6, 29555)] == [
        ("::1", 33530)
    ]
    assert listeners_on_port(rows + rows6, 29500) == []


def test_socket_owners_reads_fd_links(tmp_path: Path) -> None:
    (tmp_path / "4242" / "fd").mkdir(parents=True)
    (tmp_path / "4242" / "fd" / "3").symlink_to("socket:[33531]")
    (tmp_path / "4242" / "fd" / "4").symlink_to("/dev/null")
    (tmp_path / "4242" / "comm").write_text("python3\n")
    (tmp_path / "4242" / "cmdline").write_bytes(b"python3\0-m\0http.server\0")
    (tmp_path / "self").mkdir()
    assert socket_owners({33531, 1}, str(tmp_path)) == {33531: 4242}
    assert describe_pid(4242, str(tmp_path)) == ("python3", "python3 -m http.server")


def test_port_owner_names_this_process_for_a_socket_it_holds() -> None:
    sock, port, _ = nccl_listener.bind_listener("127.0.0.1", 0)
    try:
        owner = port_owner(port)
    finally:
        sock.close()
    assert owner["free"] is False
    [holder] = owner["listeners"]
    assert (holder["address"], holder["port"], holder["pid"]) == ("127.0.0.1", port, os.getpid())
    assert holder["uid"] == os.getuid() and holder["cmdline"]
    assert port_owner(port) == {"free": True, "listeners": []}


def test_listener_and_probe_on_loopback() -> None:
    sock, port, error = nccl_listener.bind_listener("127.0.0.1", 0)
    assert sock is not None and error == "" and port > 0
    entries = [
        {
            "name": "ring",
            "address": "127.0.0.1",
            "port": port,
            "connections": 1,
            "error": "",
            "accepted": [],
            "complete": False,
        }
    ]
    done: list[str] = []
    server = threading.Thread(
        target=lambda: done.append(
            nccl_listener.serve(entries, {"ring": sock}, time.monotonic() + 10, None)
        )
    )
    server.start()
    ok = tcp_connect("127.0.0.1", port, "127.0.0.1", 2.0, 0.0)
    server.join(10)
    assert ok["ok"] and ok["error_kind"] == ""
    assert done == ["complete"]
    assert entries[0]["accepted"] == ["127.0.0.1"] and entries[0]["complete"]
    # The listener is gone: connecting now is refused, and named so.
    refused = tcp_connect("127.0.0.1", port, "", 2.0, 0.3)
    assert (refused["ok"], refused["error_kind"]) == (False, "refused")


def test_listener_stops_on_the_stop_file_and_reports_bind_errors(tmp_path: Path) -> None:
    holder, port, _ = nccl_listener.bind_listener("127.0.0.1", 0)
    try:
        again, _, error = nccl_listener.bind_listener("127.0.0.1", port)
        assert again is None and "Address already in use" in error and f":{port}" in error
        stop = tmp_path / "stop"
        stop.write_text("")
        entries = [{"name": "m", "connections": 2, "accepted": [], "complete": False}]
        start = time.monotonic()
        ended = nccl_listener.serve(entries, {"m": holder}, start + 30, str(stop))
        assert ended == "stop file" and time.monotonic() - start < 5
        assert holder.fileno() == -1  # serve closes the sockets it was given
    finally:
        holder.close()


def test_probe_from_an_address_not_on_this_host_says_so() -> None:
    result = tcp_connect("127.0.0.1", 9, "192.0.2.77", 1.0, 0.0)
    assert (result["ok"], result["error_kind"]) == (False, "source")


def test_socket_family_follows_the_address() -> None:
    sock, _, error = nccl_listener.bind_listener("::1", 0)
    if sock is None:
        pytest.skip(f"no IPv6 loopback here: {error}")
    assert sock.family == socket.AF_INET6
    sock.close()
