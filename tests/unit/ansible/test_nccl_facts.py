# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_facts.py: run through patch_module_args, with tool output from tests/fixtures/."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ansible.module_utils.nccl_preflight.node import facts as node_facts

from tests.builders.facts import ROOT, TOOLS, FakeNode, facts_of, fixture, use_node
from tests.module_exit import ModuleExit as Exit

BIN = Path(sys.executable).parent


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch, sysfs: Path) -> FakeNode:
    return use_node(monkeypatch, FakeNode(), sysfs)


CONTRACT_KEYS = {
    "hostname",
    "hostname_addresses",
    "module_python",
    "interfaces",
    "route",
    "route_reason",
    "ip_local_port_range",
    "gpus",
    "gpus_reason",
    "gpu_health",
    "python",
}


def test_full_run_on_recorded_outputs(node: FakeNode, run: Callable[..., Exit]) -> None:
    facts = facts_of(run(route_to="192.168.100.11", query_python=False))
    assert set(facts) >= CONTRACT_KEYS
    fabric = facts["interfaces"]["enp1s0f0np0"]
    assert fabric["speed_mbps"] == 200000
    assert fabric["rdma_devices"] == ["rocep1s0f0"]
    assert fabric["ipv4"] == [{"address": "192.168.100.10", "prefixlen": 24}]
    assert facts["interfaces"]["enp1s0f1np1"]["speed_mbps"] is None
    assert facts["interfaces"]["enp1s0f1np1"]["rdma_devices"] == []
    assert facts["interfaces"]["lo"]["state"] == "unknown"
    assert facts["route"] == {
        "destination": "192.168.100.11",
        "interface": "enp1s0f0np0",
        "source": "192.168.100.10",
    }
    assert facts["route_reason"] == ""
    assert ["/usr/sbin/ip", "-j", "route", "get", "192.168.100.11"] in node.calls
    assert facts["ip_local_port_range"] == [32768, 60999]
    assert len(facts["gpus"]) == 8
    assert facts["gpus"][7]["pci_bus_id"] == "00000000:DB:00.0"
    assert facts["gpus_reason"] == ""
    assert facts["module_python"] == sys.executable
    assert facts["python"]["reason"] == "query_python is false"
    assert not any(len(c) == 3 and c[1] == "-c" for c in node.calls)


def test_check_mode_gives_the_same_facts(node: FakeNode, run: Callable[..., Exit]) -> None:
    normal = facts_of(run(route_to="192.168.100.11", query_python=False))
    checked = facts_of(run(route_to="192.168.100.11", query_python=False, _ansible_check_mode=True))
    # /dev/shm's free space is read live (statvfs) and moves with every other process's files.
    for facts in (normal, checked):
        assert isinstance(facts["fabric"]["limits"]["shm"].pop("free_bytes"), int)
    assert checked == normal


def test_gb10_memory_is_null(node: FakeNode, run: Callable[..., Exit]) -> None:
    node.gpus = (0, fixture("nvidia-smi/gb10-spark.csv"), "")
    (gpu,) = facts_of(run(query_python=False))["gpus"]
    assert gpu["name"] == "NVIDIA GB10"
    assert gpu["memory_total_mib"] is None


def test_missing_nvidia_smi_gives_empty_list_and_reason(
    node: FakeNode, run: Callable[..., Exit]
) -> None:
    del node.tools["nvidia-smi"]
    facts = facts_of(run(query_python=False))
    assert facts["gpus"] == []
    assert facts["gpus_reason"].startswith("nvidia-smi not found on PATH")
    assert facts["interfaces"]  # the rest is still gathered


def test_nvidia_smi_path_that_does_not_exist(
    node: FakeNode, run: Callable[..., Exit], tmp_path: Path
) -> None:
    facts = facts_of(run(query_python=False, nvidia_smi=str(tmp_path / "nvidia-smi")))
    assert facts["gpus"] == []
    assert "not found or not executable" in facts["gpus_reason"]


