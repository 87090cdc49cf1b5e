# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The environment of a node's ranks and the text of its nccl.env, for both front-ends.

``rank_environment`` is what the ranks of one node see: the fabric interface for NCCL and Gloo,
the static rendezvous (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE), HCCL's host
NIC on Ascend, NCCL's log settings, then ``nccl_extra_env`` (which wins over every value here).
Both front-ends get it through core/stage.py node_environment. ``nccl_env_file_text``
(roles/nccl_env's filter) is that environment as the file the Ansible front-end writes on the
node and into reports/<run-id>/<host>/nccl.env (every value shell-quoted, so the file can be
sourced by hand). The Slurm front-end passes the same environment to its launch step, without
NCCL_DEBUG_FILE: the node puts the log into its own run directory.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

# The project's default for Ansible's ansible_managed (the file's first line).
MANAGED = "Ansible managed"


def debug_file(run_dir: str) -> str:
    """NCCL_DEBUG_FILE: one log per rank process in the run directory (NCCL expands %p to the
    pid; the collect step names it nccl-rank-<R>.log)."""
    return f"{run_dir}/results/nccl.%p.log"


def env_file_path(run_dir: str) -> str:
    """nccl.env in the node's run directory, where the launch's start call writes it."""
    return f"{run_dir}/nccl.env"


def _sorted_extra(extra_env: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """nccl_extra_env by name, case-insensitively (as Jinja's dictsort), values as strings."""

    def name_key(item: tuple[Any, Any]) -> Any:
        return item[0].lower() if isinstance(item[0], str) else item[0]

    return [(str(name), str(value)) for name, value in sorted(extra_env.items(), key=name_key)]


def rank_environment(
    node: Mapping[str, Any],
    *,
    debug: Any,
    debug_subsys: Any,
    extra_env: Mapping[Any, Any],
    run_dir: str | None,
) -> dict[str, str]:
    """The ranks' environment on one node, in nccl.env's order: the project's own values, then
    nccl_extra_env by name. ``node``: its ifname, address, master_addr, master_port, nnodes,
    node_rank, nproc_per_node and backend (the run's). Without run_dir no NCCL_DEBUG_FILE (the
    node sets its own)."""
    ifname = node["ifname"]
    extra = _sorted_extra(extra_env)
    extra_names = {name for name, _ in extra}
    env: dict[str, Any] = {
        "NCCL_SOCKET_IFNAME": ifname,
        "GLOO_SOCKET_IFNAME": ifname,
        "MASTER_ADDR": node["master_addr"],
        "MASTER_PORT": node["master_port"],
        "NNODES": node["nnodes"],
        "NODE_RANK": node["node_rank"],
        "NPROC_PER_NODE": node["nproc_per_node"],
    }
    # HCCL (Ascend) takes its host NIC for initialization from HCCL_IF_IP, else
    # HCCL_SOCKET_IFNAME (CANN environment variable reference: envref HCCL_IF_IP,
    # HCCL_SOCKET_IFNAME).
    if node["backend"] == "hccl":
        for name, value in (("HCCL_SOCKET_IFNAME", ifname), ("HCCL_IF_IP", node["address"])):
            if name not in extra_names:
                env[name] = value
    # NCCL's own log, for the transport it chose (core/transport.py): INFO with the
    # INIT,NET,GRAPH subsystems. What nccl_extra_env sets wins.
    level = str(dict(extra).get("NCCL_DEBUG", debug))
    if "NCCL_DEBUG" not in extra_names:
        env["NCCL_DEBUG"] = level
    subsys_wanted = level.upper() in ("INFO", "TRACE") and bool(debug_subsys)
    if subsys_wanted and "NCCL_DEBUG_SUBSYS" not in extra_names:
        env["NCCL_DEBUG_SUBSYS"] = debug_subsys
    if run_dir is not None and "NCCL_DEBUG_FILE" not in extra_names:
        env["NCCL_DEBUG_FILE"] = debug_file(run_dir)
    out = {name: str(value) for name, value in env.items()}
    out.update(extra)
    return out


def _shown(value: Any) -> str:
    """A value in a comment line as Ansible's templating shows it (None as nothing)."""
    return "" if value is None else str(value)


def nccl_env_file_text(
    node: Mapping[str, Any],
    *,
    host: str,
    run_id: Any,
    backend_choice: Mapping[str, Any],
    nccl_backend: str,
    managed: str = MANAGED,
) -> str:
    """The filter of roles/nccl_env: nccl.env of one host from its environment (core/stage.py
    node_environment: ``env``, ``node_rank``, ``backend``, ``file``), with who it is for, how to
    source it by hand, the backend and why, then one shell-quoted NAME='value' line per
    variable."""
    reason = re.sub(r"[\r\n]+", " ", _shown((backend_choice or {}).get("reason", "")))
    chosen = _shown((backend_choice or {}).get("backend", "?"))
    env_file, backend = node["file"], _shown(node["backend"])
    lines = [
        f"# {_shown(managed)}",
        f"# NCCL/Gloo environment of {host} (node rank {_shown(node['node_rank'])})"
        f" for run {_shown(run_id)}.",
        f"# The launch writes it on {host} as {env_file} (kept after the run with",
        f"# -e launch_keep_run_dir=true); to rerun by hand there: set -a; . {env_file}; set +a",
        f"# Backend {backend} (the master's choice; nccl_backend {_shown(nccl_backend)})."
        f" This host: {chosen}, {reason}",
    ]
    lines += [f"{name}={shlex.quote(str(value))}" for name, value in node["env"].items()]
    return "\n".join(lines) + "\n"


def nccl_env_report_files(
    hostvars: Mapping[str, Mapping[str, Any]],
    hosts: list[str],
    findings: Mapping[str, Any],
    layout: Mapping[str, Any],
    run_report_dir: str,
) -> list[dict[str, Any]]:
    """What the environment stage writes into reports/<run-id>/ (roles/nccl_env): each host's
    nccl.env (``<host>/nccl.env``, its nccl_env_file_content with its nccl_env_file_mode), then
    each host's environment finding with its place in the rank layout
    (``preflight/<host>.json``), as nccl_report_file items {dest, content, mode} / {dest, data}."""
    files: list[dict[str, Any]] = []
    for host in hosts:
        mine = hostvars[host]
        files.append(
            {
                "dest": f"{run_report_dir}/{host}/nccl.env",
                "content": mine.get("nccl_env_file_content"),
                "mode": mine.get("nccl_env_file_mode"),
            }
        )
    for host, finding in findings.items():
        files.append(
            {
                "dest": f"{run_report_dir}/preflight/{host}.json",
                "data": {"host": host, "results": [finding], "layout": layout["by_host"][host]},
            }
        )
    return files
