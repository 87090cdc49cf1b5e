# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/slurm/node_check.py: one node judged alone, on recorded GPU outputs in
process, and `bin/nccl-preflight node-check` end to end on this machine, --drain through a fake
scontrol on PATH that records its argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nccl_preflight.core.preflight.judge import NODE_CHECKS
from nccl_preflight.slurm import node_check
from tests.builders.facts import fixture
from tests.builders.node_check import (
    HEALTHY,
    MISSING_IF,
    FakeRunner,
    answer_as_h200,
    calls,
    node_check_cmd,
)
from tests.recorded_gpu import Machine

PEER_CHECKS = {"mtu", "master_addr", "master_port_free", "tcp_master_port", "tcp_ring", "clock"}


def recorded_probe(name: str):  # type: ignore[no-untyped-def]
    out = fixture(f"torch/{name}")
    return lambda python, timeout: {"rc": 0, "stdout": out, "stderr": "", "error": ""}


GPU_CONFIG = {"nccl_fabric_cidr": "192.168.100.0/24", "nccl_backend": "auto"}


def by_check(results: list[dict]) -> dict[str, dict]:
    return {r["check"]: r for r in results}


def test_a_healthy_gpu_node_passes_alone_on_one_machines_recordings(
    gpu_node: FakeRunner,
) -> None:
    answer_as_h200(gpu_node)
    _, results = node_check.check_node(
        GPU_CONFIG, runner=gpu_node, probe=recorded_probe("probe-h200-vm.json")
    )
    found = by_check(results)
    failed = {c: r["message"] for c, r in found.items() if r["status"] == "failed"}
    assert failed == {}
    assert "1 x NVIDIA H200" in found["gpu"]["message"]
    assert found["gpu_memory"]["status"] == "passed"
    assert "torch 2.11.0+cu130" in found["versions"]["message"]
    assert ["/usr/bin/nvidia-smi", "-q"] in gpu_node.calls


def test_a_gpu_node_is_judged_alone_on_recorded_outputs(gpu_node: FakeRunner) -> None:
    host, results = node_check.check_node(
        GPU_CONFIG, runner=gpu_node, probe=recorded_probe("probe-h200-vm.json")
    )
    assert host == "gpu07"
    found = by_check(results)
    assert sorted(r["check"] for r in results) == sorted(NODE_CHECKS)
    assert not PEER_CHECKS & set(found)
    assert found["interface"]["status"] == "passed"
    assert "enp1s0f0np0 is up, address 192.168.100.10, MTU 9000" in found["interface"]["message"]
    assert found["gpu"]["status"] == "passed", found["gpu"]
    assert "8 x NVIDIA H100 80GB HBM3" in found["gpu"]["message"]
    assert found["versions"]["status"] == "passed"
    assert "torch 2.11.0+cu130" in found["versions"]["message"]
    assert "every host" not in found["versions"]["message"]
    assert found["gpu_memory"]["status"] == "passed", found["gpu_memory"]
    assert found["hostname"]["status"] == "passed"  # gpu07.invalid does not resolve: a warning
    assert ["/usr/bin/nvidia-smi", "-q"] in gpu_node.calls


def test_memory_errors_and_a_pinned_version_fail_the_node(gpu_node: FakeRunner) -> None:
    gpu_node_q = fixture("gpu/q-h100x8-ecc-x4.txt")
    plain = gpu_node.run_command

    def run_command(argv: list[str], **kwargs: object) -> tuple[int, str, str]:
        if argv[1:] == ["-q"]:
            gpu_node.calls.append(list(argv))
            return 0, gpu_node_q, ""
        return plain(argv, **kwargs)

    gpu_node.run_command = run_command  # type: ignore[method-assign]
    config = {**GPU_CONFIG, "nccl_expected_versions": {"nccl": "2.27.3"}}
    _, results = node_check.check_node(
        config, runner=gpu_node, probe=recorded_probe("probe-h200-vm.json")
    )
    found = by_check(results)
    assert found["gpu_memory"]["status"] == "failed", found["gpu_memory"]
    assert found["versions"]["status"] == "failed"
    assert "nccl 2.28.9 but nccl_expected_versions pins 2.27.3" in found["versions"]["message"]
    failed = [r for r in results if r["status"] == "failed"]
    reason = node_check.drain_reason(failed, "gpu07")
    assert reason.startswith(f"nccl-preflight: {failed[0]['check']}: ")
    assert "gpu07: " not in reason and "\n" not in reason
    # gpu_visible: the probe's machine (an H200 VM) had one GPU, the nvidia-smi fixture eight.
    assert [r["check"] for r in failed] == ["versions", "gpu_memory", "gpu_pcie", "gpu_visible"]
    assert reason == (
        "nccl-preflight: versions: nccl 2.28.9 but nccl_expected_versions pins 2.27.3 "
        "(+3 more: gpu_memory, gpu_pcie, gpu_visible)"
    )


def killed_probe(python: str, timeout: float) -> dict:
    return {"rc": None, "stdout": "", "stderr": "", "error": "(import torch) ... it was killed"}


