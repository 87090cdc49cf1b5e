# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Accelerators other than NVIDIA GPUs: Ascend NPUs (npu-smi) and Intel XPUs (torch.xpu).

Read by library/nccl_facts.py into ``ansible_facts.nccl.accelerators`` (docs/design.md,
"Accelerator facts"); the parsing is pure and takes text, so tests feed it the transcribed
recordings of tests/fixtures/npu-smi/.

``npu-smi info`` prints one table row pair per chip (an Atlas A3 "Ascend910" card has two
chips, each its own device for torch_npu, numbered by Phy-ID; a 910B card has one). Each
row is `| NPU Name | Health | Power Temp Hugepages |`, then `| Chip [Phy-ID] | Bus-Id |
AICore Memory-Usage HBM-Usage |` (tests/fixtures/npu-smi/ has whole tables).

The firmware is not in that table: ``npu-smi info -t board -i <NPU>`` prints it per card, as
`Key : Value` lines ("Software Version" is the driver, "Firmware Version" the firmware; Huawei's
reference, tests/fixtures/npu-smi/*-board-*.txt). One call per card (20 s each at most), at
most MAX_BOARDS, none after the first that fails.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from .parse import PYTHON_PROBE

VERSION_RE = re.compile(r"npu-smi\s+(\S+)\s+Version:\s+(\S+)")
BUS_RE = re.compile(r"^[0-9A-Fa-fx]{4,8}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.[0-7]$")
USAGE_RE = re.compile(r"(\d+)\s*/\s*(\d+)\s*$")
FIELD_RE = re.compile(r"^\s*([A-Za-z][^:]*?)\s*:\s*(.*?)\s*$")
# npu-smi prints NA where it cannot read a field (the Firmware Version of a non-root user on
# some products, per its reference).
NOT_READ = {"", "NA", "N/A", "UNKNOWN"}
MAX_BOARDS = 16


def _cells(line: str) -> list[str] | None:
    """'| a | b | c |' -> ['a', 'b', 'c']; None for borders and other lines."""
    text = line.strip()
    if not (text.startswith("|") and text.endswith("|")):
        return None
    cells = [c.strip() for c in text[1:-1].split("|")]
    return cells if len(cells) == 3 else None


def parse_npu_smi_info(text: str) -> dict[str, Any]:
    """{version, chips: [{npu, chip, phy_id, name, health, bus_id, hbm_used_mb,
    hbm_total_mb}]} from `npu-smi info`. ValueError when no chip row is found."""
    match = VERSION_RE.search(text)
    chips: list[dict[str, Any]] = []
    pending: dict[str, Any] | None = None
    for line in text.splitlines():
        cells = _cells(line)
        if cells is None or cells[0].startswith(("NPU ", "Chip")):
            continue
        first = cells[0].split()
        if pending is None and len(first) >= 2 and first[0].isdigit() and cells[1]:
            pending = {"npu": int(first[0]), "name": " ".join(first[1:]), "health": cells[1]}
        elif pending is not None and first and first[0].isdigit() and BUS_RE.match(cells[1]):
            usage = USAGE_RE.search(cells[2])
            chips.append(
                {
                    "npu": pending["npu"],
                    "chip": int(first[0]),
                    "phy_id": int(first[1]) if len(first) > 1 and first[1].isdigit() else None,
                    "name": pending["name"],
                    "health": pending["health"],
                    "bus_id": cells[1],
                    "hbm_used_mb": int(usage.group(1)) if usage else None,
                    "hbm_total_mb": int(usage.group(2)) if usage else None,
                }
            )
            pending = None
    if not chips:
        raise ValueError("no NPU chip rows (NPU/Name/Health, then Chip/Bus-Id) in npu-smi info")
    return {"version": match.group(2) if match else None, "chips": chips}


def parse_npu_smi_board(text: str) -> dict[str, str]:
    """{field: value} from `npu-smi info -t board -i <NPU> [-c <chip>]`; ValueError without
    an "NPU ID" line."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = FIELD_RE.match(line)
        if match:
            fields.setdefault(match.group(1), match.group(2))
    if "NPU ID" not in fields:
        raise ValueError("no 'NPU ID : <n>' line in npu-smi info -t board")
    return fields


def board_firmware(fields: dict[str, str]) -> str | None:
    """The Firmware Version of a parsed board, None where npu-smi printed none or NA."""
    value = fields.get("Firmware Version", "")
    return None if value.upper() in NOT_READ else value


def read_npu_firmware(
    run: Runner, npu_smi: str, boards: list[int]
) -> tuple[dict[int, str | None], str]:
    """({NPU: firmware or None}, reason) from one `npu-smi info -t board -i <NPU>` per card;
    the reason says why any card's firmware is unknown ("" when every one was read)."""
    firmware: dict[int, str | None] = {npu: None for npu in boards}
    problems = []
    for index, npu in enumerate(boards[:MAX_BOARDS]):
        argv = [npu_smi, "info", "-t", "board", "-i", str(npu)]
        rc, out, err = run(["timeout", "-k", "5", "20", *argv])
        if rc != 0:  # a hang or an error: the next cards would say the same, slower
            problems.append(f"{' '.join(argv)} failed (rc={rc}): {(out + err).strip()[-200:]}")
            if len(boards) > index + 1:
                problems.append(f"the other {len(boards) - index - 1} card(s) were not asked")
            return firmware, "; ".join(problems)
        try:
            firmware[npu] = board_firmware(parse_npu_smi_board(out))
        except ValueError as exc:
            problems.append(f"{' '.join(argv)}: {exc}")
            continue
        if firmware[npu] is None:
            problems.append(f"{' '.join(argv)} prints no Firmware Version (NA: not root?)")
    if len(boards) > MAX_BOARDS:
        problems.append(f"only the first {MAX_BOARDS} of {len(boards)} NPU cards were asked")
    return firmware, "; ".join(problems)


Runner = Callable[[list[str]], tuple[int, str, str]]


def read_npus(run: Runner, npu_smi: str | None, npu_smi_name: str) -> dict[str, Any]:
    """npus (each chip with its card's firmware_version), npus_reason, npu_firmware_reason,
    npu_smi_version from `npu-smi info`, then `npu-smi info -t board -i <NPU>` per card."""
    if npu_smi is None:
        reason = f"{npu_smi_name} not found on PATH; no Ascend driver tools here"
        return _no_npus(reason)
    rc, out, err = run(["timeout", "-k", "5", "60", npu_smi, "info"])
    if rc != 0:
        tail = (out + err).strip()[-300:]
        return _no_npus(f"{npu_smi} info failed (rc={rc}): {tail}")
    try:
        parsed = parse_npu_smi_info(out)
    except ValueError as exc:
        return _no_npus(f"{npu_smi} info: {exc}")
    boards = sorted({chip["npu"] for chip in parsed["chips"]})
    firmware, firmware_reason = read_npu_firmware(run, npu_smi, boards)
    chips = [{**chip, "firmware_version": firmware.get(chip["npu"])} for chip in parsed["chips"]]
    return {
        "npus": chips,
        "npus_reason": "",
        "npu_firmware_reason": firmware_reason,
        "npu_smi_version": parsed["version"],
    }


def _no_npus(reason: str) -> dict[str, Any]:
    return {
        "npus": [],
        "npus_reason": reason,
        "npu_firmware_reason": reason,
        "npu_smi_version": None,
    }


def intel_gpu_on_pci(sys_root: str) -> bool | None:
    """Whether the PCI bus has an Intel device of the display class (vendor 0x8086, class
    0x03xxxx), as every Intel GPU torch.xpu can use is: the Data Center GPU Max series is a
    display controller (0x0380), Arc a VGA controller (0x0300). None when the bus cannot be
    read (no sysfs in a container): then torch is asked."""
    base = os.path.join(sys_root, "bus", "pci", "devices")
    try:
        devices = os.listdir(base)
    except OSError:
        return None
    if not devices:
        return None
    for device in devices:
        try:
            with open(os.path.join(base, device, "vendor"), encoding="ascii") as f:
                vendor = f.read().strip().lower()
            with open(os.path.join(base, device, "class"), encoding="ascii") as f:
                klass = f.read().strip().lower()
        except (OSError, UnicodeError):
            return None
        if vendor == "0x8086" and klass.startswith("0x03"):
            return True
    return False


def read_xpus(run: Runner, python: str | None) -> dict[str, Any]:
    """xpus, xpus_reason, torch_npu_version through the node's torch (a few seconds): one run of
    nccl_parse.PYTHON_PROBE, the pre-flight's torch probe, which reads torch.xpu too."""
    if python is None:
        return {"xpus": [], "xpus_reason": "no Python to ask torch.xpu", "torch_npu_version": None}
    rc, out, err = run(["timeout", "-k", "5", "60", python, "-c", PYTHON_PROBE])
    return xpus_of_probe(rc, out, err, python)


def xpus_of_probe(rc: int, out: str, err: str, python: str) -> dict[str, Any]:
    """xpus, xpus_reason, torch_npu_version from one run of nccl_parse.PYTHON_PROBE (rc, its two
    streams): its xpu_names, xpu_reason, torch_version and npu_version."""
    try:
        probe = json.loads(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else None
    except ValueError:
        probe = None
    if not isinstance(probe, dict) or "xpu_names" not in probe:
        tail = (out + err).strip()[-300:]
        reason = f"{python} -c <torch.xpu probe> failed (rc={rc}): {tail}"
        return {"xpus": [], "xpus_reason": reason, "torch_npu_version": None}
    xpus = [{"index": i, "name": n} for i, n in enumerate(probe["xpu_names"])]
    if probe.get("torch_version") is None:
        reason = f"torch is not importable by {python}: {probe.get('xpu_reason', '')}"
    elif not xpus:
        reason = f"torch {probe['torch_version']} sees no XPU (torch.xpu.is_available() is False)"
    else:
        reason = ""
    return {"xpus": xpus, "xpus_reason": reason, "torch_npu_version": probe.get("npu_version")}
