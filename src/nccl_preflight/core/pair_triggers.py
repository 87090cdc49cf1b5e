# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""What makes ``nccl_pairwise=auto`` run the pairwise rounds: one ``--pair-trigger`` per timed
collective (docs/design.md, "Pairwise rounds").

The figure is the expectation the controller judges the run with after it (src/nccl_preflight/
core/bandwidth_expectation.py), times ``nccl_busbw_warn``: ``nccl_expected_busbw[collective]``
when given, else
the slowest host's fabric x ``nccl_busbw_efficiency`` (src/nccl_preflight/core/rdma_expect.py
``cluster_figure``) from plan.json's host rows (roles/launch/tasks/plan.yml). Before the run no
NCCL log says which NICs were used, so an RDMA host counts the ports NCCL_IB_HCA selects (every
active one without it), a host without RDMA its fabric link speed; the source says which. A host
whose speed is unknown gives no fabric figure, so no collective is triggered from the fabric
(never a guessed one): only the explicit ``nccl_expected_busbw`` entries remain.
"""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.rdma_expect import cluster_figure
from nccl_preflight.node.collective_tables import BANDWIDTH_COLLECTIVES


def _figure(value: float) -> float:
    """Six significant digits: what the rank prints back in its reason (``:g``)."""
    return float(f"{value:.6g}")


def nccl_pair_triggers(
    hosts: list[dict[str, Any]] | None,
    expected_busbw: dict[str, Any] | None = None,
    warn: Any = 0.8,
    efficiency: Any = 0.9,
) -> list[dict[str, Any]]:
    """``[{collective, trigger_gbps, expected_gbps, source}]``: the explicit expectations first
    (``nccl_expected_busbw`` wins), then every other timed collective from the fabric."""
    explicit = {str(k): float(v) for k, v in (expected_busbw or {}).items()}
    rows = [
        {
            "collective": name,
            "trigger_gbps": _figure(gbps * float(warn)),
            "expected_gbps": gbps,
            "source": "nccl_expected_busbw",
        }
        for name, gbps in explicit.items()
    ]
    fabric, source = cluster_figure({"hosts": list(hosts or [])}, {}, float(efficiency))
    if fabric is None or fabric <= 0:
        return rows
    return rows + [
        {
            "collective": name,
            "trigger_gbps": _figure(fabric * float(warn)),
            "expected_gbps": _figure(fabric),
            "source": source,
        }
        for name in BANDWIDTH_COLLECTIVES
        if name not in explicit
    ]


def nccl_pair_trigger_args(triggers: list[dict[str, Any]]) -> list[str]:
    """files/nccl_check.py's ``--pair-trigger=COLL=GBPS`` for each of nccl_pair_triggers'."""
    return [f"--pair-trigger={t['collective']}={t['trigger_gbps']}" for t in triggers]


def nccl_pair_trigger_note(triggers: list[dict[str, Any]], hosts: list[dict[str, Any]]) -> str:
    """One line for the console: the figures that make auto run the rounds, by source, and why
    the fabric gives none when it cannot."""
    by_source: dict[str, list[str]] = {}
    for t in triggers:
        by_source.setdefault(t["source"], []).append(f"{t['collective']} {t['trigger_gbps']:g}")
    parts = [f"{', '.join(names)} GB/s ({src})" for src, names in by_source.items()]
    if all(t["source"] == "nccl_expected_busbw" for t in triggers):
        _, why = cluster_figure({"hosts": list(hosts or [])}, {}, 1.0)
        parts.append(f"none from the fabric: {why}")
    if not triggers:
        return (
            "auto runs the pairwise rounds only when a bandwidth test fails (or a collective "
            f"hangs): nccl_expected_busbw is empty and the fabric gives no figure ({why})"
        )
    return "auto runs the pairwise rounds when a busbw falls below: " + "; ".join(parts)
