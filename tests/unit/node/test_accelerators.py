# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Ascend NPUs and Intel XPUs: npu-smi info (transcribed recordings), the facts module's hook,
nccl_backend: auto per host (core/preflight/backend_checks.py) and the HCCL variables of
nccl.env."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from ansible.module_utils.nccl_preflight.node.accel_facts import (
    intel_gpu_on_pci,
    parse_npu_smi_board,
    parse_npu_smi_info,
    read_npus,
    read_xpus,
    xpus_of_probe,
)
from ansible.module_utils.nccl_preflight.node.facts import NO_INTEL_GPU

from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice
from tests.builders.env_role import spark
from tests.builders.facts import FakeNode, facts_of, fixture, use_node
from tests.module_exit import ModuleExit as Exit
from tests.playbook_run import ROOT

NPU_SMI = "/usr/local/sbin/npu-smi"


class NpuNode(FakeNode):
    """A node with Ascend's npu-smi (answers `timeout -k 5 60 npu-smi info` from a recording,
    `timeout -k 5 20 npu-smi info -t board -i <NPU>` from boards, else rc 2)."""

    def __init__(self, recording: str) -> None:
        super().__init__()
        self.tools["npu-smi"] = NPU_SMI
        self.npu = (0, fixture(recording), "")
        self.boards: dict[str, tuple[int, str, str]] = {}

    def run_command(self, argv: list[str], **kwargs: object) -> tuple[int, str, str]:
        if argv[:4] == ["timeout", "-k", "5", "60"] and argv[4] == NPU_SMI:
            self.calls.append(list(argv))
            assert argv[5:] == ["info"]
            return self.npu
        if argv[:4] == ["timeout", "-k", "5", "20"] and argv[4] == NPU_SMI:
            self.calls.append(list(argv))
            assert argv[5:9] == ["info", "-t", "board", "-i"]
            return self.boards.get(argv[9], (2, "", f"board {argv[9]} not recorded\n"))
        return super().run_command(argv, **kwargs)


# --- npu-smi info, transcribed (tests/fixtures/README.md, npu-smi/) ------------------------------


def test_910b2_has_one_chip_per_card() -> None:
    parsed = parse_npu_smi_info(fixture("npu-smi/910b2-info.txt"))
    assert parsed["version"] == "25.2.0"
    assert parsed["chips"] == [
        {
            "npu": 0,
            "chip": 0,
            "phy_id": None,
            "name": "910B2",
            "health": "OK",
            "bus_id": "0000:C1:00.0",
            "hbm_used_mb": 3382,
            "hbm_total_mb": 65536,
        },
        {
            "npu": 1,
            "chip": 0,
            "phy_id": None,
            "name": "910B2",
            "health": "OK",
            "bus_id": "0000:C2:00.0",
            "hbm_used_mb": 3381,
            "hbm_total_mb": 65536,
        },
    ]


def test_atlas_a3_cards_have_two_chips_each_numbered_by_phy_id() -> None:
    parsed = parse_npu_smi_info(fixture("npu-smi/ascend910-a3-info.txt"))
    assert parsed["version"] == "25.2.1"
    chips = [(c["npu"], c["chip"], c["phy_id"], c["bus_id"]) for c in parsed["chips"]]
    assert chips == [
        (0, 0, 0, "0000:9D:00.0"),
        (0, 1, 1, "0000:9F:00.0"),
        (1, 0, 2, "0000:99:00.0"),
    ]
    assert {c["name"] for c in parsed["chips"]} == {"Ascend910"}


def test_npu_smi_without_chip_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="no NPU chip rows"):
        parse_npu_smi_info("dcmi module initialize failed. ret is -8005\n")


# --- the facts module -----------------------------------------------------------------------------


def test_facts_list_the_npus_of_npu_smi(
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
    run: Callable[..., Exit],
) -> None:
    node = use_node(monkeypatch, NpuNode("npu-smi/910b2-info.txt"), sysfs)
    del node.tools["nvidia-smi"]
    facts = facts_of(run(query_python=False, query_xpu=True))
    acc = facts["accelerators"]
    assert [c["bus_id"] for c in acc["npus"]] == ["0000:C1:00.0", "0000:C2:00.0"]
    assert acc["npus_reason"] == "" and acc["npu_smi_version"] == "25.2.0"
    # NPUs found: torch is not asked for XPUs (no Python started)
    assert acc["xpus_reason"] == "not asked: GPUs or NPUs found"
    assert not any("-c" in c for c in node.calls)
    choice = nccl_backend_choice(facts)
    assert choice["backend"] == "hccl" and choice["devices"] == 2
    assert choice["reason"] == (
        "2 Ascend NPU chip(s) on 2 card(s) (npu-smi 25.2.0: 2 x 910B2): hccl"
    )


