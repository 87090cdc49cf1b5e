# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A node's facts (what it offers torch.distributed), read without Ansible.

``gather(runner, params)`` returns the dict that library/nccl_facts.py returns as
``ansible_facts.nccl`` (its RETURN documents every key): hostname, interfaces, the route towards
``route_to``, the port range, GPUs and their health, Ascend NPUs / Intel XPUs, the Python's torch
versions and the fabric below IP. ``runner`` finds and runs the commands (node/commands.py): the
Ansible module passes its AnsibleModule, the Slurm front-end's node check node/runner.py's
SubprocessRunner. ``params`` are the module's options (FACTS_DEFAULTS fills what is missing).
Only reads; a missing tool gives empty values and a reason string, never an exception.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from . import netlink
from .accel_facts import intel_gpu_on_pci, read_npus, read_xpus, xpus_of_probe
from .commands import CommandRunner
from .fabric_facts import gather_fabric
from .gpu_health_read import read_gpu_health
from .listener import run_python_probe
from .parse import (
    NVIDIA_SMI_FIELDS,
    PYTHON_PROBE,
    empty_python_facts,
    find_rdma_devices,
    parse_ip_addr,
    parse_nvidia_smi_csv,
    parse_route_get,
    python_facts_from_run,
    read_port_range,
    read_speed_mbps,
    unique_addresses,
)

SYS_ROOT = "/sys"
NO_INTEL_GPU = "not asked: no Intel GPU on the PCI bus (vendor 0x8086, display class 0x03)"
PROC_ROOT = "/proc"
TOOL_DIRS = ["/usr/sbin", "/sbin", "/usr/bin"]
NO_IP = "ip (iproute2) not found on PATH, /usr/sbin or /sbin; install iproute2"
# The options of library/nccl_facts.py that the facts read, with its defaults.
FACTS_DEFAULTS: dict[str, Any] = {
    "route_to": "",
    "python": "",
    "query_python": True,
    "nvidia_smi": "nvidia-smi",
    "query_gpus": True,
    "gpu_health": True,
    "dcgm_diag_level": 0,
    "dcgm_diag_timeout": 300,
    "npu_smi": "npu-smi",
    "query_xpu": False,
}


