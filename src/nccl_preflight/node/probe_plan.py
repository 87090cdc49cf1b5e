# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Whom each host probes in the pre-flight, and on which port: pure functions of the host order,
every host's listener ports and fabric address.

The Ansible path works the plan out on the control machine (roles/preflight/vars/main.yml
through the filters of the same names, re-exported by core/preflight/host_checks.py); the Slurm
front-end's node step works out its own plan on the node from the inputs every node shares
(slurm/node_step.py), so that no node receives the others' plans. Standard library only.
"""

from __future__ import annotations

from typing import Any


def nccl_preflight_ring_peers(order: list[str], host: str, full_mesh: bool = False) -> list[str]:
    """Whom ``host`` probes on an ephemeral port: the next host in rank order, or all others."""
    if host not in order or len(order) < 2:
        return []
    if full_mesh:
        return [h for h in order if h != host]
    return [order[(order.index(host) + 1) % len(order)]]


def nccl_preflight_expected_connections(
    order: list[str], host: str, full_mesh: bool = False
) -> int:
    """How many peers will connect to ``host``'s ephemeral listener (one pass over ``order``:
    every node of a large allocation works this out for itself)."""
    if host not in order or len(order) < 2:
        return 0
    if full_mesh:
        return sum(h != host for h in order)
    return sum(order[(i + 1) % len(order)] == host for i in range(len(order)))


def preflight_listeners(
    order: list[str],
    host: str,
    master: str,
    master_port: Any,
    full_mesh: bool = False,
    hccl_port: Any = None,
) -> list[dict[str, Any]]:
    """The listeners the pre-flight starts on ``host`` (both front-ends): MASTER_PORT on the
    master (every node connects to it), an ephemeral ring port where peers will probe, and
    beside it HCCL's base port (``hccl_port``) where the node may use hccl."""
    specs: list[dict[str, Any]] = []
    if host == master:
        specs.append(
            {
                "name": "master",
                "address": "fabric",
                "port": int(master_port),
                "connections": len(order),
            }
        )
    wanted = nccl_preflight_expected_connections(order, host, full_mesh)
    if wanted > 0:
        specs.append({"name": "ring", "address": "fabric", "port": 0, "connections": wanted})
    if wanted > 0 and hccl_port is not None:
        specs.append(
            {
                "name": "hccl",
                "address": "fabric",
                "backend": "hccl",
                "port": int(hccl_port),
                "connections": wanted,
            }
        )
    return specs


def nccl_preflight_probe_plan(
    ports_by_host: dict[str, dict],
    host: str,
    master: str,
    order: list[str],
    addresses: dict[str, str],
    full_mesh: bool = False,
    hccl_port: int = 0,
) -> dict[str, Any]:
    """The nccl_preflight_observe targets of ``host`` and, per probe, why it cannot run.

    ``ports_by_host``: each host's listener ports, as the pre-flight's start (nccl_facts' RV
    preflight) returns them ({"master"|"ring"|"hccl": {"port", "error"}});
    ``addresses``: each host's fabric address; ``hccl_port``: HCCL_IF_BASE_PORT when the run's
    backend is hccl, else 0: a ring peer that started its listeners but no hccl one (it would not
    use hccl itself) is still probed there, and tcp_hccl_port says it holds no HCCL listener.
    -> {"targets": [...], "skip": {name: reason}}.
    """
    targets: list[dict[str, Any]] = []
    skip: dict[str, str] = {}
    master_entry = (ports_by_host.get(master) or {}).get("master") or {}
    if not addresses.get(master):
        skip["master"] = f"the master {master} has no fabric address"
    elif not master_entry:
        skip["master"] = f"no listener was started on the master {master} (MASTER_PORT busy?)"
    elif master_entry.get("error"):
        skip["master"] = f"the listener on {master} failed: {master_entry['error']}"
    else:
        targets.append(
            {
                "name": "master",
                "host": master,
                "address": addresses[master],
                "port": int(master_entry["port"]),
            }
        )
    peers = nccl_preflight_ring_peers(order, host, full_mesh)
    if not peers:
        skip["ring"] = "a single host has no ring neighbour"
    for peer in peers:
        entry = (ports_by_host.get(peer) or {}).get("ring") or {}
        if not addresses.get(peer):
            skip["ring"] = f"{peer} has no fabric address"
        elif not entry or entry.get("error"):
            skip["ring"] = f"{peer} holds no ephemeral listener {entry.get('error') or ''}".strip()
        else:
            targets.append(
                {
                    "name": "ring",
                    "host": peer,
                    "address": addresses[peer],
                    "port": int(entry["port"]),
                }
            )
        # hccl: HCCL's host port (HCCL_IF_BASE_PORT), listened on only with the hccl backend.
        hccl = (ports_by_host.get(peer) or {}).get("hccl") or {}
        if hccl.get("error"):
            skip["hccl"] = f"{peer} could not listen on HCCL's port: {hccl['error']}"
        elif addresses.get(peer) and (hccl or (hccl_port and entry and not entry.get("error"))):
            targets.append(
                {
                    "name": "hccl",
                    "host": peer,
                    "address": addresses[peer],
                    "port": int(hccl["port"]) if hccl else int(hccl_port),
                }
            )
    return {"targets": targets, "skip": skip}
