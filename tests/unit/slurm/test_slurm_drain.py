# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/slurm/drain.py: which of a verdict's findings drain a node (a node-level
cause of its own, the pairwise slow node), never a cluster-wide cause; the reason and argv."""

from __future__ import annotations

from typing import Any

import pytest

from nccl_preflight.slurm.drain import REASON_MAX, drain_reason, drain_targets

NODES = ["n1", "n2", "n3", "n4"]


def finding(host: str, test: str, what: str = "", **kw: Any) -> dict[str, Any]:
    return {
        "class": kw.get("cls", "preflight_failed"),
        "host": host,
        "rank": kw.get("rank"),
        "test": test,
        "what": what or f"{host}: {test} is wrong",
        "consequence": kw.get("consequence", False),
    }


def test_a_node_level_preflight_finding_drains_that_node_with_check_and_value() -> None:
    found = [
        finding("n1", "firewall", "n1: drops tcp/29500 (MASTER_PORT) from 10.0.0.2"),
        finding("n2", "tcp_master_port", consequence=True),
        finding("n3", "tcp_master_port", consequence=True),
    ]
    assert drain_targets(found, NODES) == {
        "n1": "nccl-preflight: firewall: drops tcp/29500 (MASTER_PORT) from 10.0.0.2"
    }


def test_the_pairwise_slow_node_and_an_unreachable_node_drain() -> None:
    found = [
        finding("n3", "pairwise", "n3 is slow: 0.1 GB/s in every pair", cls="bandwidth"),
        finding("n4", "host reachable", "n4 was unreachable", cls="unreachable"),
        finding("n1", "all_reduce", "rank 0 lost", cls="rank_lost", rank=0),
    ]
    assert drain_targets(found, NODES) == {
        "n3": "nccl-preflight: pairwise: n3 is slow: 0.1 GB/s in every pair",
        "n4": "nccl-preflight: host reachable: n4 was unreachable",
    }


def test_a_rank_finding_or_a_consequence_drains_nothing() -> None:
    found = [
        finding("n2", "bandwidth_all_reduce", cls="bandwidth", rank=1),
        finding("n2", "barrier", cls="rank_lost", rank=2),
        finding("n3", "tcp_ring", consequence=True),
    ]
    assert drain_targets(found, NODES) == {}


def test_a_check_failing_on_every_node_is_cluster_wide() -> None:
    # nccl_expected_versions pins a torch no node has: the config, not the nodes.
    found = [finding(n, "versions", f"{n}: torch 2.13 but pinned 2.9") for n in NODES]
    assert drain_targets(found, NODES) == {}


@pytest.mark.parametrize("check", ["versions", "mtu", "gpu_model", "environment"])
def test_a_comparison_without_a_majority_drains_nothing(check: str) -> None:
    # 2 of 4 differ from the reference: no majority says which side is right.
    assert drain_targets([finding("n3", check), finding("n4", check)], NODES) == {}
    # 1 of 4 differs: the other 3 agree, that node is the odd one.
    assert list(drain_targets([finding("n4", check)], NODES)) == ["n4"]
    # 1 of 2: a tie.
    assert drain_targets([finding("n2", check)], ["n1", "n2"]) == {}


def test_a_node_level_check_on_half_the_nodes_still_drains_them() -> None:
    found = [finding("n1", "gpu"), finding("n2", "gpu")]
    assert list(drain_targets(found, NODES)) == ["n1", "n2"]


def test_the_reason_is_one_short_line() -> None:
    reason = drain_reason("versions", "torch 2.13\n  differs\tfrom the others")
    assert reason == "nccl-preflight: versions: torch 2.13 differs from the others"
    long = drain_reason("firewall", "x" * 500)
    assert len(long) == REASON_MAX and long.endswith("...")
