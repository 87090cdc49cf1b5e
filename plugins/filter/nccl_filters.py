# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The project's Jinja filters: names for the roles, the work in nccl_preflight.core.

Each filter is a function of the core (plain Python, tested there); this file only names them
for Ansible. The run owner and the forks question read Ansible itself: plugins/filter/
nccl_run_owner.py.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError

from nccl_preflight.core.env_file import nccl_env_file_text, nccl_env_report_files
from nccl_preflight.core.env_findings import nccl_env_findings, nccl_env_stop_text
from nccl_preflight.core.inputs import nccl_input_names, nccl_input_problems
from nccl_preflight.core.launch_hosts import (
    nccl_cleanup_left,
    nccl_launch_ended,
    nccl_not_started_reason,
    nccl_plan_hosts,
)
from nccl_preflight.core.layout import LayoutError, nccl_rank_layout
from nccl_preflight.core.pair_triggers import (
    nccl_pair_trigger_args,
    nccl_pair_trigger_note,
    nccl_pair_triggers,
)
from nccl_preflight.core.pairwise_relaunch import nccl_pairwise_relaunch, nccl_relaunch_check_args
from nccl_preflight.core.preflight.backend_checks import nccl_backend_choice
from nccl_preflight.core.preflight.fabric_checks import nccl_expect_net, nccl_rdma_plan
from nccl_preflight.core.preflight.host_checks import (
    nccl_preflight_failed_hosts,
    nccl_preflight_failures_text,
    nccl_preflight_probe_plan,
)
from nccl_preflight.core.preflight.judge import judge_preflight
from nccl_preflight.core.preflight.npu_checks import nccl_hccl_base_port
from nccl_preflight.core.preflight.observation import nccl_preflight_observation
from nccl_preflight.core.preflight.start import nccl_preflight_start
from nccl_preflight.core.rank_args import nccl_rank_args_problems
from nccl_preflight.core.run_watch import nccl_watch_hosts
from nccl_preflight.core.support import nccl_predicted_skips
from nccl_preflight.node.fabric_choice import nccl_fabric_choice


def rank_layout(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """nccl_rank_layout, its refusal as Ansible's filter error (the message names the value)."""
    try:
        return nccl_rank_layout(*args, **kwargs)
    except LayoutError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    """Validation, layout, environment, pre-flight, pairwise and support-table filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "nccl_input_names": nccl_input_names,
            "nccl_input_problems": nccl_input_problems,
            "nccl_rank_args_problems": nccl_rank_args_problems,
            "nccl_rank_layout": rank_layout,
            "nccl_fabric_choice": nccl_fabric_choice,
            "nccl_env_findings": nccl_env_findings,
            "nccl_env_stop_text": nccl_env_stop_text,
            "nccl_env_file_text": nccl_env_file_text,
            "nccl_env_report_files": nccl_env_report_files,
            "nccl_backend_choice": nccl_backend_choice,
            "nccl_expect_net": nccl_expect_net,
            "nccl_rdma_plan": nccl_rdma_plan,
            "nccl_hccl_base_port": nccl_hccl_base_port,
            "nccl_preflight_observation": nccl_preflight_observation,
            "nccl_preflight_start": nccl_preflight_start,
            "nccl_preflight_probe_plan": nccl_preflight_probe_plan,
            "nccl_preflight_judge": judge_preflight,
            "nccl_preflight_failed_hosts": nccl_preflight_failed_hosts,
            "nccl_preflight_failures_text": nccl_preflight_failures_text,
            "nccl_pair_triggers": nccl_pair_triggers,
            "nccl_pair_trigger_args": nccl_pair_trigger_args,
            "nccl_pair_trigger_note": nccl_pair_trigger_note,
            "nccl_pairwise_relaunch": nccl_pairwise_relaunch,
            "nccl_relaunch_check_args": nccl_relaunch_check_args,
            "nccl_predicted_skips": nccl_predicted_skips,
            "nccl_watch_hosts": nccl_watch_hosts,
            "nccl_not_started_reason": nccl_not_started_reason,
            "nccl_launch_ended": nccl_launch_ended,
            "nccl_plan_hosts": nccl_plan_hosts,
            "nccl_cleanup_left": nccl_cleanup_left,
        }
