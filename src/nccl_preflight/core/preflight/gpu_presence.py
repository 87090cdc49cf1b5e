# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Are a host's NVIDIA GPUs there: the checks gpu and gpu_model, and the one decision of whether a
host's GPUs are judged at all (docs/design.md, "GPUs required").

``nccl_gpu_skip`` decides, for both front-ends and node-check, whether a host's GPUs are judged;
gpu, gpu_model and every gpu_* health check (gpu_checks.py) ask it:

- the run's backend is not nccl: skipped, "the backend is gloo, no GPU needed" -- except where
  nccl_backend is auto and the master found no accelerator at all, so that the run fell back to
  gloo: then each host's GPUs are judged (a host that found Ascend NPUs or Intel XPUs excepted:
  backend_choice names it). Under the defaults (auto, nccl_require_gpu true) a GPU cluster whose
  GPUs are not visible (a dead driver, an allocation without GPUs) therefore FAILS, node by node,
  instead of passing on gloo without NCCL ever running;
- nccl_require_gpu false: skipped, "nccl_require_gpu is false" (the lab's CPU runs say so).

check gpu of a judged host, the first that applies: no GPU listed (failed: the node, what
nvidia-smi said, the likely causes with their fixes, most likely first); the count
(``gpus_per_node``, nccl_gpus_per_node: set, exactly that many; 0, every judged host as many as
the host with the most -- a GPU is lost, never gained: fallen off the bus, a dead driver, an
allocation that gives fewer; a run of one host and node-check have nothing to compare, so there
only the set form applies); fewer GPUs than ranks planned; torch not seeing CUDA (with
CUDA_VISIBLE_DEVICES named where it hides the GPUs). Settings read here: require_gpu,
requested_backend (nccl_backend; absent: auto), gpus_per_node (absent: 0).
"""

from __future__ import annotations

import re

from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice
from nccl_preflight.core.preflight.result import check_result as _result
from nccl_preflight.core.preflight.result import host_table, reference_value, too_few_devices

# The backends that run on something other than an NVIDIA GPU, each judged by its own checks.
OTHER_ACCELERATORS = ("hccl", "xccl")
ASK_SLURM = (
    "ask Slurm for the GPUs: bin/nccl-preflight slurm --gpus-per-node=N, or salloc/sbatch "
    "--gpus-per-node=N (--gres=gpu:N)"
)
CPU_RUN = "a run meant for CPUs: set nccl_require_gpu: false (or nccl_backend: gloo)"


def python_facts_of(obs: dict) -> dict:
    """What torch reported on the host: the pre-flight's torch probe (run beside the listeners),
    else nccl_facts' (when it was asked to query Python)."""
    return obs.get("python_facts") or (obs.get("facts") or {}).get("python") or {}


def _fell_back(settings: dict, backend: str) -> bool:
    """nccl_backend auto and the master found no accelerator: the run would use gloo."""
    return str(settings.get("requested_backend") or "auto") == "auto" and backend == "gloo"


def nccl_gpu_skip(obs: dict, settings: dict) -> str:
    """Why this host's NVIDIA GPUs are not judged; "" when they are (see the module docstring)."""
    backend = str(obs.get("backend") or "")
    if backend != "nccl" and not _fell_back(settings, backend):
        return f"the backend is {backend or 'unknown'}, no GPU needed"
    if not settings.get("require_gpu", True):
        return "nccl_require_gpu is false"
    if backend != "nccl":
        own = nccl_backend_choice(obs.get("facts"), "auto")
        if own["backend"] in OTHER_ACCELERATORS:
            return (
                f"it found no NVIDIA GPU but would use {own['backend']} ({own['reason']}); "
                "see backend_choice"
            )
    return ""


# --------------------------------------------------------------------------- no GPU
def _nvidia_smi_outcome(reason: str) -> str:
    """What node/facts.py gather_gpus' reason says nvidia-smi did: missing, failed, none, other."""
    if "No devices were found" in reason or "found no GPU" in reason:
        return "none"  # the driver answers and lists nothing (rc 6, or 0 on some versions)
    if " not found " in f" {reason} ":
        return "missing"
    if "failed (rc=" in reason:
        return "failed"
    return "other"


def _likely_causes(outcome: str) -> list[tuple[str, str]]:
    """(cause, fix) pairs, most likely first, for what nvidia-smi did."""
    driver = (
        "the NVIDIA kernel driver is not loaded or does not answer (nvidia-smi cannot talk to "
        "it: not loaded at boot, or built for another kernel after an update)",
        "lsmod | grep nvidia; dmesg | grep -i nvrm; modprobe nvidia, or reinstall the driver "
        "for the running kernel; reboot",
    )
    lost = (
        "the driver sees no GPU: the GPUs fell off the bus (Xid 79) or a VM was given none",
        "dmesg | grep -i -e xid -e 'fallen off'; reset the GPUs (nvidia-smi -r) or reboot; "
        "pass the GPUs through to the VM",
    )
    allocation = (
        "the allocation gives this node no GPU: Slurm hides a node's GPUs from a job that asked "
        "for none (cgroup.conf ConstrainDevices=yes; an SSH session pam_slurm_adopt put in such "
        "a job alike)",
        ASK_SLURM,
    )
    not_gpu = (
        "no NVIDIA driver on this node: a CPU node in a GPU run (a wrong partition, node list "
        "or hostfile), or the driver is not installed",
        "run on the GPU nodes (--partition / --nodelist, or the hostfile), or install the "
        "NVIDIA driver",
    )
    path = (
        "nvidia-smi is not on the PATH of the session that looked (a non-standard install)",
        "put its directory on PATH for non-interactive sessions",
    )
    return {
        "missing": [not_gpu, path],
        "failed": [driver, lost],
        "none": [allocation, lost],
    }.get(outcome, [driver, allocation, lost])


def _said(reason: str) -> str:
    """gather_gpus' reason without nvidia-smi's long argv: "nvidia-smi failed (rc=9): ..."."""
    return re.sub(r"\S*nvidia-smi --query-gpu=\S+ --format=\S+", "nvidia-smi", reason)


def no_gpu_result(host: str, facts: dict, settings: dict, backend: str) -> dict:
    """Failed: ``host`` lists no NVIDIA GPU while nccl_require_gpu is true. The first line names
    the node and what nvidia-smi said; then what it means for the run and the likely causes, most
    likely first, each with its fix."""
    reason = str(facts.get("gpus_reason") or "nvidia-smi lists no GPU")
    lines = [f"{host}: no NVIDIA GPU visible ({_said(reason)}); nccl_require_gpu is true"]
    if _fell_back(settings, backend):
        lines.append(
            "with nccl_backend auto the run would fall back to gloo on the CPUs: NCCL would "
            "never run"
        )
    causes = _likely_causes(_nvidia_smi_outcome(reason))
    lines.append("likely causes, most likely first:")
    lines += [f"- {cause}; fix: {fix}" for cause, fix in causes]
    hint = f"nvidia-smi -L  (on {host}); {causes[0][1]}; {CPU_RUN}"
    return _result("gpu", host, "failed", "\n".join(lines), hint)


# --------------------------------------------------------------------------- count
def gpu_counts(observations: dict, settings: dict) -> dict[str, int]:
    """host -> GPUs nvidia-smi lists, of every host whose GPUs are judged."""
    return {
        h: len((o.get("facts") or {}).get("gpus") or [])
        for h, o in observations.items()
        if o.get("facts") is not None and not nccl_gpu_skip(o, settings)
    }


def _wanted_count(settings: dict) -> int:
    try:
        return max(int(settings.get("gpus_per_node") or 0), 0)
    except (TypeError, ValueError):
        return 0


def check_count(observations: dict, host: str, settings: dict, order: list[str]) -> dict | None:
    """Failed when ``host`` does not list the GPUs it should (see the module docstring); None
    when it does."""
    counts = gpu_counts(observations, settings)
    have = counts.get(host, 0)
    want = _wanted_count(settings)
    look = f"nvidia-smi -L; dmesg | grep -i -e xid -e 'fallen off'  (on {host})"
    if want and have != want:
        if have < want:
            why = (
                f"{want - have} missing: fallen off the bus, disabled, or the allocation gives "
                "fewer"
            )
            fix = f"{look}; reset the GPU or reboot, or drain {host}; {ASK_SLURM}"
        else:
            why = "more than nccl_gpus_per_node says this node type has"
            fix = f"{look}; set nccl_gpus_per_node to this node type's GPU count"
        message = f"{host}: nvidia-smi lists {have} GPUs, nccl_gpus_per_node is {want} ({why})"
        return _result("gpu", host, "failed", message, fix)
    most = max(counts.values(), default=0)
    if want or have >= most:
        return None
    others = {h: c for h, c in counts.items() if h != host}
    ref = reference_value(others, order, prefer=most) if others else most
    return _result(
        "gpu",
        host,
        "failed",
        f"{host}: nvidia-smi lists {have} GPUs, other hosts {ref} (nccl_gpus_per_node unset: "
        f"every node must show the same count); host -> GPUs:\n" + host_table(counts, order),
        f"{look}; reset the GPU or reboot, or leave {host} out; set nccl_gpus_per_node where "
        "nodes differ by design",
    )


# --------------------------------------------------------------------------- torch
def _visible_devices(obs: dict, settings: dict) -> tuple[str | None, str]:
    """CUDA_VISIBLE_DEVICES as the ranks get it (nccl_extra_env's, else the node's), and where
    it comes from."""
    extra = settings.get("extra_env") or {}
    if "CUDA_VISIBLE_DEVICES" in extra:
        return str(extra["CUDA_VISIBLE_DEVICES"]), "nccl_extra_env"
    health = (obs.get("facts") or {}).get("gpu_health") or {}
    value = health.get("cuda_visible_devices")
    return (None if value is None else str(value)), "the node's environment"


def no_cuda_result(obs: dict, settings: dict) -> dict:
    """Failed: torch on ``obs``'s host does not see CUDA, with the likely cause and its fix."""
    host = obs["host"]
    py = python_facts_of(obs)
    python = obs.get("python") or py.get("executable") or "python"
    probe = f'{python} -c "import torch; print(torch.cuda.is_available(), torch.version.cuda)"'
    value, where = _visible_devices(obs, settings)
    if py.get("torch_version") and not py.get("cuda_version"):
        why = f"torch {py['torch_version']} is a CPU build (torch.version.cuda is None)"
        fix = "install a CUDA build of torch"
    elif value is not None and py.get("torch_version"):
        why = (
            f"CUDA_VISIBLE_DEVICES={value!r} ({where}) hides the GPUs from torch: empty, or "
            "naming GPUs this node does not have"
        )
        fix = f"unset CUDA_VISIBLE_DEVICES or set it to GPUs nvidia-smi -L lists ({where})"
    else:
        why = py.get("reason") or f"torch {py.get('torch_version')} reports no CUDA"
        fix = "install a CUDA build of torch matching the driver (nvidia-smi shows its CUDA)"
    return _result(
        "gpu",
        host,
        "failed",
        f"{host}: torch in {python} does not see CUDA: {why}",
        f"{probe}  (on {host}); {fix}",
    )


# --------------------------------------------------------------------------- checks
def check_gpu(observations: dict, host: str, settings: dict, order: list[str]) -> dict:
    """The GPUs of ``host`` are there, as many as expected, one per rank, seen by torch."""
    obs = observations[host]
    skip = nccl_gpu_skip(obs, settings)
    if skip:
        return _result("gpu", host, "skipped", f"{host}: {skip}")
    facts = obs.get("facts") or {}
    gpus = facts.get("gpus") or []
    if not gpus:
        return no_gpu_result(host, facts, settings, str(obs.get("backend") or ""))
    counted = check_count(observations, host, settings, order)
    if counted:
        return counted
    want = int(obs.get("nproc_per_node") or 1)
    few = too_few_devices("gpu", host, len(gpus), want, ("GPUs", "GPU", "nvidia-smi -L"))
    if few:
        return few
    py = python_facts_of(obs)
    if not py.get("cuda_available"):
        return no_cuda_result(obs, settings)
    wanted = _wanted_count(settings)
    return _result(
        "gpu",
        host,
        "passed",
        f"{host}: {len(gpus)} x {gpus[0].get('name')}, driver {gpus[0].get('driver_version')}, "
        f"{want} ranks planned, torch sees {py.get('device_count')} CUDA devices"
        + (f"; nccl_gpus_per_node {wanted}" if wanted else ""),
    )


def _gpu_model(obs: dict) -> str | None:
    gpus = (obs.get("facts") or {}).get("gpus") or []
    names = sorted({g.get("name") for g in gpus})
    return " + ".join(str(n) for n in names) if names else None


def check_gpu_model(observations: dict, host: str, settings: dict, order: list[str]) -> dict:
    obs = observations[host]
    skip = nccl_gpu_skip(obs, settings)
    if skip:
        return _result("gpu_model", host, "skipped", f"{host}: {skip}")
    mine = _gpu_model(obs)
    if mine is None:
        return _result("gpu_model", host, "skipped", f"{host}: no GPU to compare (see check gpu)")
    if " + " in mine:
        return _result(
            "gpu_model",
            host,
            "failed",
            f"{host} mixes GPU models: {mine}",
            f"nvidia-smi -L  (on {host}); restrict CUDA_VISIBLE_DEVICES to one model",
        )
    values = {h: m for h, o in observations.items() if (m := _gpu_model(o)) is not None}
    ref = reference_value(values, order)
    if mine == ref:
        return _result("gpu_model", host, "passed", f"{host}: {mine}, like the other hosts")
    return _result(
        "gpu_model",
        host,
        "failed",
        f"{host}: GPU model {mine} differs from the other hosts ({ref}); host -> GPU model:\n"
        + host_table(values, order),
        "nvidia-smi -L  (on every host); run on hosts with one GPU model",
    )
