# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The whole pre-flight judgement of a run: every host's checks from every host's observation.

One call for all hosts, made once per run by each front-end (roles/preflight's run_once task, the
Slurm command): the host and network checks (host_checks, with gpu and gpu_model from
gpu_presence), then the GPU node health checks (gpu_checks), the fabric checks (fabric_checks),
the NPU checks (npu_checks) and backend_choice (backend_checks); last, a failed probe that another
failed check explains gets a pointer to it (causes).

``judge_node`` judges one node alone (the Slurm front-end's node check, a HealthCheckProgram or
Prolog): the same checks, keeping only those that need no peer (NODE_CHECKS).
"""

from __future__ import annotations

from typing import Any

from .backend_checks import nccl_backend_checks_add
from .causes import nccl_preflight_causes
from .fabric_checks import FABRIC_CHECKS, nccl_fabric_judge
from .gpu_checks import GPU_CHECKS, nccl_gpu_health_add
from .host_checks import judge_host_checks
from .npu_checks import nccl_npu_checks_add

ResultsByHost = dict[str, list[dict[str, Any]] | None]

# The checks a node passes or fails by itself: no probe, no listener, no comparison with a peer
# (mtu, gpu_model, npu_model, clock, backend_choice compare hosts; master_addr, master_port_free,
# firewall and the tcp_* probes need the run's other hosts). versions compares with the peers
# too, but alone it still reads torch and holds it against nccl_expected_versions.
NODE_CHECKS = (
    "interface",
    "hostname",
    "gpu",
    *GPU_CHECKS,
    *FABRIC_CHECKS,
    "versions",
    "npu",
    "hccl_ports",
)


def judge_preflight(
    observations: dict[str, dict[str, Any]], present: list[str], settings: dict[str, Any]
) -> ResultsByHost:
    """Every host of settings["order"]: its results (a list of check results), or None for a host
    not in ``present`` (it dropped out before the pre-flight).

    ``observations``: each host's observation (observation.nccl_preflight_observation);
    ``settings``: master, order, require_gpu, gpus_per_node, expected_versions, clock_check,
    clock_max_skew_s, full_mesh, extra_env, extra_env_by_host, requested_backend (docs/design.md,
    "Pre-flight results" and "GPUs required").
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


def judge_node(
    host: str, observation: dict[str, Any], settings: dict[str, Any]
) -> list[dict[str, Any]]:
    """The results of the NODE_CHECKS of one node judged alone, in judge_preflight's order.

    ``settings`` as for judge_preflight, without master and order (the node is both); the clock
    check is off (it compares clocks). The node is judged for the cluster it joins
    (``node_alone``): a hostname on loopback fails as in a run of several hosts.
    """
    alone = {**settings, "master": host, "order": [host], "clock_check": False, "node_alone": True}
    results = judge_preflight({host: observation}, [host], alone)[host] or []
    return [result for result in results if result.get("check") in NODE_CHECKS]