def test_board_recordings_give_the_firmware_and_na_is_unknown() -> None:
    board = parse_npu_smi_board(fixture("npu-smi/910-board-info.txt"))
    assert board["Software Version"] == "23.0.5" and board["Firmware Version"] == "7.1.0.7.220"
    assert board["Compatibility"] == "OK" and board["PCIe Bus Info"] == "0000:61:00.0"
    chip = parse_npu_smi_board(fixture("npu-smi/910-board-chip-info.txt"))
    assert chip["Chip ID"] == "0" and chip["Firmware Version"] == "7.1.0.7.220"
    assert chip["VDie ID"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    small = parse_npu_smi_board(fixture("npu-smi/atlas200ia2-board-info.txt"))
    assert small["Firmware Version"] == "7.1.0.4.218" and "Compatibility" not in small
    with pytest.raises(ValueError, match="no 'NPU ID"):
        parse_npu_smi_board(fixture("npu-smi/910b2-info.txt"))


def test_facts_read_each_cards_firmware_once_and_say_why_one_is_unknown(
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
    run: Callable[..., Exit],
) -> None:
    node = use_node(monkeypatch, NpuNode("npu-smi/ascend910-a3-info.txt"), sysfs)
    node.boards["0"] = (0, fixture("npu-smi/910-board-info.txt"), "")
    na = fixture("npu-smi/910-board-info.txt").replace("7.1.0.7.220", "NA")
    node.boards["1"] = (0, na, "")
    acc = facts_of(run(query_python=False))["accelerators"]
    # NPU 0 has two chips, NPU 1 one: one board call per card
    board_calls = [c[5:] for c in node.calls if "board" in c]
    assert board_calls == [["info", "-t", "board", "-i", "0"], ["info", "-t", "board", "-i", "1"]]
    assert [(c["npu"], c["chip"], c["firmware_version"]) for c in acc["npus"]] == [
        (0, 0, "7.1.0.7.220"),
        (0, 1, "7.1.0.7.220"),
        (1, 0, None),
    ]
    assert acc["npu_firmware_reason"] == (
        f"{NPU_SMI} info -t board -i 1 prints no Firmware Version (NA: not root?)"
    )


def test_a_board_query_that_fails_is_the_firmware_reason() -> None:
    calls: list[list[str]] = []

    def run_double(argv: list[str]) -> tuple[int, str, str]:
        calls.append(argv[5:])
        if argv[5:] == ["info"]:
            return 0, fixture("npu-smi/910b2-info.txt"), ""
        return 2, "", "npu-smi test double: not recorded\n"

    got = read_npus(run_double, NPU_SMI, "npu-smi")
    assert [c["firmware_version"] for c in got["npus"]] == [None, None]
    assert got["npu_firmware_reason"] == (
        f"{NPU_SMI} info -t board -i 0 failed (rc=2): npu-smi test double: not recorded; "
        "the other 1 card(s) were not asked"
    )
    assert calls == [["info"], ["info", "-t", "board", "-i", "0"]]  # none after a failure


def test_npu_smi_that_fails_is_a_reason(
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
    run: Callable[..., Exit],
) -> None:
    node = use_node(monkeypatch, NpuNode("npu-smi/910b2-info.txt"), sysfs)
    node.npu = (255, "", "dcmi module initialize failed. ret is -8005\n")
    acc = facts_of(run(query_python=False))["accelerators"]
    assert acc["npus"] == []
    assert acc["npus_reason"] == (
        f"{NPU_SMI} info failed (rc=255): dcmi module initialize failed. ret is -8005"
    )


def test_without_npu_smi_nothing_runs_and_the_reason_says_so(
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
    run: Callable[..., Exit],
) -> None:
    node = use_node(monkeypatch, FakeNode(), sysfs)
    acc = facts_of(run(query_python=False))["accelerators"]
    assert acc["npus_reason"] == "npu-smi not found on PATH; no Ascend driver tools here"
    assert acc["xpus_reason"] == "query_xpu is false"
    assert not any("npu-smi" in " ".join(c) for c in node.calls)


def test_the_xpu_probe_runs_the_real_torch_here_and_finds_no_xpu() -> None:
    def run_real(argv: list[str]) -> tuple[int, str, str]:
        import subprocess

        done = subprocess.run(argv, capture_output=True, text=True, timeout=150, check=False)
        return done.returncode, done.stdout, done.stderr

    found = read_xpus(run_real, sys.executable)
    assert found["xpus"] == [] and found["torch_npu_version"] is None
    assert found["xpus_reason"].startswith("torch 2.13.0+cpu sees no XPU")


# --- nccl_backend: auto, per host ---------------------------------------------------------------


def test_auto_explains_every_choice() -> None:
    gpus = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    assert nccl_backend_choice(gpus) == {
        "backend": "nccl",
        "reason": "8 NVIDIA GPU(s) (nvidia-smi: 8 x NVIDIA H100 80GB HBM3): nccl",
        "devices": 8,
    }
    xpus = {"accelerators": {"xpus": [{"index": 0, "name": "Intel(R) Data Center GPU Max 1550"}]}}
    assert nccl_backend_choice(xpus)["backend"] == "xccl"
    none = {
        "gpus_reason": "nvidia-smi not found on PATH",
        "accelerators": {"npus_reason": "npu-smi not found on PATH", "xpus_reason": "no XPU"},
    }
    assert nccl_backend_choice(none) == {
        "backend": "gloo",
        "reason": "no NVIDIA GPU (nvidia-smi not found on PATH); no Ascend NPU (npu-smi not "
        "found on PATH); no Intel XPU (no XPU): gloo on the CPU",
        "devices": 0,
    }
    assert nccl_backend_choice(gpus, "gloo") == {
        "backend": "gloo",
        "reason": "nccl_backend is gloo",
        "devices": 8,
    }


def test_nccl_env_templates_hccl_variables_per_host(tmp_path: Path) -> None:
    """The real nccl_env role: two Ascend hosts on differently named fabric ports."""
    from tests.builders import env_role

    npus = parse_npu_smi_info(fixture("npu-smi/910b2-info.txt"))["chips"]
    facts = {}
    for host, ifname, addr in (
        ("spark-1", "enp1s0f0np0", "192.168.100.10"),
        ("spark-2", "enp1s0f1np1", "192.168.100.11"),
    ):
        facts[host] = {**spark(ifname, addr, "10.20.0.5"), "gpus": [], "gpus_reason": "none"}
        facts[host]["accelerators"] = {"npus": npus, "npu_smi_version": "25.2.0"}
    proc = run_role(tmp_path, facts, env_role)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    for host, ifname, addr in (
        ("spark-1", "enp1s0f0np0", "192.168.100.10"),
        ("spark-2", "enp1s0f1np1", "192.168.100.11"),
    ):
        path = env_role.report_env(tmp_path, host)
        env = env_role.read_env(path)
        assert env["HCCL_SOCKET_IFNAME"] == ifname and env["HCCL_IF_IP"] == addr
        assert env["NPROC_PER_NODE"] == "2"  # the NPU chips, as GPUs are counted
        assert "# Backend hccl (the master's choice; nccl_backend auto). This host: hccl, 2 " in (
            path.read_text()
        )


def run_role(tmp_path: Path, facts: dict, env_role) -> object:
    """env_role.run_playbook (tests/builders/env_role.py) with these facts and nccl_backend auto."""
    original = env_role.spark
    by_addr = {"192.168.100.10": facts["spark-1"], "192.168.100.11": facts["spark-2"]}

    def patched(ifname: str, addr: str, mgmt: str) -> dict:
        return by_addr.get(addr) or original(ifname, addr, mgmt)

    env_role.spark = patched
    try:
        return env_role.run_playbook(
            tmp_path, {"nccl_backend": "auto"}, hostfile="spark-1\nspark-2\n"
        )
    finally:
        env_role.spark = original


def test_fixture_readme_names_the_npu_recordings() -> None:
    readme = (ROOT / "tests" / "fixtures" / "README.md").read_text()
    for name in os.listdir(ROOT / "tests" / "fixtures" / "npu-smi"):
        assert f"npu-smi/{name}" in readme, name
    assert "npu-smi/ — `npu-smi info`, transcribed" in readme


def test_at_most_16_cards_are_asked_for_their_firmware() -> None:
    from ansible.module_utils.nccl_preflight.node.accel_facts import read_npu_firmware

    asked: list[str] = []

    def run_board(argv: list[str]) -> tuple[int, str, str]:
        asked.append(argv[-1])
        return 0, fixture("npu-smi/910-board-info.txt"), ""

    firmware, reason = read_npu_firmware(run_board, NPU_SMI, list(range(20)))
    assert asked == [str(i) for i in range(16)]
    assert [firmware[i] for i in (0, 15, 16)] == ["7.1.0.7.220", "7.1.0.7.220", None]
    assert reason == "only the first 16 of 20 NPU cards were asked"


STANDIN_TORCH_XPU = '''"""TEST DOUBLE (tests/unit/node/test_accelerators.py): a torch, two XPUs."""
__version__ = "2.13.0+xpu.standin"


class xpu:  # noqa: N801 - torch.xpu's name
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def device_count():
        return 2

    @staticmethod
    def get_device_name(index):
        return "Intel(R) Data Center GPU Max 1550"
'''


def test_the_xpu_probe_finds_the_xpus_of_a_stand_in_torch_and_auto_explains_xccl(
    tmp_path: Path,
) -> None:
    """The real probe in a real Python, whose torch is a stand-in (written here, a test double)
    with torch.xpu seeing two XPUs: the facts list them and auto chooses xccl saying why."""
    import subprocess

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(STANDIN_TORCH_XPU)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def run_standin(argv: list[str]) -> tuple[int, str, str]:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=150, check=False, env=env
        )
        return done.returncode, done.stdout, done.stderr

    found = read_xpus(run_standin, sys.executable)
    name = "Intel(R) Data Center GPU Max 1550"
    assert found == {
        "xpus": [{"index": 0, "name": name}, {"index": 1, "name": name}],
        "xpus_reason": "",
        "torch_npu_version": None,
    }
    facts = {
        "gpus_reason": "nvidia-smi not found on PATH",
        "accelerators": {"npus_reason": "npu-smi not found on PATH", **found},
    }
    assert nccl_backend_choice(facts) == {
        "backend": "xccl",
        "reason": f"2 Intel XPU(s) (torch.xpu: 2 x {name}): xccl",
        "devices": 2,
    }


