# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The whole pre-flight judgement of a run: every host's checks from every host's observation.

One call for all hosts, made once per run by each front-end (roles/preflight's run_once task, the
Slurm command): the host and network checks (host_checks), then the GPU node health checks
(gpu_checks), the fabric checks (fabric_checks), the NPU checks (npu_checks) and backend_choice
(backend_checks); last, a failed probe that another failed check explains gets a pointer to it
(causes).
"""

from __future__ import annotations

from typing import Any

from .backend_checks import nccl_backend_checks_add
from .causes import nccl_preflight_causes
from .fabric_checks import nccl_fabric_judge
from .gpu_checks import nccl_gpu_health_add
from .host_checks import judge_host_checks
from .npu_checks import nccl_npu_checks_add

ResultsByHost = dict[str, list[dict[str, Any]] | None]


def judge_preflight(
    observations: dict[str, dict[str, Any]], present: list[str], settings: dict[str, Any]
) -> ResultsByHost:
    """Every host of settings["order"]: its results (a list of check results), or None for a host
    not in ``present`` (it dropped out before the pre-flight).

    ``observations``: each host's observation (observation.nccl_preflight_observation);
    ``settings``: master, order, require_gpu, expected_versions, clock_check, clock_max_skew_s,
    full_mesh, extra_env, extra_env_by_host, requested_backend (docs/design.md, "Pre-flight").
    """
    results = judge_host_checks(observations, present, settings)
    for add in (
        nccl_gpu_health_add,
        nccl_fabric_judge,
        nccl_npu_checks_add,
        nccl_backend_checks_add,
    ):
        results = add(results, observations, settings)
    return nccl_preflight_causes(results, observations)
