# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl_backend: auto, decided per host from its facts and explained (docs/design.md).

nccl on NVIDIA GPUs (nvidia-smi), hccl on Ascend NPUs (npu-smi info), xccl on Intel XPUs
(torch.xpu, asked only when neither was found), gloo otherwise; the same order as
files/nccl_check.py's open_device (torch's accelerator: cuda, npu, xpu, else cpu).

The pre-flight check backend_choice (`nccl_backend_checks_add`, appended to every host's
results): every rank runs the master's choice (nccl_env_backend), so with auto a host that would
choose otherwise (a GPU node whose nvidia-smi finds no GPU, among GPU nodes) fails by name, with
what it found and what the others chose, before anything is launched. Skipped, with the reason,
when nccl_backend is not auto.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nccl_preflight.core.preflight.result import append_results, check_result, rank_order


def _names(items: list[dict[str, Any]], key: str = "name") -> str:
    counts = Counter(str(i.get(key) or "?") for i in items)
    return ", ".join(f"{n} x {name}" if n > 1 else name for name, n in counts.items())


def nccl_backend_choice(facts: dict[str, Any] | None, requested: str = "auto") -> dict[str, Any]:
    """{backend, reason, devices} of one host: what it found and why that backend."""
    facts = facts or {}
    acc = facts.get("accelerators") or {}
    gpus, npus, xpus = facts.get("gpus") or [], acc.get("npus") or [], acc.get("xpus") or []
    if requested != "auto":
        devices = len(gpus) or len(npus) or len(xpus)
        return {"backend": requested, "reason": f"nccl_backend is {requested}", "devices": devices}
    if gpus:
        reason = f"{len(gpus)} NVIDIA GPU(s) (nvidia-smi: {_names(gpus)}): nccl"
        return {"backend": "nccl", "reason": reason, "devices": len(gpus)}
    if npus:
        cards = len({n.get("npu") for n in npus})
        version = acc.get("npu_smi_version") or "?"
        reason = (
            f"{len(npus)} Ascend NPU chip(s) on {cards} card(s) (npu-smi {version}: "
            f"{_names(npus)}): hccl"
        )
        return {"backend": "hccl", "reason": reason, "devices": len(npus)}
    if xpus:
        reason = f"{len(xpus)} Intel XPU(s) (torch.xpu: {_names(xpus)}): xccl"
        return {"backend": "xccl", "reason": reason, "devices": len(xpus)}
    why = [
        f"no NVIDIA GPU ({facts.get('gpus_reason') or 'none listed'})",
        f"no Ascend NPU ({acc.get('npus_reason') or 'none listed'})",
        f"no Intel XPU ({acc.get('xpus_reason') or 'none listed'})",
    ]
    return {"backend": "gloo", "reason": "; ".join(why) + ": gloo on the CPU", "devices": 0}


# Where each backend's devices are listed, for the hint.
LOOK = {
    "nccl": "nvidia-smi -L",
    "hccl": "npu-smi info",
    "xccl": "python -c 'import torch; print(torch.xpu.device_count())'",
    "gloo": "nvidia-smi -L; npu-smi info",
}


def _result(host: str, status: str, message: str, hint: str = "") -> dict[str, str]:
    return check_result("backend_choice", host, status, message, hint)


def _found(choice: dict[str, Any]) -> str:
    """What a host found: the choice's reason without its ': <backend>' tail."""
    reason = str(choice.get("reason") or "")
    for tail in (": gloo on the CPU", f": {choice.get('backend')}"):
        if reason.endswith(tail):
            return reason[: -len(tail)]
    return reason


def check_backend_choice(
    host: str, choices: dict[str, dict[str, Any]], master: str, requested: str
) -> dict[str, str]:
    if requested != "auto":
        return _result(
            host, "skipped", f"{host}: nccl_backend is {requested}, not auto: no host chooses"
        )
    mine = choices.get(host)
    ref = choices.get(master)
    if mine is None or ref is None:
        who = host if mine is None else master
        return _result(host, "skipped", f"{host}: no facts from {who} to choose a backend from")
    if mine["backend"] == ref["backend"]:
        return _result(
            host, "passed", f"{host}: chose {mine['backend']} like the master ({_found(mine)})"
        )
    same = [h for h, c in choices.items() if c["backend"] == ref["backend"]]
    others = "the others" if len(same) == len(choices) - 1 else ", ".join(same)
    return _result(
        host,
        "failed",
        f"{host} found {_found(mine)} and would use {mine['backend']}; {others} chose "
        f"{ref['backend']} (the master {master}: {_found(ref)}), and every rank runs the "
        "master's choice",
        f"{LOOK.get(mine['backend'], LOOK['gloo'])}  (on {host}); fix its "
        f"{ref['backend']} devices, or leave {host} out, or set nccl_backend explicitly "
        "(gloo runs on every host's CPU)",
    )


def nccl_backend_checks_add(
    results_by_host: dict[str, list[dict] | None],
    observations: dict[str, dict],
    settings: dict | None = None,
) -> dict[str, list[dict] | None]:
    """results_by_host with backend_choice appended; None stays None."""
    settings = settings or {}
    requested = str(settings.get("requested_backend") or "auto")
    order = rank_order(observations, settings)
    master = str(settings.get("master") or (order[0] if order else ""))
    choices = {
        h: nccl_backend_choice(observations[h].get("facts"), "auto")
        for h in order
        if (observations.get(h) or {}).get("facts")
    }
    return append_results(
        results_by_host, lambda host: [check_backend_choice(host, choices, master, requested)]
    )