@pytest.mark.parametrize(
    ("config", "probe"),
    [
        (GPU_CONFIG, "probe-h200-vm.json"),
        ({**GPU_CONFIG, "nccl_backend": "gloo", "nccl_require_gpu": False}, "probe-h200-vm.json"),
        ({**GPU_CONFIG, "nccl_expected_versions": {"torch": "9.9"}}, "probe-h200-vm.json"),
    ],
)
def test_only_the_torch_checks_need_the_torch_probe(
    gpu_node: FakeRunner, config: dict, probe: str
) -> None:
    """node_check.TORCH_CHECKS: judged with and without the probe's answer, a node's checks
    differ in those alone (a killed probe leaves them undecided: node-check drains on no other
    check for it)."""
    answer_as_h200(gpu_node)
    _, answered = node_check.check_node(config, runner=gpu_node, probe=recorded_probe(probe))
    _, killed = node_check.check_node(config, runner=gpu_node, probe=killed_probe)
    before, after = by_check(answered), by_check(killed)
    changed = {c for c in before if before[c]["status"] != after[c]["status"]}
    assert changed and changed <= node_check.TORCH_CHECKS, changed
    assert set(NODE_CHECKS) >= node_check.TORCH_CHECKS


def test_the_drain_reason_is_one_printable_line_within_bounds() -> None:
    failed = [
        {"check": "interface", "message": "n1: interface fab0 is down\x1b[31m\tred\nline2" * 9},
        {"check": "limits", "message": "n1: memlock 64 KiB"},
        {"check": "gpu_xid", "message": "n1: Xid 79"},
    ]
    reason = node_check.drain_reason(failed, "n1")
    assert reason.startswith("nccl-preflight: interface: interface fab0 is down")
    assert reason.endswith("... (+2 more: limits, gpu_xid)")
    assert len(reason) <= node_check.REASON_MAX
    assert all(c.isprintable() for c in reason)
    line = node_check.finding_line({**failed[0], "status": "failed", "hint": "ip link\nset up"})
    assert "\n" not in line and "\x1b" not in line and line.endswith("[fix: ip link set up]")


# --------------------------------------------------------------------- the command, end to end


def test_a_healthy_node_exits_0_and_drains_nothing(tmp_path: Path, scontrol: Path) -> None:
    done = node_check_cmd(tmp_path, HEALTHY, "--drain", slurmd="node7")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("interface: passed: ")
    assert any(line.startswith("versions: passed: ") for line in lines)
    assert "healthy" in lines[-1]
    assert calls(scontrol) == []


def test_a_failed_check_drains_the_node_with_its_reason(tmp_path: Path, scontrol: Path) -> None:
    done = node_check_cmd(tmp_path, MISSING_IF, "--drain", slurmd="node7")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("interface: failed: ")
    assert "interface nosuch0 does not exist" in done.stdout
    [argv] = calls(scontrol)
    assert argv[:3] == ["update", "nodename=node7", "state=drain"]
    assert argv[3].startswith("reason=nccl-preflight: interface: interface nosuch0 does not exist")
    assert len(argv) == 4 and "\n" not in argv[3]
    assert "drained node7" in done.stderr


def test_drain_without_slurmd_nodename_says_it_does_nothing(tmp_path: Path, scontrol: Path) -> None:
    done = node_check_cmd(tmp_path, MISSING_IF, "--drain")
    assert done.returncode == 1
    assert "--drain does nothing here: SLURMD_NODENAME is not set" in done.stderr
    assert calls(scontrol) == []


def test_without_drain_a_failed_node_is_not_drained(tmp_path: Path, scontrol: Path) -> None:
    done = node_check_cmd(tmp_path, MISSING_IF, "--json", slurmd="node7")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert doc["host"] == "node7" and doc["exit"] == 1 and doc["drain"] is None
    assert {r["check"]: r["status"] for r in doc["results"]}["interface"] == "failed"
    assert calls(scontrol) == []


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (HEALTHY + "nccl_socket_ifnam: eth0\n", "nccl_socket_ifnam"),
        ("nccl_backend: gloo\n", "nccl_socket_ifname and nccl_fabric_cidr are both empty"),
    ],
)
def test_a_refused_config_exits_2_and_drains_nothing(
    tmp_path: Path, scontrol: Path, config: str, said: str
) -> None:
    done = node_check_cmd(tmp_path, config, "--drain", slurmd="node7")
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and "config.yml" in done.stderr
    assert calls(scontrol) == []


def test_the_recorded_gpu_machine_is_judged_as_it_was_there_and_a_missing_ip_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """node/facts.py's own facts of the lent H200 VM (tests/fixtures/gpu/facts-h200-vm.json,
    recorded by tests/device/node_check_gpu.sh) judged alone: its GPU checks pass as node-check
    printed there (gpu/node-check-h200-vm.txt); it has no iproute2, and the interface check says
    so instead of "interface eth0 does not exist; interfaces present: none" (what it said there)."""
    host, results = Machine("h200-vm").node_check(monkeypatch)
    assert host == "vm"
    seen = by_check(results)
    there = {
        line.split(":")[0]: line.split(":")[1].strip()
        for line in fixture("gpu/node-check-h200-vm.txt").splitlines()
        if line.startswith(("gpu", "versions", "limits", "rdma", "nccl_config"))
    }
    assert there and {check: seen[check]["status"] for check in there} == there
    assert seen["gpu"]["status"] == "passed" and "NVIDIA H200" in seen["gpu"]["message"]
    interface = seen["interface"]
    assert interface["status"] == "failed"
    assert "could not be read" in interface["message"] and "iproute2" in interface["message"]
    assert interface["hint"] == "install iproute2 (the ip command) on vm"
