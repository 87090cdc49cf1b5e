# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The rank layout: which global ranks each node runs. The one place it is worked out.

``nccl_rank_layout(hosts, slots, devices, default)`` is called once by roles/nccl_env (a
run_once fact ``nccl_env_layout`` on every host, from which each host's ``nccl_env_node_rank``,
``nccl_env_nproc_per_node``, ``nccl_env_rank_offset`` and ``nccl_env_world_size`` are read);
roles/launch reads the same fact for plan.json, torchrun's arguments, nccl_check.py's
``--ranks-per-node`` and the watch's ranks per host, so none of them can disagree.

Arguments, each per host (a mapping by host, or a list in the order of ``hosts``):

    hosts    inventory names in node-rank order (groups['nccl_nodes']: hostfile order,
             0..N-1, checked by roles/validate_inputs)
    slots    the hostfile's slots= (nccl_slots); 0, None or missing: not given
    devices  the accelerators the backend choice counted (nccl_env_backend_choice.devices);
             0, None or missing: none counted, or the host could not be reached
    default  nccl_nproc_per_node: one int for every host, or per host

A node's ranks: its slots, else its device count, else the default. A host that could not be
reached has no device count of its own: its slots, else the default.

Result:

    {"world_size": int,          # the sum of every node's nproc_per_node
     "nnodes": int,
     "hosts": [{"host": str,
                "node_rank": int,          # its place in hosts
                "nproc_per_node": int,
                "source": "slots" | "devices" | "default",   # where the count came from
                "rank_offset": int,        # the global rank of its local rank 0
                "ranks": [int]}],          # rank_offset .. rank_offset + nproc_per_node - 1
     "by_host": {host: the same row}}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class LayoutError(ValueError):
    """The layout cannot be worked out from what it was given; the message says which value."""


def _per_host(value: Any, hosts: list[str], name: str) -> list[Any]:
    """``value`` as one entry per host: a mapping by host, a list in host order, or one scalar."""
    if value is None:
        return [None] * len(hosts)
    if isinstance(value, Mapping):
        return [value.get(host) for host in hosts]
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != len(hosts):
            raise LayoutError(
                f"nccl_rank_layout: {name} has {len(value)} entries for {len(hosts)} hosts"
            )
        return list(value)
    return [value] * len(hosts)


def _count(value: Any, host: str, name: str) -> int | None:
    """A positive count, or None when not given (None, '', 0 as Jinja's default(x, true))."""
    if value in (None, "", 0, "0", False):
        return None
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise LayoutError(
            f"nccl_rank_layout: {name} of {host} is {value!r}, not a whole number"
        ) from None
    if count < 1:
        raise LayoutError(f"nccl_rank_layout: {name} of {host} is {count}, not 1 or more")
    return count


def nccl_rank_layout(
    hosts: Sequence[str],
    slots: Any = None,
    devices: Any = None,
    default: Any = 1,
) -> dict[str, Any]:
    """Every node's node rank, ranks per node, first global rank and ranks; see the module doc."""
    names = [str(host) for host in hosts]
    if len(set(names)) != len(names):
        raise LayoutError(f"nccl_rank_layout: a host is named twice in {names}")
    columns = zip(
        names,
        _per_host(slots, names, "slots"),
        _per_host(devices, names, "devices"),
        _per_host(default, names, "default"),
        strict=True,
    )
    rows, offset = [], 0
    for node_rank, (host, slot, device, fallback) in enumerate(columns):
        choices = (
            ("slots", _count(slot, host, "slots")),
            ("devices", _count(device, host, "devices")),
            ("default", _count(fallback, host, "default")),
        )
        source, nproc = next(((s, n) for s, n in choices if n is not None), ("default", None))
        if nproc is None:
            raise LayoutError(
                f"nccl_rank_layout: {host} has no slots, no device count and no default"
            )
        rows.append(
            {
                "host": host,
                "node_rank": node_rank,
                "nproc_per_node": nproc,
                "source": source,
                "rank_offset": offset,
                "ranks": list(range(offset, offset + nproc)),
            }
        )
        offset += nproc
    return {
        "world_size": offset,
        "nnodes": len(rows),
        "hosts": rows,
        "by_host": {row["host"]: row for row in rows},
    }