@pytest.mark.parametrize(
    ("result", "words"),
    [
        ((9, fixture("nvidia-smi/driver-not-loaded.txt"), ""), ["rc=9", "couldn't communicate"]),
        ((6, fixture("nvidia-smi/no-devices.txt"), ""), ["rc=6", "No devices were found"]),
        ((0, fixture("nvidia-smi/no-devices.txt"), ""), ["found no GPU"]),
        ((0, "0, NVIDIA GB10, 580.126.09\n", ""), ["cannot read", "line 1 has 3 fields"]),
        ((0, "", ""), ["printed no GPU"]),
    ],
)
def test_nvidia_smi_failures_give_reasons(
    node: FakeNode, run: Callable[..., Exit], result: tuple[int, str, str], words: list[str]
) -> None:
    node.gpus = result
    facts = facts_of(run(query_python=False))
    assert facts["gpus"] == []
    for word in words:
        assert word in facts["gpus_reason"]


def test_query_gpus_false_runs_no_nvidia_smi(node: FakeNode, run: Callable[..., Exit]) -> None:
    facts = facts_of(run(query_python=False, query_gpus=False))
    assert facts["gpus"] == []
    assert facts["gpus_reason"] == "query_gpus is false"
    assert not any(c[0] == TOOLS["nvidia-smi"] for c in node.calls)


def test_without_ip_the_interfaces_and_the_route_come_from_the_kernel_over_netlink(
    node: FakeNode, run: Callable[..., Exit]
) -> None:
    """A node without iproute2 (the lent GPU VMs have none): the same facts, asked of this
    machine's kernel (node/netlink.py); no ip command runs."""
    del node.tools["ip"]
    # The lab tests beside this one add and remove interfaces here (ncclabN): what the kernel
    # listed before and after bounds what the facts may say.
    before = set(os.listdir("/sys/class/net"))
    facts = facts_of(run(route_to="127.0.0.1", query_python=False))
    after = set(os.listdir("/sys/class/net"))
    assert facts["interfaces_reason"] == "" and facts["route_reason"] == ""
    assert facts["interfaces"]["lo"]["ipv4"] == [{"address": "127.0.0.1", "prefixlen": 8}]
    assert before & after <= set(facts["interfaces"]) <= before | after
    assert facts["route"] == {"destination": "127.0.0.1", "interface": "lo", "source": "127.0.0.1"}
    assert not any(os.path.basename(str(c[0])) == "ip" for c in node.calls)
    assert len(facts["gpus"]) == 8


def test_without_ip_and_netlink_the_interfaces_and_route_say_why(
    node: FakeNode, run: Callable[..., Exit], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_args: object) -> dict:
        raise OSError(97, "Address family not supported by protocol")

    monkeypatch.setattr(node_facts.netlink, "interfaces", refused)
    monkeypatch.setattr(node_facts.netlink, "route_get", refused)
    del node.tools["ip"]
    facts = facts_of(run(route_to="127.0.0.1", query_python=False))
    assert facts["interfaces"] == {} and facts["route"] == {}
    assert facts["interfaces_reason"].startswith("ip (iproute2) not found")
    assert "rtnetlink: Address family not supported" in facts["interfaces_reason"]
    assert facts["route_reason"] == (
        "route get 127.0.0.1 (rtnetlink, no iproute2 here): "
        "Address family not supported by protocol"
    )


def test_unreachable_route_gives_reason(node: FakeNode, run: Callable[..., Exit]) -> None:
    node.route = (
        int(fixture("ip/route-get-unreachable.rc")),
        fixture("ip/route-get-unreachable.stdout"),
        fixture("ip/route-get-unreachable.stderr"),
    )
    facts = facts_of(run(route_to="203.0.113.7", query_python=False))
    assert facts["route"] == {}
    assert "ip -j route get 203.0.113.7 failed (rc=2)" in facts["route_reason"]
    assert "Network is unreachable" in facts["route_reason"]


