# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Draining the nodes a run names as bad: `scontrol update nodename=N state=drain
reason="nccl-preflight: <check>: <value>"` (an argv list, node_check.drain: the one drain of both
commands). Resuming stays the operator's.

``drain_targets`` (pure, over verdict.json's findings) picks the nodes: a node-level finding
that is a cause of its own (a pre-flight check failed there, the node failed before launch, the
pairwise rounds named it slow or its pair timed out), never a cluster-wide cause:
- a finding that is another's consequence (its cause is named, and drained if it is a node's);
- a check that failed on every node of the run (a wrong config value, a pinned version none has);
- a comparison (versions, MTU, GPU model, clock) or the environment stage that failed on half
  the nodes or more: no majority agrees, so nobody can tell which side is wrong;
- a rank's test (a lost rank, wrong data, low busbw): a rank fails where its peers' faults reach
  it; the pairwise rounds name the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..node.runner import SubprocessRunner
from .node_check import REASON_MAX, REASON_PREFIX, one_line
from .node_check import drain as drain_node

# Checks that compare the nodes with each other, and the environment stage (a config value
# resolved per node): a node is bad only when a majority of the others agree.
MAJORITY_CHECKS = frozenset({"versions", "mtu", "gpu_model", "clock", "environment"})
NODE_CLASSES = frozenset({"preflight_failed", "unreachable"})
PAIRWISE_TEST = "pairwise"


def drain_reason(check: str, value: str) -> str:
    """`nccl-preflight: <check>: <value>` on one line (node_check.one_line), at most REASON_MAX
    characters, as node-check words its own."""
    text = " ".join(one_line(f"{REASON_PREFIX}{check}: {value}").split())
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3].rstrip() + "..."


def _value(finding: Mapping[str, Any]) -> str:
    """The finding's words without the leading '<host>: ' its checks put in front."""
    what = str(finding.get("what") or "").strip().splitlines()
    first = what[0] if what else ""
    host = f"{finding.get('host')}: "
    return first[len(host) :] if first.startswith(host) else first


def _node_level(finding: Mapping[str, Any]) -> bool:
    if finding.get("consequence") or not finding.get("host"):
        return False
    if finding.get("test") == PAIRWISE_TEST:
        return True
    return finding.get("class") in NODE_CLASSES and finding.get("rank") is None


def drain_targets(findings: list[Mapping[str, Any]], nodes: list[str]) -> dict[str, str]:
    """{node: reason} of the nodes to drain (module docstring), in the order of ``nodes``; the
    first node-level finding of a node gives its reason."""
    candidates = [f for f in findings if _node_level(f) and f.get("host") in nodes]
    failing: dict[str, set[str]] = {}
    for f in candidates:
        failing.setdefault(str(f.get("test")), set()).add(str(f["host"]))
    chosen: dict[str, str] = {}
    for f in candidates:
        check, host = str(f.get("test")), str(f["host"])
        hosts = failing[check]
        if len(hosts) >= len(nodes):
            continue  # on every node: a cluster-wide cause
        if check in MAJORITY_CHECKS and 2 * len(hosts) >= len(nodes):
            continue  # no majority agrees on what is right
        chosen.setdefault(host, drain_reason(check, _value(f)))
    return {n: chosen[n] for n in nodes if n in chosen}


def drain(node: str, reason: str) -> dict[str, Any]:
    """Drain ``node`` with ``reason`` (scontrol from the control machine, its environment's
    SLURM_CONF); {node, reason, drained, message}."""
    return drain_node(SubprocessRunner(), node, reason)
