# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/run_cause.py through the report: once what ended a run while its
ranks ran is named (a rank killed by a signal, a rank's process stopped, a node cut off), the
verdict keeps that culprit's finding alone as a cause, with its fix, and folds every other rank's
lost result under it (the headline names the culprit node alone); a wrong result stays a cause
of its own; an unnamed stall folds nothing.

The run directories have the launch.json shapes both front-ends write (library/nccl_torchrun.py,
slurm/launch.py): the stop's details as core/run_watch.py stall_message gives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nccl_preflight.core.console import console_lines
from nccl_preflight.core.findings import folded_verdict
from nccl_preflight.core.run_cause import run_cause
from nccl_preflight.core.run_data import read_run
from tests.builders.report import RunDir, rank_doc
from tests.report_build import build_report, build_verdict

HOSTS = ["node1", "node2", "node3"]
RESET = (
    "RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error [10.77.0.3]:40121: Connection "
    "reset by peer."
)


def three_nodes(tmp_path: Path) -> RunDir:
    return RunDir(tmp_path, HOSTS, nproc=1).plan()


def write_launch(run: RunDir, host: str, **doc: Any) -> None:
    base = {"rc": 1, "timed_out": False, "killed_pids": [], "timeout_s": 300, "stopped_by": None}
    (run.host_dir(host) / "launch.json").write_text(json.dumps({**base, **doc}))
    (run.host_dir(host) / "torchrun.log").write_text("torchrun\n")


def unfinished(run: RunDir, host: str, error: str | None = None) -> None:
    """The host's one rank: in bandwidth_all_reduce when it ended (an error there when given)."""
    node_rank = HOSTS.index(host)
    doc = rank_doc(host, node_rank, 0, node_rank, 3, 1, current_test="bandwidth_all_reduce")
    doc["tests"] = [t for t in doc["tests"] if not t["name"].startswith("bandwidth_")]
    doc.update(status="running", finished_at=None)
    if error:
        doc["tests"].append({"name": "bandwidth_all_reduce", "status": "error",
                             "duration_s": 1.0, "message": error, "details": {}})  # fmt: skip
        doc.update(status="error", current_test=None)
    run.rank(host, 0, doc=doc)


def heads(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in verdict["findings"] if not f["consequence"]]


def assert_folded_under(verdict: dict[str, Any], head: dict[str, Any]) -> None:
    rest = [f for f in verdict["findings"] if f is not head]
    assert rest, verdict["findings"]
    pointer = {"id": head["id"], "host": head["host"], "test": head["test"]}
    assert all(f["consequence"] and f["cause"] == pointer for f in rest), rest
    assert all(f["class"] == "rank_lost" for f in verdict["findings"])


def test_a_rank_killed_by_a_signal_is_the_one_cause_every_other_lost_rank_folds_under(
    tmp_path: Path,
) -> None:
    run = three_nodes(tmp_path)
    killed = {"rank": 2, "local_rank": 0, "pid": 1002, "exitcode": -9, "signal": "SIGKILL",
              "text": "killed by SIGKILL (signal 9) (not by the OOM killer: ...)",
              "root_cause": True, "oom": None}  # fmt: skip
    why = f"rank 2 on node3 {killed['text']}"
    stop = {"kind": "failure_elsewhere", "message": why, "seen_on": "another host"}
    for host in ("node1", "node2"):
        unfinished(run, host, error=RESET)
        write_launch(run, host, stopped_by=why, stop=stop, rank_exits=[])
    unfinished(run, "node3")
    write_launch(run, "node3", rank_exits=[killed])
    cause = run_cause(read_run(run.dir))
    assert cause is not None and (cause.kind, cause.culprits) == ("killed", {"node3": [2]})
    verdict = build_verdict(run.dir)
    assert (verdict["class"], verdict["exit_code"]) == ("rank_lost", 4)
    (head,) = heads(verdict)
    assert (head["host"], head["rank"]) == ("node3", 2), head
    assert "It was killed by SIGKILL" in head["what"]
    assert head["fix"].startswith("find what sent SIGKILL to rank 2 (pid 1002) on node3")
    assert_folded_under(verdict, head)
    # the first failure printed is the killed rank, the others folded; its host alone fails
    summary = build_report(run.dir)
    result = {**summary, **verdict, "findings": verdict["findings"]}
    lines = console_lines(result, folded_verdict(verdict["findings"]))
    first = lines.index(next(x for x in lines if x.startswith("Failures (")))
    assert lines[first + 1].startswith("  1. node3 rank 2 bandwidth_all_reduce: rank 2 on node3")
    hosts = {x.split()[0]: x for x in lines if x.startswith("  node")}
    assert hosts["node3"].endswith("FAILED: 1 of 1 ranks failed"), hosts
    assert "affected (a consequence of another host's failure)" in hosts["node1"], hosts
    # every other rank's JUnit error points at the cause and its fix
    junit = (run.dir / "junit.xml").read_text()
    assert "a consequence of rank 2 on node3 killed by SIGKILL" in junit


def test_a_wrong_result_elsewhere_stays_a_cause_of_its_own(tmp_path: Path) -> None:
    run = three_nodes(tmp_path)
    killed = {"rank": 2, "local_rank": 0, "pid": 1002, "exitcode": -9, "signal": "SIGKILL",
              "text": "killed by SIGKILL (signal 9)", "root_cause": True, "oom": None}  # fmt: skip
    run.rank("node1", 0, failed={"all_reduce_sum": "1 of 1024 elements wrong"})
    write_launch(run, "node1", rc=1)
    unfinished(run, "node2", error=RESET)
    write_launch(run, "node2", stopped_by="rank 2 on node3 killed by SIGKILL (signal 9)")
    unfinished(run, "node3")
    write_launch(run, "node3", rank_exits=[killed])
    verdict = build_verdict(run.dir)
    assert {(f["host"], f["class"]) for f in heads(verdict)} == {
        ("node1", "wrong_data"),
        ("node3", "rank_lost"),
    }
    assert all(f["host"] == "node2" for f in verdict["findings"] if f["consequence"])


def stall_stop(culprits: dict[str, list[str]], **extra: Any) -> tuple[str, dict[str, Any]]:
    words = "; ".join(f"{h}: {', '.join(w)}" for h, w in culprits.items())
    reason = f"stalled: {words} — ranks 0 and 1 waited on rank 2 in bandwidth_all_reduce at 32 KiB"
    details = {"kind": "stall", "culprits": culprits, "cause_named": True, **extra}
    return reason, details


def test_a_stopped_rank_named_by_the_stall_is_the_cause_with_how_to_find_what_holds_it(
    tmp_path: Path,
) -> None:
    run = three_nodes(tmp_path)
    reason, stop = stall_stop(
        {"node3": ["rank 2 (pid 1002) is stopped (state T: stopped by a signal)"]},
        stopped_ranks=[2],
    )
    for host in HOSTS:
        unfinished(run, host)
        write_launch(run, host, stopped_by=reason, stop=stop, killed_pids=[7])
    verdict = build_verdict(run.dir)
    (head,) = heads(verdict)
    assert (head["host"], head["rank"]) == ("node3", 2), head
    # its testcase says why the run ended, not the run's timeout
    assert "when the run was stopped (stalled: node3: rank 2 (pid 1002) is stopped" in head["what"]
    assert "after 300 s" not in head["what"]
    assert "kill -CONT 1002" in head["fix"] and "TracerPid" in head["fix"], head["fix"]
    assert_folded_under(verdict, head)


def test_a_node_cut_off_is_the_cause_its_link_named_and_its_lost_ranks_its_own(
    tmp_path: Path,
) -> None:
    """slurm/launch.py Watch.lost_record: node2 went silent, its results never came back."""
    run = three_nodes(tmp_path)
    silent = "silent for 12 s: the node and its fabric link fab0 stopped answering"
    reason, stop = stall_stop({"node2": [silent, "unreachable from node1 at 10.77.0.2:29500"]})
    for host in ("node1", "node3"):
        unfinished(run, host)
        write_launch(run, host, stopped_by=reason, stop=stop)
    lost = "node2 was silent for 12 s: no results came back from it"
    write_launch(run, "node2", rc=None, cut_short=True, stopped_by=reason, stop=stop, lost=lost,
                 silent={"since": 1.0, "for_s": 12.0}, rank_exits=[])  # fmt: skip
    (run.host_dir("node2") / "torchrun.log").unlink()
    verdict = build_verdict(run.dir)
    (head,) = heads(verdict)
    assert (head["host"], head["rank"], head["test"]) == ("node2", 1, "result"), head
    assert "fabric link fab0 stopped answering" in head["what"]
    assert head["fix"].startswith("node2 dropped off the network"), head["fix"]
    assert_folded_under(verdict, head)
    # lost alone (Slurm ended the job before any stall was named): the same cause
    for host in ("node1", "node3"):
        write_launch(run, host, stopped_by="SIGTERM")
    write_launch(run, "node2", rc=None, cut_short=True, stopped_by="SIGTERM",
                 lost=f"{lost}; Slurm set it DOWN+NOT_RESPONDING (Not responding)")  # fmt: skip
    cause = run_cause(read_run(run.dir))
    assert cause is not None and (cause.kind, cause.culprits) == ("lost", {"node2": []})
    assert "Slurm set it DOWN" in cause.what
    (head,) = heads(build_verdict(run.dir))
    assert head["host"] == "node2"


def test_a_stall_with_no_named_cause_folds_nothing(tmp_path: Path) -> None:
    run = three_nodes(tmp_path)
    reason, stop = stall_stop({"node2": ["unreachable from node1 (no answer in 2 s)"]})
    stop["cause_named"] = False  # a slow link delays the SYN: the pairwise rounds name it
    for host in HOSTS:
        unfinished(run, host)
        write_launch(run, host, stopped_by=reason, stop=stop)
    assert run_cause(read_run(run.dir)) is None
    verdict = build_verdict(run.dir)
    assert len(heads(verdict)) == 3
