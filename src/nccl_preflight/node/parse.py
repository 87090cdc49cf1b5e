# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Pure parsing helpers for library/nccl_facts.py.

Each function takes the text a tool printed (or a filesystem root for sysfs/procfs readers) and
returns plain data; none of them runs a command. They raise ValueError on output they cannot
read, with a message that says what was wrong, so the module can turn it into a reason string.
"""

from __future__ import annotations

import csv
import json
import os

# nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits
NVIDIA_SMI_FIELDS = ("index", "name", "driver_version", "memory.total", "uuid", "pci.bus_id")

# Values nvidia-smi prints when a field is not available on a device (GB10 prints "[N/A]" for
# memory.total: its memory is unified with the CPU's).
_NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "[Unknown Error]", ""}

# Run as `python -c PYTHON_PROBE` with the node's Python: prints one JSON object, never fails
# because torch (or CUDA, or torch_npu) is missing - it says why in "reason" instead. It also
# reads torch.xpu (xpu_names, xpu_reason): the XPU facts come from this same probe
# (src/nccl_preflight/node/accel_facts.py.read_xpus), so one torch import serves both in nccl_facts.
PYTHON_PROBE = r"""
import json, platform, sys
out = {"executable": sys.executable, "version": platform.python_version(),
       "torch_version": None, "cuda_available": False, "cuda_version": None,
       "nccl_version": None, "device_count": 0, "npu_available": False,
       "npu_version": None, "reason": "",
       "xpu_names": [], "xpu_reason": ""}
reasons = []
try:
    import torch
except Exception as exc:
    reasons.append("torch is not importable: %s: %s" % (type(exc).__name__, exc))
    out["xpu_reason"] = "%s: %s" % (type(exc).__name__, exc)
    torch = None
if torch is not None:
    out["torch_version"] = str(torch.__version__)
    try:
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and xpu.is_available():
            out["xpu_names"] = [str(xpu.get_device_name(i)) for i in range(int(xpu.device_count()))]
    except Exception as exc:
        out["xpu_reason"] = "%s: %s" % (type(exc).__name__, exc)
    out["cuda_version"] = getattr(getattr(torch, "version", None), "cuda", None)
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["device_count"] = int(torch.cuda.device_count())
    except Exception as exc:
        reasons.append("torch.cuda failed: %s: %s" % (type(exc).__name__, exc))
    try:
        version = torch.cuda.nccl.version()
        if isinstance(version, tuple):
            version = ".".join(str(part) for part in version)
        out["nccl_version"] = str(version)
    except Exception as exc:
        if out["cuda_version"]:
            reasons.append("NCCL version unknown: %s: %s" % (type(exc).__name__, exc))
    try:
        import torch_npu
    except ImportError:
        torch_npu = None
    except Exception as exc:
        torch_npu = None
        reasons.append("torch_npu failed to import: %s: %s" % (type(exc).__name__, exc))
        out["xpu_reason"] += " torch_npu: %s: %s" % (type(exc).__name__, exc)
    if torch_npu is not None:
        out["npu_version"] = str(getattr(torch_npu, "__version__", "unknown"))
        try:
            out["npu_available"] = bool(torch.npu.is_available())
            if out["npu_available"] and not out["cuda_available"]:
                out["device_count"] = int(torch.npu.device_count())
        except Exception as exc:
            reasons.append("torch.npu failed: %s: %s" % (type(exc).__name__, exc))
