# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""plugins/filter/nccl_pairwise_relaunch.py: when the pairwise rounds run again alone (a
collective timed out or stalled, 3+ nodes, nccl_pairwise auto or always) and with which
nccl_check_args."""

from __future__ import annotations

import pytest
from nccl_pairwise_relaunch import nccl_pairwise_relaunch, nccl_relaunch_check_args

# The stall message of module_utils/nccl_run_watch.py as the watch ends a run with it.
STALL = (
    "lab3: eth1 rate-limited? — ranks 0, 1 waited on rank 2 in bandwidth_all_reduce at 4 MiB; "
    "no rank advanced for 31 s (the limit was 30 s)"
)


def ended(**changes: object) -> list[dict]:
    rows = [
        {"host": f"h{i}", "timed_out": False, "stopped_by": None, "rank_exits": []}
        for i in range(3)
    ]
    rows[1].update(changes)
    return rows


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"timed_out": True}, "the run on h1 reached nccl_run_timeout"),
        ({"stopped_by": STALL}, f"the run was ended because it stalled ({STALL})"),
        (
            {"rank_exits": [{"rank": 1, "exitcode": 124, "signal": None}]},
            "rank 1 on h1 was ended by its watchdog (a test overran its timeout)",
        ),
    ],
)
def test_a_hang_relaunches_in_auto_and_always(changes: dict, reason: str) -> None:
    assert nccl_pairwise_relaunch(ended(**changes), "auto", 3) == reason
    assert nccl_pairwise_relaunch(ended(**changes), "always", 4) == reason


def test_nothing_hung_never_two_nodes_or_a_crash_do_not_relaunch() -> None:
    assert nccl_pairwise_relaunch(ended(), "always", 3) == ""
    assert nccl_pairwise_relaunch(ended(timed_out=True), "never", 3) == ""
    assert nccl_pairwise_relaunch(ended(timed_out=True), "auto", 2) == ""
    crash = [{"rank": 1, "exitcode": -9, "signal": "SIGKILL"}]
    assert nccl_pairwise_relaunch(ended(rank_exits=crash, stopped_by="SIGKILL"), "auto", 3) == ""
    failed_check = [{"rank": 1, "exitcode": 1, "signal": None}]
    assert nccl_pairwise_relaunch(ended(rank_exits=failed_check), "auto", 3) == ""


def test_the_relaunch_sets_what_to_run_itself() -> None:
    args = [
        "--tests",
        "all_reduce_sum,bandwidth",
        "--max-bytes",
        "16K",
        "--pair-bytes=1M",
        "--pairwise",
        "auto",
        "--pair-iters",
        "3",
        "--device",
        "cpu",
    ]
    assert nccl_relaunch_check_args(args) == ["--max-bytes", "16K", "--device", "cpu"]
    assert nccl_relaunch_check_args([]) == []