def test_the_xpu_facts_come_from_the_preflight_probe_and_its_failure_is_said() -> None:
    """One torch probe (nccl_parse.PYTHON_PROBE) answers the XPU question and the pre-flight's
    versions: nccl_facts reads the XPUs from the run the listener then keeps. A run that failed
    (no JSON line) is said with its rc and its output's tail; a run of another probe is too."""
    failed = xpus_of_probe(1, "", "Segmentation fault", sys.executable)
    assert failed["xpus"] == [] and "failed (rc=1): Segmentation fault" in failed["xpus_reason"]
    other = xpus_of_probe(0, '{"torch_version": "2.13.0"}', "", sys.executable)
    assert other["xpus"] == [] and "-c <torch.xpu probe> failed (rc=0)" in other["xpus_reason"]
    missing = json.dumps(
        {"torch_version": None, "xpu_names": [], "xpu_reason": "ModuleNotFoundError: torch"}
    )
    assert xpus_of_probe(0, missing, "", "/usr/bin/python3")["xpus_reason"] == (
        "torch is not importable by /usr/bin/python3: ModuleNotFoundError: torch"
    )


# --- the XPU question only where an Intel GPU is on the PCI bus --------------------------------

# vendor and class of each device, as sysfs gives them. This machine's bus (recorded here,
# 2026-11-26: an AMD EPYC VM: Intel host bridge 0x0600, virtio devices) and an Intel Data Center
# GPU Max 1550 (transcribed from lspci of a Max node as Intel's docs print it: "Display
# controller [0380]: Intel Corporation Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]
# [8086:0bd5]").
THIS_MACHINE = {
    "0000:00:00.0": ("0x8086", "0x060000"),
    "0000:00:02.0": ("0x1af4", "0x018000"),
    "0000:00:03.0": ("0x1af4", "0x020000"),
}
MAX_1550 = {"0000:29:00.0": ("0x8086", "0x038000")}