out["reason"] = "; ".join(reasons)
print(json.dumps(out))
"""

PYTHON_KEYS = (
    "executable",
    "version",
    "torch_version",
    "cuda_available",
    "cuda_version",
    "nccl_version",
    "device_count",
    "npu_available",
    "npu_version",
    "reason",
)


def empty_python_facts(reason: str, executable: str | None = None) -> dict:
    """The python fact when the probe could not run: every key present, values empty."""
    facts: dict = dict.fromkeys(PYTHON_KEYS)
    facts.update(
        executable=executable,
        cuda_available=False,
        device_count=0,
        npu_available=False,
        reason=reason,
    )
    return facts


def parse_python_probe(stdout: str) -> dict:
    """Read the JSON line printed by PYTHON_PROBE (the last line that is a JSON object)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            data = json.loads(line)
            if not isinstance(data, dict):
                break
            missing = [key for key in PYTHON_KEYS if key not in data]
            if missing:
                raise ValueError(f"python probe output lacks {', '.join(missing)}: {line}")
            return {key: data[key] for key in PYTHON_KEYS}
    raise ValueError(f"no JSON object in python probe output: {stdout.strip()[-300:]!r}")


def python_facts_from_run(executable: str, rc: int, stdout: str, stderr: str) -> dict:
    """The python fact from one run of ``executable -c PYTHON_PROBE`` (rc, its two streams)."""
    if rc != 0:
        text = (stderr or stdout or "").strip()
        tail = text if len(text) <= 400 else "..." + text[-400:]
        return empty_python_facts(f"{executable} -c <probe> failed (rc={rc}): {tail}", executable)
    try:
        return parse_python_probe(stdout)
    except ValueError as exc:
        return empty_python_facts(f"{executable}: {exc}", executable)


def _not_available(value: str) -> bool:
    return value.strip() in _NOT_AVAILABLE


def parse_nvidia_smi_csv(text: str) -> list[dict]:
    """Parse `nvidia-smi --query-gpu=index,name,driver_version,memory.total,uuid,pci.bus_id
    --format=csv,noheader,nounits` into GPU dicts, in the order printed.

    memory_total_mib is None when nvidia-smi reports the memory as not available ([N/A]).
    """
    gpus = []
    rows = csv.reader(text.splitlines(), skipinitialspace=True)
    for number, row in enumerate(rows, start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) != len(NVIDIA_SMI_FIELDS):
            raise ValueError(
                f"nvidia-smi line {number} has {len(row)} fields, expected "
                f"{len(NVIDIA_SMI_FIELDS)} ({','.join(NVIDIA_SMI_FIELDS)}): {','.join(row)!r}"
            )
        index, name, driver, memory, uuid, bus_id = (cell.strip() for cell in row)
        if not index.isdigit():
            raise ValueError(f"nvidia-smi line {number}: index {index!r} is not a number")
        if _not_available(memory):
            memory_mib = None
        else:
            memory_text = memory.removesuffix("MiB").strip()
            if not memory_text.isdigit():
                raise ValueError(
                    f"nvidia-smi line {number}: memory.total {memory!r} is not a number of MiB"
                )
            memory_mib = int(memory_text)
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "driver_version": None if _not_available(driver) else driver,
                "memory_total_mib": memory_mib,
                "uuid": None if _not_available(uuid) else uuid,
                "pci_bus_id": None if _not_available(bus_id) else bus_id,
            }
        )
    return gpus


def _load_json_list(text: str, what: str) -> list:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} did not print JSON: {exc}") from exc
    if not isinstance(data, list):
        raise ValueError(f"{what} printed {type(data).__name__}, expected a JSON list")
    return data


def parse_ip_addr(text: str) -> dict[str, dict]:
    """Parse `ip -j -d addr show` into {ifname: interface} (speed and RDMA left empty).

    kind comes from linkinfo.info_kind, which only the -d (details) form prints.
    """
    interfaces: dict[str, dict] = {}
    for link in _load_json_list(text, "ip -j -d addr show"):
        if not isinstance(link, dict) or "ifname" not in link:
            continue
        name = link["ifname"]
        linkinfo = link.get("linkinfo") or {}
        ipv4: list[dict] = []
        ipv6: list[dict] = []
        for addr in link.get("addr_info") or []:
            if "local" not in addr:
                continue
            if addr.get("family") == "inet":
                ipv4.append({"address": addr["local"], "prefixlen": int(addr["prefixlen"])})
            elif addr.get("family") == "inet6":
                ipv6.append(
                    {
                        "address": addr["local"],
                        "prefixlen": int(addr["prefixlen"]),
                        "scope": addr.get("scope", ""),
                    }
                )
        interfaces[name] = {
            "name": name,
            "state": str(link.get("operstate", "unknown")).lower(),
            "mtu": int(link["mtu"]) if "mtu" in link else None,
            "speed_mbps": None,
            "kind": linkinfo.get("info_kind") or None,
            "ipv4": ipv4,
            "ipv6": ipv6,
            "rdma_devices": [],
        }
    return interfaces


