# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What the start call starts on a node for the pre-flight (library/nccl_preflight_start.py option
``preflight``, src/nccl_preflight/node/preflight_calls.py): the run directory, the listeners
(node/probe_plan.py preflight_listeners) on this host's fabric address and the torch probe, on
the master also who holds MASTER_PORT and the run lock. roles/facts passes this host's settings
and facts through the filter ``nccl_preflight_start``: the fabric address and the listeners this
node holds are worked out here, on the control machine, as the node would (for_fabric).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nccl_preflight.core.preflight.npu_checks import nccl_hccl_base_port
from nccl_preflight.node.preflight_calls import for_fabric
from nccl_preflight.node.probe_plan import preflight_listeners


def nccl_preflight_start(
    host: str,
    *,
    master: str,
    nodes: list[str],
    run_dir: str,
    run_dir_mode: str,
    python: str,
    python_timeout: Any,
    master_port: Any,
    socket_ifname: str,
    fabric_cidr: str,
    backend: str,
    listen_timeout: Any,
    full_mesh: Any,
    extra_env: Mapping[str, Any] | None,
    lock: Mapping[str, Any] | None,
    warm: bool = False,
    facts: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``preflight`` option of ``host``'s facts call. The hccl listener is held where the
    node may use hccl: ``backend`` hccl, or auto (the node's own facts decide; the master's auto
    choice is not known yet). ``check_port`` (who already holds MASTER_PORT; the master listener
    only starts when nobody does) on the master only; ``lock`` where given (the master's).
    With ``facts`` (the node's ansible_facts.nccl) the start call's option: the fabric listeners
    on the node's fabric address, the hccl one only where the node uses hccl, the lock path's
    {fabric_address} filled in, and that address (node/preflight_calls.py for_fabric)."""
    hccl_port = nccl_hccl_base_port(dict(extra_env or {})) if backend in ("hccl", "auto") else None
    start: dict[str, Any] = {
        "run_dir": run_dir,
        "run_dir_mode": run_dir_mode,
        "path": f"{run_dir}/preflight",
        # Empty: the interpreter that runs the module (what nccl_env_python will be).
        "python": python,
        "python_timeout": float(python_timeout),
    }
    if host == master:
        start["check_port"] = int(master_port)
    start.update(
        {
            "listeners": preflight_listeners(
                nodes, host, master, master_port, full_mesh, hccl_port
            ),
            "fabric": {"socket_ifname": socket_ifname, "cidr": fabric_cidr},
            "backend": backend,
            "timeout": float(listen_timeout),
            # a launch follows: the probe becomes torchrun (node/warm_launch.py)
            "warm": bool(warm),
        }
    )
    if lock is not None:
        start["lock"] = dict(lock)
    if facts is None:
        return start
    resolved = for_fabric({"lock": None, **start}, dict(facts))
    del resolved["fabric"], resolved["backend"]
    return resolved
