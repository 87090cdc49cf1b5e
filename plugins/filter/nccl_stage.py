# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The stage API (src/nccl_preflight/core/stage.py) as filters for the roles: the same functions
the Slurm front-end calls, so both front-ends take each decision in one place. The first
argument is the run's variables by name (roles/launch/vars/main.yml ``launch_stage_knobs``,
roles/preflight/vars/main.yml ``preflight_stage_knobs``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from nccl_preflight.core import stage
from nccl_preflight.core.layout import LayoutError


def rank_layout(hostvars: Mapping[str, Any], order: list[str], knobs: Any) -> dict[str, Any]:
    """core/stage.py rank_layout of ``order`` from ``hostvars``: each host's own variables as
    roles/nccl_env kept them (nccl_env_knobs; a host the play never reached: its inventory's
    nccl_slots and nccl_nproc_per_node), its facts (ansible_facts.nccl, none when unreached).
    One hostvars lookup per host, in the one task that runs once for all."""
    knobs_by_node, facts = {}, {}
    for host in order:
        mine = hostvars[host]
        own = mine.get("nccl_env_knobs")
        if not own:
            own = {name: mine.get(name) for name in ("nccl_slots", "nccl_nproc_per_node")}
        knobs_by_node[host] = own
        facts[host] = (mine.get("ansible_facts") or {}).get("nccl")
    try:
        return stage.rank_layout(knobs, list(order), knobs_by_node, facts)
    except LayoutError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def _refused(function: Any) -> Any:
    """``function`` with a StageError raised as Ansible's filter error (it names the variable)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except stage.StageError as exc:
            raise AnsibleFilterError(str(exc)) from exc

    call.__doc__ = function.__doc__
    return call


class FilterModule:
    """One filter per stage decision."""

    def filters(self) -> dict[str, Any]:
        functions = {
            "nccl_stage_check_timeout": stage.check_timeout,
            "nccl_stage_relaunch_timeout": stage.relaunch_timeout,
            "nccl_stage_kill_grace": stage.kill_grace,
            "nccl_stage_pair_triggers": stage.pair_triggers,
            "nccl_stage_rank_args": stage.rank_args,
            "nccl_stage_relaunch_rank_args": stage.relaunch_rank_args,
            "nccl_stage_skip_reason": stage.skip_reason,
            "nccl_stage_plan": stage.plan_document,
            "nccl_stage_preflight_settings": stage.preflight_settings,
            "nccl_stage_rank_layout": rank_layout,
            "nccl_stage_run_backend": stage.run_backend,
            "nccl_stage_node_environment": stage.node_environment,
        }
        return {name: _refused(function) for name, function in functions.items()}
