# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Every host of a launch: its row of plan.json, and what its launch calls returned.

``plan_host`` is a host's row of plan.json for both front-ends (roles/launch/tasks/plan.yml
through ``nccl_plan_hosts``, slurm/run.py). The ``nccl_*`` functions are roles/launch's filters:
``hostvars`` is Ansible's mapping of host -> variables (any mapping of mappings will do); the
registered results are read as Ansible's ``is failed``, ``is unreachable`` and ``is skipped``
tests read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nccl_preflight.core.config import TRUE_WORDS
from nccl_preflight.core.preflight.fabric_checks import nccl_expect_net, nccl_rdma_plan
from nccl_preflight.core.run_watch import not_started_reason


def plan_host(
    row: Mapping[str, Any],
    *,
    address: str | None,
    ifname: str | None,
    facts: Mapping[str, Any] | None,
    extra_env: Mapping[str, Any] | None,
    reachable: bool,
    backend_choice: Mapping[str, Any] | None,
    expect_net: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """A host's row of plan.json: its place in the rank layout (``row``: core/layout.py), its
    fabric address and interface, that interface's speed, its active RDMA ports
    (nccl_rdma_plan), whether it answered, its backend choice and the network NCCL should use
    (nccl_expect_net, worked out by the caller)."""
    interfaces = (facts or {}).get("interfaces") or {}
    return {
        **{key: row[key] for key in ("host", "node_rank", "nproc_per_node", "rank_offset")},
        "address": address,
        "ifname": ifname,
        "link_speed_mbps": (interfaces.get(ifname or "") or {}).get("speed_mbps"),
        "rdma": nccl_rdma_plan(dict(facts or {}), dict(extra_env or {})),
        "reachable": reachable,
        "backend_choice": backend_choice,
        "expect_net": expect_net,
    }


def nccl_plan_hosts(
    layout: Mapping[str, Any],
    hostvars: Mapping[str, Mapping[str, Any]],
    present: Iterable[str],
    expect_net: str,
) -> list[dict[str, Any]]:
    """Every host's row of plan.json, those that dropped out included (not in ``present``), from
    the nccl_env_* facts and ansible_facts.nccl of Ansible's hostvars; ``expect_net`` is the
    run's nccl_expect_net setting."""
    here = set(present)
    rows = []
    for row in layout["hosts"]:
        mine = hostvars[row["host"]]
        facts = (mine.get("ansible_facts") or {}).get("nccl") or {}
        ifname = mine.get("nccl_env_ifname")
        rows.append(
            plan_host(
                row,
                address=mine.get("nccl_env_address"),
                ifname=ifname,
                facts=facts,
                extra_env=mine.get("nccl_extra_env", {}),
                reachable=row["host"] in here,
                backend_choice=mine.get("nccl_env_backend_choice"),
                expect_net=nccl_expect_net(facts, ifname or "", expect_net),
            )
        )
    return rows


def nccl_not_started(hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]) -> list[str]:
    """The hosts whose start call (launch_start) failed or could not reach the node: without
    them the static rendezvous cannot complete, so every other node's wait ends at once."""
    failed = []
    for host in hosts:
        started = hostvars[host].get("launch_start")
        if started is not None and (started.get("failed") or started.get("unreachable")):
            failed.append(host)
    return failed


def nccl_not_started_reason(hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]) -> str:
    """The wait's ``stop_reason`` after a start call of its own: why every other node's run ends
    at once (run_watch.not_started_reason), or '' when torchrun started everywhere."""
    failed = nccl_not_started(hostvars, hosts)
    return not_started_reason(failed) if failed else ""


def last_launch_call(mine: Mapping[str, Any]) -> Mapping[str, Any]:
    """A host's last launch call: the stop when it ran (the wait failed or never ran), else the
    wait (roles/launch/tasks/run.yml); {} when neither ran."""
    stop = mine.get("launch_stop")
    last = stop if stop is not None and not stop.get("skipped") else mine.get("launch_result")
    return last if last is not None else {}


def nccl_launch_ended(
    hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]
) -> list[dict[str, Any]]:
    """How the run ended on each host, from its last launch call (the stop when it ran, else the
    wait): [{host, timed_out, stopped_by, stop, rank_exits}], what nccl_pairwise_relaunch reads."""
    rows = []
    for host in hosts:
        last = last_launch_call(hostvars[host])
        rows.append(
            {
                "host": host,
                "timed_out": last.get("timed_out", False),
                "stopped_by": last.get("stopped_by"),
                "stop": last.get("stop"),
                "rank_exits": last.get("rank_exits", []),
            }
        )
    return rows


def _removed(result: Any) -> bool:
    """Whether a call's result (a dict, or none when it never ran) says it removed the run dir."""
    return bool(isinstance(result, Mapping) and result.get("run_dir_removed"))


def nccl_cleanup_left(
    hostvars: Mapping[str, Mapping[str, Any]],
    hosts: Iterable[str],
    groups: Mapping[str, Iterable[str]],
    keep_run_dir: bool = False,
) -> dict[str, str]:
    """What roles/cleanup has left to do, by host (only hosts with something left):
    ``run_dir`` where the environment was ready and no call of the run removed its run directory
    (the launch's last call, the pre-flight's probe or its late stop of the listeners), unless
    launch_keep_run_dir (the host's own, else ``keep_run_dir``); ``listeners`` where the
    environment stage stopped the run after the facts play started the pre-flight's listeners.
    One answer for the play's end (empty: nothing left anywhere) and for each task's condition."""
    ready = set(groups.get("nccl_env_ready") or ())
    stopped = set(groups.get("nccl_env_stopped") or ())
    left = {}
    for host in hosts:
        mine = hostvars[host]
        if host in ready and mine.get("nccl_env_run_dir") is not None:
            last = last_launch_call(mine)
            keep = mine.get("launch_keep_run_dir")
            kept = str(keep_run_dir if keep is None else keep).strip().lower() in TRUE_WORDS
            collects = [
                (mine.get(name) or {}).get("collect")
                for name in ("preflight_probe", "preflight_late_collect")
            ]
            if not kept and not _removed(last) and not any(_removed(c) for c in collects):
                left[host] = "run_dir"
        elif host in stopped:
            started = ((mine.get("facts_start_result") or {}).get("preflight") or {}).get("changed")
            if started:
                left[host] = "listeners"
    return left
