# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Read a node's GPU health (never change it) for library/nccl_facts.py (option gpu_health).

Runs read-only commands through the calling module and hands their text to the pure parsers of
src/nccl_preflight/node/gpu_health.py. Each part that cannot be read leaves None and a reason
string, never a failure: the pre-flight's checks (core/preflight/gpu_checks.py) skip it and say
why.

    nvidia-smi -q                     -> query (per GPU: memory errors, PCIe, modes, fabric)
    nvidia-smi topo -m                -> topology
    nvidia-smi nvlink -s              -> nvlink
    dmesg, else journalctl -k -b      -> kernel_log (Xid events since boot)
    systemctl is-active nvidia-fabricmanager, /sys/bus/pci/devices (NVSwitch) -> fabric_manager,
                                         nvswitch
    dcgmi diag -r N -j (N > 0 only, killed after the timeout) -> dcgm
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from .commands import CommandRunner
from .gpu_health import (
    parse_dcgm_diag,
    parse_nvlink_status,
    parse_smi_query,
    parse_topology,
    parse_xids,
)

EXTRA_PATHS = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
# PCI class of an NVSwitch (bridge, other) with NVIDIA's vendor id
NVSWITCH_CLASS = "0x068000"
NVIDIA_VENDOR = "0x10de"


def _tail(text: str, limit: int = 300) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _shown(argv: list[str]) -> str:
    """The command as the user would type it (without the timeout wrapper)."""
    return " ".join(argv[4:] if os.path.basename(argv[0]) == "timeout" else argv)


def _run(module: CommandRunner, argv: list[str]) -> tuple[str | None, str]:
    """(stdout, "") on success, (None, why) otherwise."""
    rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
    if rc in (124, 137) and os.path.basename(argv[0]) == "timeout":
        return None, f"{_shown(argv)} did not answer within {argv[3]} s (a GPU hung?)"
    if rc != 0:
        return None, f"{_shown(argv)} failed (rc={rc}): {_tail(err or out)}"
    return out, ""


def _parsed(module: CommandRunner, argv: list[str], parse) -> tuple[object, str]:
    out, why = _run(module, argv)
    if out is None:
        return None, why
    try:
        return parse(out), ""
    except ValueError as exc:
        return None, f"cannot read the output of {_shown(argv)}: {exc}"


def read_kernel_log(module: CommandRunner) -> tuple[dict | None, str]:
    """Xid events since boot from dmesg, else the journal's kernel messages of this boot."""
    reasons = []
    for name, args in (("dmesg", []), ("journalctl", ["-k", "-b", "-q", "--no-pager"])):
        tool = module.get_bin_path(name, opt_dirs=EXTRA_PATHS)
        if tool is None:
            reasons.append(f"{name} not found")
            continue
        out, why = _run(module, [tool, *args])
        if out is not None:
            return {"source": " ".join([name, *args]), "xids": parse_xids(out)}, ""
        reasons.append(why)
    return None, (
        "; ".join(reasons) + " (reading the kernel log may need privileges: "
        "kernel.dmesg_restrict=1 or the systemd-journal/adm group)"
    )


def nvswitch_present(sys_root: str = "/sys") -> bool:
    """An NVIDIA NVSwitch among the PCI devices (HGX A100 and earlier show them on PCIe)."""
    base = os.path.join(sys_root, "bus", "pci", "devices")
    try:
        names = os.listdir(base)
    except OSError:
        return False
    for name in names:
        try:
            with open(os.path.join(base, name, "vendor")) as f:
                vendor = f.read().strip()
            with open(os.path.join(base, name, "class")) as f:
                klass = f.read().strip()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and klass == NVSWITCH_CLASS:
            return True
    return False


def read_fabric_manager(module: CommandRunner) -> dict:
    """{state: 'active'|'inactive'|'failed'|... or None, reason}."""
    tool = module.get_bin_path("systemctl", opt_dirs=EXTRA_PATHS)
    if tool is None:
        return {"state": None, "reason": "systemctl not found"}
    rc, out, err = module.run_command([tool, "is-active", "nvidia-fabricmanager"])
    state = (out or "").strip().splitlines()[-1:] or [""]
    if state[0] in ("active", "inactive", "failed", "activating", "deactivating"):
        return {"state": state[0], "reason": ""}
    return {"state": None, "reason": f"systemctl is-active (rc={rc}): {_tail(err or out, 200)}"}


def run_dcgm_diag(module: CommandRunner, level: int, timeout: float) -> dict:
    """dcgmi diag -r level -j, ended (whole process group) after timeout seconds."""
    base = {"level": level, "results": None, "reason": "", "timed_out": False}
    if level <= 0:
        return {**base, "reason": "nccl_dcgm_diag_level is 0 (off)"}
    tool = module.get_bin_path("dcgmi", opt_dirs=EXTRA_PATHS)
    if tool is None:
        return {**base, "reason": "dcgmi not found (DCGM is not installed on this node)"}
    argv = [tool, "diag", "-r", str(level), "-j"]
    start = time.monotonic()
    proc = subprocess.Popen(  # a fixed argv, no shell
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {
            **base,
            "timed_out": True,
            "reason": f"dcgmi diag -r {level} did not finish within {timeout:g} s (raise "
            "nccl_dcgm_diag_timeout or lower nccl_dcgm_diag_level)",
        }
    try:
        results = parse_dcgm_diag(out)
    except ValueError as exc:
        return {**base, "reason": f"{' '.join(argv)} (rc={proc.returncode}): {exc}: {_tail(err)}"}
    return {**base, "results": results, "seconds": round(time.monotonic() - start, 1)}


def bounded(module: CommandRunner, argv: list[str], seconds: int) -> list[str]:
    """argv under coreutils' timeout (TERM after seconds, KILL 5 s later) when it exists: an
    nvidia-smi stuck on a GPU that fell off the bus must not hang the facts play."""
    tool = module.get_bin_path("timeout", opt_dirs=EXTRA_PATHS)
    return [tool, "-k", "5", str(seconds), *argv] if tool else argv


def read_gpu_health(
    module: CommandRunner,
    nvidia_smi: str,
    dcgm_level: int = 0,
    dcgm_timeout: float = 300,
    smi_timeout: int = 60,
) -> dict:
    """Every part of the GPU health, each with a reason when it could not be read."""
    smi = bounded(module, [nvidia_smi], smi_timeout)
    query, query_reason = _parsed(module, [*smi, "-q"], parse_smi_query)
    topology, topology_reason = _parsed(module, [*smi, "topo", "-m"], parse_topology)
    nvlink, nvlink_reason = _parsed(module, [*smi, "nvlink", "-s"], parse_nvlink_status)
    kernel_log, kernel_log_reason = read_kernel_log(module)
    return {
        "query": query,
        "query_reason": query_reason,
        "topology": topology,
        "topology_reason": topology_reason,
        "nvlink": nvlink,
        "nvlink_reason": nvlink_reason,
        "kernel_log": kernel_log,
        "kernel_log_reason": kernel_log_reason,
        "nvswitch": nvswitch_present(),
        "fabric_manager": read_fabric_manager(module),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "dcgm": run_dcgm_diag(module, dcgm_level, dcgm_timeout),
    }