def parse_route_get(text: str) -> dict:
    """Parse `ip -j route get ADDR` into {destination, interface, source}."""
    routes = _load_json_list(text, "ip -j route get")
    if not routes or not isinstance(routes[0], dict) or "dev" not in routes[0]:
        raise ValueError(f"ip -j route get printed no route with a device: {text.strip()!r}")
    route = routes[0]
    return {
        "destination": route.get("dst", ""),
        "interface": route["dev"],
        "source": route.get("prefsrc", ""),
    }


def parse_speed(text: str) -> int | None:
    """/sys/class/net/<if>/speed: Mb/s, or None when unknown (-1, empty, not a number)."""
    try:
        speed = int(text.strip())
    except ValueError:
        return None
    return speed if speed > 0 else None


def parse_port_range(text: str) -> list[int]:
    """/proc/sys/net/ipv4/ip_local_port_range: "32768\t60999" -> [32768, 60999]."""
    parts = text.split()
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise ValueError(f"ip_local_port_range is not two numbers: {text.strip()!r}")
    return [int(parts[0]), int(parts[1])]


def read_speed_mbps(ifname: str, sys_root: str = "/sys") -> int | None:
    """Link speed from sysfs; None when the driver does not report one (EINVAL, -1, absent)."""
    try:
        with open(os.path.join(sys_root, "class", "net", ifname, "speed")) as handle:
            return parse_speed(handle.read())
    except OSError:
        return None


def read_port_range(proc_root: str = "/proc") -> list[int]:
    """The local (ephemeral) port range; raises OSError / ValueError when unreadable."""
    with open(os.path.join(proc_root, "sys", "net", "ipv4", "ip_local_port_range")) as handle:
        return parse_port_range(handle.read())


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def find_rdma_devices(sys_root: str = "/sys") -> dict[str, list[str]]:
    """Map network interface -> RDMA devices (mlx5_0, ...) that sit on it.

    Reads /sys/class/infiniband/<dev>/device/net/<if> (the PCI function's netdevs),
    /sys/class/infiniband/<dev>/ports/<p>/gid_attrs/ndevs/<n> (RoCE netdevs, also bonds) and
    /sys/class/net/<if>/device/infiniband/<dev>.
    """
    found: dict[str, set[str]] = {}
    ib_root = os.path.join(sys_root, "class", "infiniband")
    for device in _listdir(ib_root):
        for netdev in _listdir(os.path.join(ib_root, device, "device", "net")):
            found.setdefault(netdev, set()).add(device)
        ports = os.path.join(ib_root, device, "ports")
        for port in _listdir(ports):
            ndevs = os.path.join(ports, port, "gid_attrs", "ndevs")
            for entry in _listdir(ndevs):
                try:
                    with open(os.path.join(ndevs, entry)) as handle:
                        netdev = handle.read().strip()
                except OSError:
                    continue
                if netdev:
                    found.setdefault(netdev, set()).add(device)
    net_root = os.path.join(sys_root, "class", "net")
    for netdev in _listdir(net_root):
        for device in _listdir(os.path.join(net_root, netdev, "device", "infiniband")):
            found.setdefault(netdev, set()).add(device)
    return {netdev: sorted(devices) for netdev, devices in found.items()}


def unique_addresses(addrinfo: list[tuple]) -> list[str]:
    """Addresses from socket.getaddrinfo() results, first occurrence order, no duplicates."""
    seen: list[str] = []
    for entry in addrinfo:
        address = str(entry[4][0])
        if address not in seen:
            seen.append(address)
    return seen