def with_pci(sysfs_root: Path, devices: dict[str, tuple[str, str]]) -> Path:
    for address, (vendor, klass) in devices.items():
        device = sysfs_root / "sys" / "bus" / "pci" / "devices" / address
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text(klass + "\n")
    return sysfs_root


def test_intel_gpu_on_pci_needs_an_intel_device_of_the_display_class(tmp_path: Path) -> None:
    assert intel_gpu_on_pci(str(with_pci(tmp_path / "a", THIS_MACHINE) / "sys")) is False
    both = with_pci(tmp_path / "b", {**THIS_MACHINE, **MAX_1550})
    assert intel_gpu_on_pci(str(both / "sys")) is True
    # no bus to read (a container without sysfs): unknown, so torch is asked
    assert intel_gpu_on_pci(str(tmp_path / "none" / "sys")) is None


@pytest.mark.parametrize(
    ("devices", "asked"), [(THIS_MACHINE, False), ({**THIS_MACHINE, **MAX_1550}, True), ({}, True)]
)
def test_torch_is_asked_for_xpus_only_where_an_intel_gpu_may_be(
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
    run: Callable[..., Exit],
    devices: dict[str, tuple[str, str]],
    asked: bool,
) -> None:
    node = use_node(monkeypatch, FakeNode(), with_pci(sysfs, devices))
    del node.tools["nvidia-smi"]
    acc = facts_of(run(query_python=False, query_xpu=True))["accelerators"]
    assert any("-c" in c for c in node.calls) is asked
    if not asked:  # no torch import in the facts call: the pre-flight's probe runs apart
        assert acc["xpus"] == [] and acc["xpus_reason"] == NO_INTEL_GPU
        assert nccl_backend_choice({"accelerators": acc})["backend"] == "gloo"
