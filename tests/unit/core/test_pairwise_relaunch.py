# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/pairwise_relaunch.py: when the pairwise rounds run again alone (a
collective timed out or stalled with no named cause, 3+ nodes, nccl_pairwise auto or always) and
with which nccl_check_args."""

from __future__ import annotations

import pytest

from nccl_preflight.core.pairwise_relaunch import (
    named_cause,
    nccl_pairwise_relaunch,
    nccl_relaunch_check_args,
)

# The stall message of src/nccl_preflight/core/run_watch.py as the watch ends a run with it.
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


# A stall the watch diagnosed with a culprit (launch.json's stop), as the 3-host cut.
FAB0_DOWN = "fab0 is DOWN (was UP at the pre-flight)"
LINK_DOWN = f"203.0.113.12: {FAB0_DOWN}"
NAMED_STALL = (
    f"stalled: {LINK_DOWN} — ranks 0 and 2 waited on rank 1 in bandwidth_all_reduce at 4 MiB; "
    "no rank advanced for 12 s (10 s once a fabric link is down)"
)


def named_stop(culprits: dict[str, list[str]], cause_named: bool = True) -> dict:
    return {"kind": "stall", "culprits": culprits, "cause_named": cause_named,
            "suspect_ranks": [1], "waiting_ranks": [0, 2]}  # fmt: skip


def test_a_hang_with_a_named_cause_is_not_relaunched() -> None:
    """Issue 25 item 2: a stall named (a link down, a peer that does not answer) or a rank killed
    by a signal ends the run at once: the relaunch cannot pass a dead link."""
    down = ended(stopped_by=NAMED_STALL, stop=named_stop({"203.0.113.12": [FAB0_DOWN]}))
    assert named_cause(down) == LINK_DOWN
    for mode, nnodes in (("auto", 3), ("always", 4)):
        assert nccl_pairwise_relaunch(down, mode, nnodes) == ""
    # Another host's row that would relaunch alone (its ranks' watchdog, nccl_run_timeout)
    # does not, once a row names the cause.
    down[2].update(rank_exits=[{"rank": 2, "exitcode": 124, "signal": None}], timed_out=True)
    assert nccl_pairwise_relaunch(down, "auto", 3) == ""
    unreachable = "unreachable from h0 at 10.0.0.2:29500 (No route to host)"
    rows = ended(stopped_by=NAMED_STALL, stop=named_stop({"h1": [unreachable]}))
    assert named_cause(rows) == f"h1: {unreachable}"
    assert nccl_pairwise_relaunch(rows, "auto", 3) == ""
    # A rank killed by a signal in a run that ended by itself (torchrun saw the death), while a
    # rank elsewhere overran its watchdog.
    killed = [{"rank": 1, "exitcode": -9, "signal": "SIGKILL", "root_cause": True,
               "text": "killed by SIGKILL (signal 9)"}]  # fmt: skip
    rows = ended(rank_exits=killed)
    rows[0]["rank_exits"] = [{"rank": 0, "exitcode": 124, "signal": None, "root_cause": True}]
    assert named_cause(rows) == "rank 1 on h1 killed by SIGKILL (signal 9)"
    assert nccl_pairwise_relaunch(rows, "auto", 3) == ""


def test_an_unexplained_stall_still_relaunches() -> None:
    """No culprit (every link up, the ring answers), and the ranks our own stop ended by signal:
    nothing is named, so the relaunch runs to name the slow node."""
    term = [{"rank": 1, "exitcode": -15, "signal": "SIGTERM", "root_cause": True,
             "text": "killed by SIGTERM (signal 15)"}]  # fmt: skip
    rows = ended(stopped_by=STALL, stop=named_stop({}, cause_named=False), rank_exits=term)
    assert named_cause(rows) == ""
    assert nccl_pairwise_relaunch(rows, "auto", 3) == (
        f"the run was ended because it stalled ({STALL})"
    )
    # A peer that only did not answer in time: a link slowed to a few hundred kbit/s does that,
    # and the relaunch names its node.
    slow = {"h1": ["unreachable from h0 at 10.0.0.2:29500 (no answer in 2 s)"]}
    rows = ended(stopped_by=STALL, stop=named_stop(slow, cause_named=False))
    assert named_cause(rows) == ""
    assert nccl_pairwise_relaunch(rows, "auto", 3).startswith("the run was ended because it")
    timed_out = ended(timed_out=True, rank_exits=term)
    assert nccl_pairwise_relaunch(timed_out, "auto", 3) == "the run on h1 reached nccl_run_timeout"


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
