# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pure parsers for the GPU health of a node (library/nccl_facts.py, option gpu_health).

Each function takes the text a tool printed and returns plain, JSON-safe data (string keys,
lists); none of them runs a command. What they read:

- ``nvidia-smi -q``: per GPU the memory errors (ECC, retired pages, remapped rows), the PCIe
  link (generation and width, current and maximum), persistence, MIG and compute modes, the
  performance state, the clock event (throttle) reasons and the NVSwitch fabric state.
- ``nvidia-smi topo -m``: each GPU's relation (PIX, PXB, PHB, NODE, SYS, NV#) to each NIC.
- ``nvidia-smi nvlink -s``: every NVLink of every GPU, up (with its speed) or inactive.
- the kernel log (``dmesg`` or ``journalctl -k``): NVIDIA Xid events and the GPU they name.
- ``dcgmi diag -r N -j``: every diagnostic's result, per GPU where DCGM says which.

Values a device does not report ("N/A", "[N/A]", "Not Supported", as a DGX Spark's GB10 prints
for its unified memory) become None: unknown, never a failure.
"""

from __future__ import annotations

import json
import re

NOT_REPORTED = {"n/a", "[n/a]", "not supported", "[not supported]", "unknown error", ""}

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+)[^)]*\):\s*(\d+)"
)
_FALLEN_RE = re.compile(
    r"NVRM: .*?GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
    r"(?:\.\d)?.*fallen off the bus"
)


def reported(value: str | None) -> str | None:
    """The value, or None when the device does not report it."""
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in NOT_REPORTED else value


def to_int(value: str | None) -> int | None:
    """'16x' -> 16, '5' -> 5, '0 bank(s)' -> 0; None when not a number or not reported."""
    value = reported(value)
    if value is None:
        return None
    match = re.match(r"^(\d+)", value)
    return int(match.group(1)) if match else None


def bus_key(bus_id: str | None) -> str | None:
    """A PCI address in any of nvidia-smi's and the kernel's spellings -> 'dddd:bb:dd'.

    '00000000:53:00.0', '0000:53:00.0', 'PCI:0000:53:00' and '0000:53:00' all give '0000:53:00',
    so a GPU of `nvidia-smi` and an Xid of the kernel log can be matched.
    """
    if not bus_id:
        return None
    text = bus_id.strip().removeprefix("PCI:")
    match = re.match(r"^([0-9A-Fa-f]+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)", text)
    if not match:
        return None
    domain, bus, device = (int(part, 16) for part in match.groups())
    return f"{domain:04x}:{bus:02x}:{device:02x}"


# --------------------------------------------------------------------------- nvidia-smi -q
def _flatten_q(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str]]]]:
    """nvidia-smi -q -> (header {key: value}, [(bus id, {"Section/Sub/Key": value})]).

    Every line is `key : value` or a section title; four spaces per level. A key that has a value
    can still have children (`HW Slowdown : Not Active` above `HW Thermal Slowdown`), so the path
    of every line is the titles and keys above it.
    """
    header: dict[str, str] = {}
    gpus: list[tuple[str, dict[str, str]]] = []
    stack: list[tuple[int, str]] = []
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0 and line.startswith("GPU ") and ":" in line and " : " not in line:
            current = {}
            gpus.append((line[4:].strip(), current))
            stack = []
            continue
        key, sep, value = line.partition(" : ") if " : " in line else (line.rstrip(":"), "", "")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "/".join([name for _, name in stack] + [key])
        if current is None:
            if sep:
                header[key] = value.strip()
        elif sep:
            current[path] = value.strip()
        stack.append((indent, key))
    return header, gpus


def _first(fields: dict[str, str], *paths: str) -> str | None:
    for path in paths:
        if path in fields:
            return fields[path]
    return None


def _sum_counts(fields: dict[str, str], prefix: str, uncorrectable: bool) -> int | None:
    """Sum of the ECC counters under prefix (e.g. 'ECC Errors/Volatile'), one kind.

    Hopper/Ampere name them 'SRAM Uncorrectable Parity', 'DRAM Uncorrectable', ...; Volta and
    older group them as 'Single Bit/Total' and 'Double Bit/Total'.
    """
    total, seen = 0, False
    for path, value in fields.items():
        if not path.startswith(prefix + "/"):
            continue
        rest = path[len(prefix) + 1 :]
        if "Threshold" in rest or "Sources" in rest:
            continue
        if "/" in rest:  # Volta: Single Bit/Total, Double Bit/Total
            group, _, leaf = rest.partition("/")
            if leaf != "Total":
                continue
            is_unc = group.startswith("Double")
        else:
            is_unc = "Uncorrectable" in rest
            if not is_unc and "Correctable" not in rest:
                continue
        count = to_int(value)
        if count is None or is_unc != uncorrectable:
            continue
        total, seen = total + count, True
    return total if seen else None


def _yes(value: str | None) -> bool | None:
    value = reported(value)
    return None if value is None else value.lower() in ("yes", "active", "enabled")


def _clock_reasons(fields: dict[str, str]) -> dict[str, bool | None]:
    """Clocks Event Reasons (driver 535+) or Clocks Throttle Reasons (older), by leaf name."""
    out: dict[str, bool | None] = {}
    for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
        for path, value in fields.items():
            if path.startswith(section + "/"):
                out[path.rsplit("/", 1)[-1]] = _yes(value)
    return out


def _gpu_from_q(position: int, bus_id: str, f: dict[str, str]) -> dict:
    link = "PCI/GPU Link Info"
    return {
        "position": position,
        "bus_id": bus_id,
        "bus_key": bus_key(bus_id),
        "name": reported(f.get("Product Name")),
        "uuid": reported(f.get("GPU UUID")),
        "persistence_mode": reported(f.get("Persistence Mode")),
        "mig_mode": reported(f.get("MIG Mode/Current")),
        "compute_mode": reported(f.get("Compute Mode")),
        "performance_state": reported(f.get("Performance State")),
        "pcie": {
            "gen_max": to_int(f.get(f"{link}/PCIe Generation/Max")),
            "gen_current": to_int(f.get(f"{link}/PCIe Generation/Current")),
            "gen_device_max": to_int(f.get(f"{link}/PCIe Generation/Device Max")),
            "gen_host_max": to_int(f.get(f"{link}/PCIe Generation/Host Max")),
            "width_max": to_int(f.get(f"{link}/Link Width/Max")),
            "width_current": to_int(f.get(f"{link}/Link Width/Current")),
        },
        "ecc_mode": reported(f.get("ECC Mode/Current")),
        "ecc": {
            "volatile_uncorrectable": _sum_counts(f, "ECC Errors/Volatile", True),
            "volatile_correctable": _sum_counts(f, "ECC Errors/Volatile", False),
            "aggregate_uncorrectable": _sum_counts(f, "ECC Errors/Aggregate", True),
            "aggregate_correctable": _sum_counts(f, "ECC Errors/Aggregate", False),
        },
        "retired_pages": {
            "single_bit": to_int(_first(f, "Retired Pages/Single Bit ECC")),
            "double_bit": to_int(_first(f, "Retired Pages/Double Bit ECC")),
            "pending": _yes(
                _first(f, "Retired Pages/Pending Page Blacklist", "Retired Pages/Pending")
            ),
        },
        "remapped_rows": {
            "correctable": to_int(f.get("Remapped Rows/Correctable Error")),
            "uncorrectable": to_int(f.get("Remapped Rows/Uncorrectable Error")),
            "pending": _yes(f.get("Remapped Rows/Pending")),
            "failure": _yes(f.get("Remapped Rows/Remapping Failure Occurred")),
        },
        "clock_reasons": _clock_reasons(f),
        "fabric_state": reported(f.get("Fabric/State")),
        "fabric_status": reported(f.get("Fabric/Status")),
    }


def parse_smi_query(text: str) -> dict:
    """`nvidia-smi -q` -> {driver_version, cuda_version, gpus: [per GPU, in its order]}.

    Raises ValueError when the text holds no GPU section (not nvidia-smi -q output).
    """
    header, blocks = _flatten_q(text)
    if not blocks:
        raise ValueError("no 'GPU <bus id>' section in the nvidia-smi -q output")
    return {
        "driver_version": reported(header.get("Driver Version")),
        "cuda_version": reported(header.get("CUDA Version")),
        "gpus": [_gpu_from_q(i, bus, fields) for i, (bus, fields) in enumerate(blocks)],
    }


# --------------------------------------------------------------------------- topo -m
def parse_topology(text: str) -> dict:
    """`nvidia-smi topo -m` -> {nics: [names], gpus: [{index, nics: {name: relation}}]}.

    Newer drivers name the NIC columns NIC0.. and list the real names under "NIC Legend:";
    older ones use the device names (mlx5_0) as column titles. Raises ValueError without a
    GPU0 header row.
    """
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in text.splitlines()]
    header_at = next((i for i, ln in enumerate(lines) if ln.split()[:1] == ["GPU0"]), None)
    if header_at is None:
        raise ValueError("no header row starting with GPU0 in the nvidia-smi topo -m output")
    columns: list[str] = []
    for token in lines[header_at].split():
        if token in ("CPU", "NUMA", "GPU") or token.startswith("Affinity"):
            break
        columns.append(token)
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", text, re.MULTILINE))
    names = {c: legend.get(c, c) for c in columns}
    nic_columns = [c for c in columns if not re.fullmatch(r"GPU\d+", c)]
    gpus = []
    for line in lines[header_at + 1 :]:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]):
            continue
        cells = dict(zip(columns, tokens[1 : 1 + len(columns)], strict=False))
        gpus.append(
            {
                "index": int(tokens[0][3:]),
                "nics": {names[c]: cells[c] for c in nic_columns if c in cells},
            }
        )
    return {"nics": [names[c] for c in nic_columns], "gpus": gpus}


# --------------------------------------------------------------------------- nvlink -s
def parse_nvlink_status(text: str) -> list[dict]:
    """`nvidia-smi nvlink -s` -> [{index, name, uuid, links: [{link, up, gbps}], all_inactive}].

    A GPU without NVLink prints nothing (or only its title): links is then []. "all links are
    inactive" (NVML cannot even count them) sets all_inactive.
    """
    gpus: list[dict] = []
    for line in text.splitlines():
        title = re.match(r"^GPU (\d+): (.*?)(?: \(UUID: (.*)\))?\s*$", line)
        if title:
            gpus.append(
                {
                    "index": int(title.group(1)),
                    "name": title.group(2),
                    "uuid": title.group(3),
                    "links": [],
                    "all_inactive": False,
                }
            )
            continue
        if not gpus:
            continue
        link = re.match(r"^\s*Link (\d+): (.*?)\s*$", line)
        if link:
            speed = re.match(r"^([\d.]+) GB/s", link.group(2))
            gpus[-1]["links"].append(
                {
                    "link": int(link.group(1)),
                    "up": speed is not None,
                    "gbps": float(speed.group(1)) if speed else None,
                }
            )
        elif "all links are inactive" in line:
            gpus[-1]["all_inactive"] = True
    return gpus


# --------------------------------------------------------------------------- kernel log
def parse_xids(text: str, limit: int = 200) -> list[dict]:
    """NVIDIA Xid events in a kernel log -> [{xid, bus, line}], oldest first, at most limit.

    Also a GPU that "has fallen off the bus" without an Xid line (some drivers print only the
    NVRM message): it is reported as Xid 79, as gpud does.
    """
    events: list[dict] = []
    for line in text.splitlines():
        match = _XID_RE.search(line)
        if match:
            events.append({"xid": int(match.group(2)), "bus": bus_key(match.group(1))})
        elif "fallen off the bus" in line and (fallen := _FALLEN_RE.search(line)):
            events.append({"xid": 79, "bus": bus_key(fallen.group(1))})
        else:
            continue
        events[-1]["line"] = line.strip()[:300]
    return events[-limit:]


# --------------------------------------------------------------------------- dcgmi diag -j
def _dcgm_info(result: dict) -> str:
    info = result.get("warnings") or result.get("info") or result.get("warning") or ""
    if isinstance(info, list):
        info = "; ".join(
            str(i.get("warning", i.get("message", i))) if isinstance(i, dict) else str(i)
            for i in info
        )
    return str(info)[:300]


def parse_dcgm_diag(text: str) -> list[dict]:
    """`dcgmi diag -r N -j` -> [{category, test, gpu, status, info}] (status: Pass, Fail, ...).

    DCGM 3 names the root "DCGM GPU Diagnostic" and gives per-GPU results (gpu_id); DCGM 4 names
    it "DCGM Diagnostic", may give results per entity (entity_id) and a test_summary per test
    (facebookresearch/gcm#38). Raises ValueError when the text is not that JSON.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"dcgmi diag -j did not print JSON: {exc}") from None
    root = None
    if isinstance(data, dict):
        root = data.get("DCGM GPU Diagnostic") or data.get("DCGM Diagnostic")
    if not isinstance(root, dict):
        raise ValueError("no 'DCGM GPU Diagnostic' or 'DCGM Diagnostic' object in dcgmi's JSON")
    out: list[dict] = []
    for category in root.get("test_categories") or []:
        for test in category.get("tests") or []:
            results = test.get("results") or [test.get("test_summary") or {}]
            for result in results:
                gpu = result.get("gpu_id", result.get("entity_id"))
                out.append(
                    {
                        "category": str(category.get("category") or ""),
                        "test": str(test.get("name") or ""),
                        "gpu": None if gpu is None else str(gpu),
                        "status": str(result.get("status") or "Unknown"),
                        "info": _dcgm_info(result),
                    }
                )
    return out