def test_route_to_a_name_is_resolved_on_the_node(
    node: FakeNode, run: Callable[..., Exit], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo

    def fake(host: str, *args: object, **kwargs: object) -> list:
        if host == "spark-b":
            return [
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fd00:100::11", 0, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("192.168.100.11", 0)),
            ]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(node_facts.socket, "getaddrinfo", fake)
    facts = facts_of(run(route_to="spark-b", query_python=False))
    assert ["/usr/sbin/ip", "-j", "route", "get", "192.168.100.11"] in node.calls
    assert facts["route"]["interface"] == "enp1s0f0np0"


def test_unresolvable_route_to_and_hostname_give_reasons(
    node: FakeNode, run: Callable[..., Exit], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(host: str, *args: object, **kwargs: object) -> list:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(node_facts.socket, "getaddrinfo", fake)
    facts = facts_of(run(route_to="master.invalid", query_python=False))
    assert facts["route"] == {}
    assert facts["route_reason"].startswith("cannot resolve 'master.invalid' on this node")
    assert facts["hostname_addresses"] == []
    assert "does not resolve on this node" in facts["hostname_reason"]
    assert not any(c[1:4] == ["-j", "route", "get"] for c in node.calls)


def test_no_route_to_given(node: FakeNode, run: Callable[..., Exit]) -> None:
    facts = facts_of(run(query_python=False))
    assert facts["route"] == {}
    assert facts["route_reason"] == "route_to not given"


def test_route_to_option_like_value_fails(node: FakeNode, run: Callable[..., Exit]) -> None:
    outcome = run(route_to="--help")
    assert outcome.failed
    assert "route_to '--help' is not an address" in outcome.result["msg"]
    assert node.calls == []


def test_python_with_torch(node: FakeNode, run: Callable[..., Exit]) -> None:
    torch = pytest.importorskip("torch")
    python = facts_of(run(python=sys.executable))["python"]
    assert python["executable"] == sys.executable
    assert python["torch_version"] == torch.__version__
    assert python["reason"] == ""


def test_python_without_torch_gives_reason(
    node: FakeNode, run: Callable[..., Exit], tmp_path: Path
) -> None:
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n', encoding="utf-8")
    no_torch.chmod(0o755)
    python = facts_of(run(python=str(no_torch)))["python"]
    assert python["torch_version"] is None
    assert python["cuda_available"] is False
    assert python["device_count"] == 0
    assert python["reason"].startswith("torch is not importable: ModuleNotFoundError")


def test_python_missing_or_crashing_gives_reason(
    node: FakeNode, run: Callable[..., Exit], tmp_path: Path
) -> None:
    python = facts_of(run(python=str(tmp_path / "nope" / "python3")))["python"]
    assert "not found or not executable" in python["reason"]
    assert set(python) >= {"torch_version", "cuda_available", "device_count", "npu_version"}

    crashing = tmp_path / "python-crashing"
    crashing.write_text("#!/bin/sh\necho 'Illegal instruction' >&2\nexit 132\n", encoding="utf-8")
    crashing.chmod(0o755)
    python = facts_of(run(python=str(crashing)))["python"]
    assert "failed (rc=132): Illegal instruction" in python["reason"]
    assert python["torch_version"] is None


# --- the real module on this machine ----------------------------------------------------------


def test_real_module_on_this_machine(run: Callable[..., Exit]) -> None:
    facts = facts_of(run(route_to="127.0.0.1", query_python=False))
    lo = facts["interfaces"]["lo"]
    assert {"address": "127.0.0.1", "prefixlen": 8} in lo["ipv4"]
    assert isinstance(lo["mtu"], int)
    assert lo["state"] in ("unknown", "up")
    assert facts["interfaces_reason"] == ""
    for interface in facts["interfaces"].values():
        assert interface["speed_mbps"] is None or interface["speed_mbps"] > 0
    assert facts["route"]["interface"] == "lo"
    low, high = facts["ip_local_port_range"]
    assert 0 < low <= high <= 65535
    assert facts["hostname"] == socket.gethostname()
    assert facts["gpus"] or facts["gpus_reason"]


def ansible_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_real_module_through_ansible_ships_module_utils() -> None:
    done = subprocess.run(
        [
            str(BIN / "ansible"),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "nccl_facts",
            "-a",
            "route_to=127.0.0.1 query_python=false",
            "--check",
        ],
        cwd=ROOT,
        # The project prints YAML for people; this test reads the result as JSON.
        env={**ansible_env(), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.split("=>", 1)[1])
    facts = result["ansible_facts"]["nccl"]
    assert facts["route"]["interface"] == "lo"
    assert "lo" in facts["interfaces"]


def test_ansible_doc_renders_the_module() -> None:
    done = subprocess.run(
        [str(BIN / "ansible-doc"), "-M", "library", "nccl_facts"],
        cwd=ROOT,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for word in ("route_to", "query_python", "nvidia_smi", "gpus_reason", "check_mode"):
        assert word in done.stdout, word