def _tail(text: str, limit: int = 400) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def find_tool(runner: CommandRunner, name: str) -> str | None:
    """A path (executable) as given, else ``name`` on PATH or in the sbin directories."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return runner.get_bin_path(name, opt_dirs=TOOL_DIRS)


def _interfaces_of_ip(ip: str, runner: CommandRunner) -> tuple[dict, str]:
    argv = [ip, "-j", "-d", "addr", "show"]
    rc, out, err = runner.run_command(argv)
    if rc != 0:
        return {}, f"{' '.join(argv)} failed (rc={rc}): {_tail(err or out)}"
    try:
        return parse_ip_addr(out), ""
    except ValueError as exc:
        return {}, str(exc)


def gather_interfaces(runner: CommandRunner) -> tuple[dict, str]:
    """Every interface with its addresses: `ip -j -d addr show`, or, on a node without iproute2,
    the same from the kernel over rtnetlink (node/netlink.py)."""
    ip = find_tool(runner, "ip")
    if ip is not None:
        interfaces, reason = _interfaces_of_ip(ip, runner)
    else:
        try:
            interfaces, reason = netlink.interfaces(), ""
        except OSError as exc:
            interfaces, reason = {}, f"{NO_IP} (rtnetlink: {exc.strerror or exc})"
    if reason:
        return {}, reason
    rdma = find_rdma_devices(SYS_ROOT)
    for name, interface in interfaces.items():
        interface["speed_mbps"] = read_speed_mbps(name, SYS_ROOT)
        interface["rdma_devices"] = rdma.get(name, [])
    return interfaces, ""


def _resolve(destination: str) -> tuple[str | None, str]:
    try:
        infos = socket.getaddrinfo(destination, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        return None, f"cannot resolve {destination!r} on this node: {exc}"
    addresses = unique_addresses(infos)
    ipv4 = [a for a in addresses if ":" not in a]
    return (ipv4 or addresses)[0], ""


def gather_route(runner: CommandRunner, route_to: str) -> tuple[dict, str]:
    if not route_to:
        return {}, "route_to not given"
    address, reason = _resolve(route_to)
    if address is None:
        return {}, reason
    ip = find_tool(runner, "ip")
    if ip is None:
        try:
            return netlink.route_get(address), ""
        except OSError as exc:  # the kernel's answer, such as ENETUNREACH
            return {}, f"route get {address} (rtnetlink, no iproute2 here): {exc.strerror or exc}"
    argv = [ip, "-j", "route", "get", address]
    rc, out, err = runner.run_command(argv)
    if rc != 0:
        return {}, f"{' '.join(argv)} failed (rc={rc}): {_tail(err or out)}"
    try:
        return parse_route_get(out), ""
    except ValueError as exc:
        return {}, str(exc)


def gather_hostname() -> tuple[str, list[str], str]:
    hostname = socket.gethostname()
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        return hostname, [], f"hostname {hostname!r} does not resolve on this node: {exc}"
    return hostname, unique_addresses(infos), ""


def gather_gpus(runner: CommandRunner, nvidia_smi: str) -> tuple[list, str]:
    tool = find_tool(runner, nvidia_smi)
    if tool is None:
        where = "on PATH" if os.sep not in nvidia_smi else "or not executable"
        return [], f"{nvidia_smi} not found {where}; no NVIDIA driver tools on this node"
    argv = [tool, f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"]
    rc, out, err = runner.run_command(argv)
    if rc != 0:
        return [], f"{' '.join(argv)} failed (rc={rc}): {_tail(out + err)}"
    if "No devices were found" in out:
        return [], f"{tool} found no GPU: {_tail(out)}"
    try:
        gpus = parse_nvidia_smi_csv(out)
    except ValueError as exc:
        return [], f"cannot read {tool} output: {exc}"
    if not gpus:
        return [], f"{tool} printed no GPU"
    return gpus, ""


def gather_gpu_health(runner: CommandRunner, params: Mapping[str, Any], gpus: list) -> dict:
    if not (gpus and params["gpu_health"]):
        return {}
    tool = find_tool(runner, params["nvidia_smi"]) or params["nvidia_smi"]
    return read_gpu_health(
        runner, tool, params["dcgm_diag_level"], float(params["dcgm_diag_timeout"])
    )


def gather_python(runner: CommandRunner, python: str) -> dict:
    executable = python or sys.executable
    tool = find_tool(runner, executable)
    if tool is None:
        return empty_python_facts(f"python {executable!r} not found or not executable", executable)
    rc, out, err = runner.run_command([tool, "-c", PYTHON_PROBE])
    return python_facts_from_run(tool, rc, out, err)


def _xpus_of_run(done: Mapping[str, Any], python: str) -> dict:
    """The XPU facts from a torch probe run (node/listener.py run_python_probe's result)."""
    rc = -1 if done["rc"] is None else done["rc"]
    return xpus_of_probe(rc, done["stdout"], done["stderr"] or done["error"], python)


def gather_accelerators(
    runner: CommandRunner, params: Mapping[str, Any], gpus: list, shared: dict | None = None
) -> dict:
    """Ascend NPUs (npu-smi) and, when asked, no GPU or NPU was found and the PCI bus has an
    Intel GPU (or cannot be read), Intel XPUs.

    ``shared`` ({python, timeout}): read the XPUs through the pre-flight's torch probe, run here
    with that Python (one torch import for both); its run is kept in ``shared["run"]``. With a
    ``wait`` in it (a callable returning the run of a probe started before these reads, so that
    the torch import overlaps them), that run is taken instead of running the probe here.
    """

    def run(argv: list[str]) -> tuple[int, str, str]:
        return runner.run_command(argv)

    found = read_npus(run, find_tool(runner, params["npu_smi"]), params["npu_smi"])
    if not params["query_xpu"]:
        xpus = {"xpus": [], "xpus_reason": "query_xpu is false", "torch_npu_version": None}
    elif gpus or found["npus"]:
        xpus = {
            "xpus": [],
            "xpus_reason": "not asked: GPUs or NPUs found",
            "torch_npu_version": None,
        }
    elif intel_gpu_on_pci(SYS_ROOT) is False:
        # No import of torch here (seconds): the pre-flight's torch probe then runs in the
        # background, overlapping what follows, as on a GPU node.
        xpus = {"xpus": [], "xpus_reason": NO_INTEL_GPU, "torch_npu_version": None}
    elif shared is not None:
        waited = shared.get("wait")
        if waited is None:
            shared["run"] = run_python_probe(shared["python"], shared["timeout"])
        else:
            shared["run"] = waited()
        xpus = _xpus_of_run(shared["run"], shared["python"])
    else:
        xpus = read_xpus(run, find_tool(runner, params["python"] or sys.executable))
    try:  # HCCL's host ports must be reserved (pre-flight check hccl_ports)
        with open(f"{PROC_ROOT}/sys/net/ipv4/ip_local_reserved_ports", encoding="utf-8") as f:
            reserved = f.read().strip()
    except OSError:
        reserved = None
    return {**found, **xpus, "ip_local_reserved_ports": reserved}


def gather(
    runner: CommandRunner, params: Mapping[str, Any] | None = None, shared: dict | None = None
) -> dict:
    """Every fact of this node (library/nccl_facts.py RETURN ``nccl``); ``params`` as its
    options (FACTS_DEFAULTS for those not given); ``shared`` as for gather_accelerators."""
    params = {**FACTS_DEFAULTS, **(params or {})}
    hostname, hostname_addresses, hostname_reason = gather_hostname()
    interfaces, interfaces_reason = gather_interfaces(runner)
    route, route_reason = gather_route(runner, params["route_to"])
    try:
        port_range = read_port_range(PROC_ROOT)
    except (OSError, ValueError):
        port_range = []
    if params["query_gpus"]:
        gpus, gpus_reason = gather_gpus(runner, params["nvidia_smi"])
    else:
        gpus, gpus_reason = [], "query_gpus is false"
    if params["query_python"]:
        python = gather_python(runner, params["python"])
    else:
        python = empty_python_facts("query_python is false", params["python"] or None)
    return {
        "hostname": hostname,
        "hostname_addresses": hostname_addresses,
        "hostname_reason": hostname_reason,
        "module_python": sys.executable,
        "interfaces": interfaces,
        "interfaces_reason": interfaces_reason,
        "route": route,
        "route_reason": route_reason,
        "ip_local_port_range": port_range,
        "gpus": gpus,
        "gpus_reason": gpus_reason,
        "gpu_health": gather_gpu_health(runner, params, gpus),
        # Ascend NPUs and Intel XPUs (node/accel_facts.py).
        "accelerators": gather_accelerators(runner, params, gpus, shared),
        "python": python,
        # RDMA ports, GPUDirect, limits, NCCL configuration (node/fabric_facts.py).
        "fabric": gather_fabric(SYS_ROOT, PROC_ROOT),
    }
