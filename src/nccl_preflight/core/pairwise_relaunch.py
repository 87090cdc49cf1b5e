# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Whether the pairwise rounds run again alone, after a collective timed out or stalled.

A collective over all ranks that hangs ends the ranks (their watchdog, the stall watch or
nccl_run_timeout) before the pairwise rounds, so the run names no node. roles/launch/tasks/
pairwise.yml then launches once more with only the pairwise rounds and a small payload, so a
pair with the slow node is slow instead of hanging the rest (docs/design.md, "Pairwise rounds").
Only for a hang nobody could explain: when the run ended for a named cause (a fabric link down,
a peer that does not answer, a rank killed by a signal), the relaunch cannot tell more and could
only wait for its own bound, so the run ends at once.

Pure functions of the launch's registered results (library/nccl_torchrun.py's return values).
"""

from __future__ import annotations

from typing import Any

STALL_WORDS = "no rank advanced"  # every stall message of src/nccl_preflight/core/run_watch.py
WATCHDOG_EXIT = 124  # files/nccl_check.py's watchdog: a phase overran --timeout
# Options of nccl_check_args the relaunch sets itself (what to run, and the pairwise settings).
RELAUNCH_OWNS = ("--tests", "--pairwise", "--pair-bytes", "--pair-iters")


def named_cause(results: list[dict[str, Any]]) -> str:
    """What ended the run when something named it ("" when nothing did).

    A stall the watch diagnosed with a named cause (launch.json's ``stop``: ``cause_named``, a
    fabric link down or a peer with no route, src/nccl_preflight/core/run_watch.py's cause_named;
    its ``culprits`` say it), or a rank killed by a signal in a run that ended by itself (torchrun
    saw the death; a run that the watch, a timeout or a stop call ended had its ranks killed by
    us). A peer that only did not answer in time is no named cause: a slow link does that."""
    for row in results or []:
        stop = row.get("stop") or {}
        culprits = stop.get("culprits") or {}
        if stop.get("cause_named"):
            words = [f"{host}: {', '.join(map(str, said))}" for host, said in culprits.items()]
            return "; ".join(words) or "the stall's cause"
    for row in results or []:
        if row.get("timed_out") or row.get("stopped_by"):
            continue
        for ended in row.get("rank_exits") or []:
            if ended.get("root_cause") and ended.get("signal"):
                return f"rank {ended.get('rank')} on {row.get('host')} {ended.get('text')}"
    return ""


def nccl_pairwise_relaunch(results: list[dict[str, Any]], mode: str, nnodes: int) -> str:
    """Why the pairwise rounds run again alone ("" when they do not).

    ``results``: [{host, timed_out, stopped_by, stop, rank_exits}] of every host's launch. Only
    with ``mode`` auto or always, 3 or more nodes (two cannot tell which is bad), and a run that
    ended because something hung (nccl_run_timeout reached, a stall, or a rank's watchdog) with
    no named cause (named_cause: then the run ends at once)."""
    if mode not in ("auto", "always") or int(nnodes) < 3 or named_cause(results):
        return ""
    for row in results or []:
        host = row.get("host")
        if row.get("timed_out"):
            return f"the run on {host} reached nccl_run_timeout"
        stopped = str(row.get("stopped_by") or "")
        if STALL_WORDS in stopped:
            return f"the run was ended because it stalled ({stopped})"
        for ended in row.get("rank_exits") or []:
            if ended.get("exitcode") == WATCHDOG_EXIT:
                return (
                    f"rank {ended.get('rank')} on {host} was ended by its watchdog (a test "
                    "overran its timeout)"
                )
    return ""


def nccl_relaunch_check_args(check_args: list[str]) -> list[str]:
    """nccl_check_args without the options the relaunch sets itself (--tests, --pairwise,
    --pair-bytes, --pair-iters; as ``--opt value`` or ``--opt=value``)."""
    kept: list[str] = []
    skip = False
    for arg in [str(a) for a in check_args or []]:
        if skip:
            skip = False
            continue
        if arg in RELAUNCH_OWNS:
            skip = True
            continue
        if arg.split("=", 1)[0] in RELAUNCH_OWNS:
            continue
        kept.append(arg)
    return kept
