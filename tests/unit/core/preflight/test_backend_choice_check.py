# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The backend_choice pre-flight check (core/preflight/backend_checks.py): with nccl_backend auto,
a host that would choose another backend than the master fails by name with what it found."""

from __future__ import annotations

from nccl_preflight.core.preflight.backend_checks import nccl_backend_checks_add
from nccl_preflight.node.accel_facts import parse_npu_smi_info
from tests.builders.facts import fixture

H100 = {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8, "accelerators": {}}
NO_GPU = {
    "gpus": [],
    "gpus_reason": "nvidia-smi -L lists no GPU: No devices were found",
    "accelerators": {"npus_reason": "npu-smi not found on PATH", "xpus_reason": "no XPU"},
}
B2 = parse_npu_smi_info(fixture("npu-smi/910b2-info.txt"))
ASCEND = {"accelerators": {"npus": B2["chips"], "npu_smi_version": B2["version"]}}


def judge(facts: dict[str, dict | None], requested: str = "auto") -> dict[str, dict | None]:
    observations = {h: ({"facts": f} if f is not None else {}) for h, f in facts.items()}
    settings = {"order": list(facts), "master": next(iter(facts)), "requested_backend": requested}
    out = nccl_backend_checks_add({h: [] for h in facts}, observations, settings)
    return {h: (r[-1] if r else None) for h, r in out.items()}


def test_the_gpu_node_without_a_gpu_fails_by_name_with_what_each_found() -> None:
    got = judge({"gpu1": H100, "gpu2": H100, "gpu3": NO_GPU})
    assert got["gpu1"] == {
        "check": "backend_choice",
        "host": "gpu1",
        "status": "passed",
        "message": "gpu1: chose nccl like the master (8 NVIDIA GPU(s) (nvidia-smi: 8 x NVIDIA "
        "H100 80GB HBM3))",
        "hint": "",
    }
    assert got["gpu2"]["status"] == "passed"
    odd = got["gpu3"]
    assert odd["status"] == "failed"
    assert odd["message"] == (
        "gpu3 found no NVIDIA GPU (nvidia-smi -L lists no GPU: No devices were found); no "
        "Ascend NPU (npu-smi not found on PATH); no Intel XPU (no XPU) and would use gloo; the "
        "others chose nccl (the master gpu1: 8 NVIDIA GPU(s) (nvidia-smi: 8 x NVIDIA H100 80GB "
        "HBM3)), and every rank runs the master's choice"
    )
    assert odd["hint"].startswith("nvidia-smi -L; npu-smi info  (on gpu3); fix its nccl devices")


def test_the_others_are_named_when_more_than_one_host_differs() -> None:
    got = judge({"a1": ASCEND, "a2": ASCEND, "c1": NO_GPU, "g1": H100})
    assert got["a2"]["status"] == "passed"
    assert got["c1"]["message"].startswith("c1 found no NVIDIA GPU")
    assert (
        "would use gloo; a1, a2 chose hccl (the master a1: 2 Ascend NPU chip(s)"
        in (got["c1"]["message"])
    )
    assert got["g1"]["message"].startswith(
        "g1 found 8 NVIDIA GPU(s) (nvidia-smi: 8 x NVIDIA H100 80GB HBM3) and would use nccl; "
        "a1, a2 chose hccl"
    )
    assert got["g1"]["hint"].startswith("nvidia-smi -L  (on g1); fix its hccl devices")


def test_skipped_when_the_backend_is_set_or_facts_are_missing() -> None:
    got = judge({"gpu1": H100, "gpu3": NO_GPU}, requested="nccl")
    assert got["gpu3"] == {
        "check": "backend_choice",
        "host": "gpu3",
        "status": "skipped",
        "message": "gpu3: nccl_backend is nccl, not auto: no host chooses",
        "hint": "",
    }
    got = judge({"gpu1": H100, "gpu2": None})
    assert got["gpu2"]["status"] == "skipped"
    assert got["gpu2"]["message"] == "gpu2: no facts from gpu2 to choose a backend from"
    assert got["gpu1"]["status"] == "passed"


def test_hosts_that_dropped_out_stay_none() -> None:
    observations = {"gpu1": {"facts": H100}, "gpu2": {"facts": NO_GPU}}
    out = nccl_backend_checks_add({"gpu1": [], "gpu2": None}, observations, {"master": "gpu1"})
    assert out["gpu2"] is None
    assert out["gpu1"][-1]["status"] == "passed"
