# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What a node offers NCCL below the IP layer, read from sysfs and /proc only (nothing installed).

Standard library only: shipped to the nodes inside library/nccl_facts.py. Every reader takes its
root directory (``sys_root``, ``proc_root``, ``etc_root``), so the tests point it at recorded or
transcribed trees in tests/fixtures/sysfs/. The result is ``ansible_facts.nccl.fabric``
(docs/design.md):

    rdma: [{name, node_type, ports: [{port, state, phys_state, rate, rate_gbps, link_layer,
            netdevs, gids: [{index, gid, type, address, netdev}]}]}]
    rdma_reason: "" or why there is no RDMA list
    gpudirect: {nvidia_loaded, peermem (nvidia_peermem | nv_peer_mem | null), memory_peers,
                dmabuf (true | false | null), dmabuf_reason, kernel, driver_version, open_module}
    limits: {memlock_soft, memlock_hard (bytes or "unlimited"), shm: {path, size_bytes,
             free_bytes, reason}, ip_local_port_range: [lo, hi] | []}
    nccl_config: {files: [{path, exists, values, error}], env: {NCCL_*: value},
                  effective: {NAME: {value, source}}}
    ssh_address: the address this SSH session came in on (SSH_CONNECTION), or ""
"""

from __future__ import annotations

import ipaddress
import os
import re
import resource
from typing import Any

# sysfs attributes of an RDMA port are "N: WORD" (state, phys_state), "100 Gb/sec (4X EDR)"
# (rate) or one word (link_layer); see the kernel's drivers/infiniband/core/sysfs.c.
_NUMBERED = re.compile(r"^\s*\d+:\s*(?P<word>\S+)")
_RATE = re.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*Gb/sec")
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
# dma-buf for GPUDirect RDMA: Linux 5.12 or later and NVIDIA's open kernel modules, R515 or later
# (NVIDIA GPUDirect RDMA documentation, "Using DMA-BUF"; NCCL uses it since 2.13).
DMABUF_MIN_KERNEL = (5, 12)
DMABUF_MIN_DRIVER = 515


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path), key=lambda n: (len(n), n))
    except OSError:
        return []


def _word(text: str | None) -> str | None:
    if text is None:
        return None
    match = _NUMBERED.match(text)
    return match.group("word") if match else text


def gid_address(gid: str) -> str | None:
    """The IP address a RoCE GID carries: IPv4 for ::ffff:a.b.c.d, else the IPv6 address."""
    try:
        address = ipaddress.IPv6Address(gid)
    except ValueError:
        return None
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def gid_type(text: str | None) -> str | None:
    """'RoCE v2' -> 'v2'; 'IB/RoCE v1' -> 'v1' (the kernel's gid_attrs/types strings)."""
    if text is None:
        return None
    if "v2" in text:
        return "v2"
    if "v1" in text:
        return "v1"
    return text


def _port_gids(port_dir: str) -> list[dict[str, Any]]:
    gids = []
    for index in _listdir(os.path.join(port_dir, "gids")):
        if not index.isdigit():
            continue
        gid = _read(os.path.join(port_dir, "gids", index))
        if not gid or gid == _ZERO_GID:
            continue  # an empty slot; its type attribute cannot even be read (EINVAL)
        gids.append(
            {
                "index": int(index),
                "gid": gid,
                "type": gid_type(_read(os.path.join(port_dir, "gid_attrs", "types", index))),
                "address": gid_address(gid),
                "netdev": _read(os.path.join(port_dir, "gid_attrs", "ndevs", index)),
            }
        )
    return gids


def _device_netdevs(device_dir: str) -> dict[str, int | None]:
    """The PCI function's netdevs and their dev_port (0-based port index), as ibdev2netdev reads."""
    found: dict[str, int | None] = {}
    net = os.path.join(device_dir, "device", "net")
    for netdev in _listdir(net):
        dev_port = _read(os.path.join(net, netdev, "dev_port"))
        found[netdev] = int(dev_port) if dev_port and dev_port.isdigit() else None
    return found


def _port(device_dir: str, port: str, netdevs: dict[str, int | None]) -> dict[str, Any]:
    port_dir = os.path.join(device_dir, "ports", port)
    rate = _read(os.path.join(port_dir, "rate"))
    match = _RATE.match(rate or "")
    gids = _port_gids(port_dir)
    linked = [n for n, p in netdevs.items() if p is None or p == int(port) - 1]
    for gid in gids:
        if gid["netdev"] and gid["netdev"] not in linked:
            linked.append(gid["netdev"])
    return {
        "port": int(port),
        "state": _word(_read(os.path.join(port_dir, "state"))),
        "phys_state": _word(_read(os.path.join(port_dir, "phys_state"))),
        "rate": rate,
        "rate_gbps": float(match.group("value")) if match else None,
        "link_layer": _read(os.path.join(port_dir, "link_layer")),
        "netdevs": linked,
        "gids": gids,
    }


def read_rdma(sys_root: str = "/sys") -> tuple[list[dict[str, Any]], str]:
    """Every RDMA device and port under <sys_root>/class/infiniband; (devices, reason)."""
    root = os.path.join(sys_root, "class", "infiniband")
    if not os.path.isdir(root):
        return [], f"no RDMA device: {root} does not exist (no RDMA driver loaded)"
    devices = []
    for name in _listdir(root):
        device_dir = os.path.join(root, name)
        netdevs = _device_netdevs(device_dir)
        devices.append(
            {
                "name": name,
                "node_type": _word(_read(os.path.join(device_dir, "node_type"))),
                "ports": [
                    _port(device_dir, port, netdevs)
                    for port in _listdir(os.path.join(device_dir, "ports"))
                    if port.isdigit()
                ],
            }
        )
    return devices, "" if devices else f"no RDMA device in {root}"


def _version_tuple(text: str | None, parts: int) -> tuple[int, ...] | None:
    match = re.match(r"^\s*(\d+(?:\.\d+)*)", text or "")
    if not match:
        return None
    numbers = [int(n) for n in match.group(1).split(".")][:parts]
    return tuple(numbers + [0] * (parts - len(numbers)))


def _dmabuf(kernel: str | None, driver: str | None, open_module: bool | None) -> tuple[Any, str]:
    kernel_v = _version_tuple(kernel, 2)
    driver_v = _version_tuple(driver, 1)
    if driver_v is None:
        return None, "the NVIDIA driver is not loaded (no /sys/module/nvidia/version)"
    if kernel_v is None:
        return None, "the kernel version is unknown"
    if kernel_v < DMABUF_MIN_KERNEL:
        return False, f"kernel {kernel} is older than 5.12, which dma-buf for GPUs needs"
    if driver_v[0] < DMABUF_MIN_DRIVER:
        return False, f"NVIDIA driver {driver} is older than R515"
    if open_module is False:
        return False, f"NVIDIA driver {driver} is the proprietary kernel module, not the open one"
    if open_module is None:
        return None, "cannot tell whether the NVIDIA kernel module is the open one"
    return True, f"kernel {kernel}, open NVIDIA kernel module {driver}"


def read_gpudirect(sys_root: str = "/sys", proc_root: str = "/proc") -> dict[str, Any]:
    """Whether GPUDirect RDMA can work: a peer-memory module loaded, or the dma-buf path."""
    modules = os.path.join(sys_root, "module")
    peermem = next((m for m in PEERMEM_MODULES if os.path.isdir(os.path.join(modules, m))), None)
    driver = _read(os.path.join(modules, "nvidia", "version"))
    proc_version = _read(os.path.join(proc_root, "driver", "nvidia", "version"))
    open_module = None if proc_version is None else "Open Kernel Module" in proc_version
    kernel = _read(os.path.join(proc_root, "sys", "kernel", "osrelease"))
    dmabuf, reason = _dmabuf(kernel, driver, open_module)
    return {
        "nvidia_loaded": os.path.isdir(os.path.join(modules, "nvidia")),
        "peermem": peermem,
        # nv_peer_mem registers here (NVIDIA/nccl#897); absent with nvidia_peermem too.
        "memory_peers": _listdir(os.path.join(sys_root, "kernel", "mm", "memory_peers")),
        "dmabuf": dmabuf,
        "dmabuf_reason": reason,
        "kernel": kernel,
        "driver_version": driver,
        "open_module": open_module,
    }


def _limit(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else int(value)


def read_limits(proc_root: str = "/proc", shm_path: str = "/dev/shm") -> dict[str, Any]:
    """The limits a process started by this session has: ranks inherit the same ones."""
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    shm: dict[str, Any] = {"path": shm_path, "size_bytes": None, "free_bytes": None, "reason": ""}
    try:
        stat = os.statvfs(shm_path)
        shm["size_bytes"] = stat.f_blocks * stat.f_frsize
        shm["free_bytes"] = stat.f_bavail * stat.f_frsize
    except OSError as exc:
        shm["reason"] = f"cannot read {shm_path}: {exc.strerror or exc}"
    text = _read(os.path.join(proc_root, "sys", "net", "ipv4", "ip_local_port_range")) or ""
    numbers = [int(n) for n in text.split() if n.isdigit()]
    return {
        "memlock_soft": _limit(soft),
        "memlock_hard": _limit(hard),
        "shm": shm,
        "ip_local_port_range": numbers if len(numbers) == 2 else [],
    }


def parse_nccl_conf(text: str) -> dict[str, str]:
    """NAME=VALUE lines as NCCL's setEnvFile reads them (src/misc/param.cc): '#' lines skipped,
    everything after the first '=' is the value, nothing stripped."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.rstrip("\r")
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values.setdefault(name, value)
    return values


# NCCL_* names that are no NCCL setting: NVIDIA's CUDA container images set NCCL_VERSION to the
# libnccl2 package they install (nvidia/cuda Dockerfiles: "ENV NCCL_VERSION 2.17.1-1"); NCCL
# itself reads no such variable, and torch's wheel brings its own NCCL anyway (the recorded H200,
# tests/fixtures/gpu/node-readers-h200-vm.json: NCCL_VERSION=2.28.3-1 beside NCCL 2.28.9).
NOT_NCCL_SETTINGS = frozenset({"NCCL_VERSION"})


def read_nccl_config(
    etc_root: str = "/etc", home: str | None = None, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """NCCL configuration that overrides ours, in NCCL's order: the environment wins, then
    NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf (each setenv without overwrite)."""
    environ = dict(os.environ if environ is None else environ)
    home = environ.get("HOME") if home is None else home
    env = {
        k: v
        for k, v in sorted(environ.items())
        if k.startswith("NCCL_") and k not in NOT_NCCL_SETTINGS
    }
    user = environ.get("NCCL_CONF_FILE") or (os.path.join(home, ".nccl.conf") if home else "")
    paths = ([user] if user else []) + [os.path.join(etc_root, "nccl.conf")]
    files = []
    effective: dict[str, dict[str, str]] = {
        k: {"value": v, "source": "environment"} for k, v in env.items()
    }
    for path in paths:
        entry: dict[str, Any] = {"path": path, "exists": os.path.exists(path), "values": {}}
        entry["error"] = ""
        if entry["exists"]:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    entry["values"] = parse_nccl_conf(handle.read())
            except OSError as exc:
                entry["error"] = f"cannot read {path}: {exc.strerror or exc}"
        for name, value in entry["values"].items():
            effective.setdefault(name, {"value": value, "source": path})
        files.append(entry)
    return {"files": files, "env": env, "effective": effective}


def ssh_address(environ: dict[str, str] | None = None) -> str:
    """The server address of this SSH session (SSH_CONNECTION's third field), or ""."""
    fields = (os.environ if environ is None else environ).get("SSH_CONNECTION", "").split()
    return fields[2] if len(fields) == 4 else ""


def gather_fabric(
    sys_root: str = "/sys",
    proc_root: str = "/proc",
    etc_root: str = "/etc",
    shm_path: str = "/dev/shm",
    environ: dict[str, str] | None = None,
) -> dict[str, Any]:
    """ansible_facts.nccl.fabric: RDMA, GPUDirect, limits, NCCL configuration, SSH address.

    A reader that meets something it cannot read leaves its part empty with an ``error`` key
    instead of failing the facts of the whole host."""

    def guarded(read, *args, **kwargs) -> Any:
        try:
            return read(*args, **kwargs)
        except (OSError, ValueError, TypeError) as exc:
            return {"error": f"{read.__name__}: {exc}"}

    rdma = guarded(read_rdma, sys_root)
    rdma, rdma_reason = rdma if isinstance(rdma, tuple) else ([], rdma["error"])
    return {
        "rdma": rdma,
        "rdma_reason": rdma_reason,
        "gpudirect": guarded(read_gpudirect, sys_root, proc_root),
        "limits": guarded(read_limits, proc_root, shm_path),
        "nccl_config": guarded(read_nccl_config, etc_root, environ=environ),
        "ssh_address": ssh_address(environ),
    }
