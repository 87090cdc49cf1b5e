# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""nccl_backend: auto, decided per host from its facts and explained (docs/design.md).

nccl on NVIDIA GPUs (nvidia-smi), hccl on Ascend NPUs (npu-smi info), xccl on Intel XPUs
(torch.xpu, asked only when neither was found), gloo otherwise; the same order as
files/nccl_check.py's choose_backend (torch's accelerator: cuda, npu, xpu, else cpu).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


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


class FilterModule:
    """The backend nccl_backend: auto chooses."""

    def filters(self) -> dict[str, Any]:
        return {"nccl_backend_choice": nccl_backend_choice}
