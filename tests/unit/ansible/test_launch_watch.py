# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""roles/launch/action_plugins/nccl_torchrun.py, the watch loop on the control machine: looks,
progress.json for the other hosts, the stop it asks for when a rank died elsewhere or the run
stalled, and the lines it prints. The node is a scripted stand-in for the module's answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleConnectionFailure

from nccl_preflight.core.run_watch import DIAGNOSE_WAIT_S
from tests.builders.launch import HOSTS, FakeNode, action, look, watch


def test_a_rank_killed_on_another_host_ends_this_run_naming_it(
    tmp_path: Path, shown: list[str]
) -> None:
    dead = {
        "host": "b",
        "updated": 1.0,
        "ended": {
            "rc": 1,
            "stopped_by": None,
            "rank_exits": [
                {"rank": 1, "signal": "SIGKILL", "root_cause": True,
                 "text": "killed by SIGKILL (signal 9) (not by the OOM killer: ...)"},
            ],
        },
    }  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "progress.json").write_text(json.dumps(dead))
    node = FakeNode([look("barrier", None, 0.5)])
    result = watch(node, tmp_path).run({})
    assert result["running"] is False
    stop = node.calls[-1]
    assert stop["stop_reason"].startswith("rank 1 on b killed by SIGKILL")
    assert stop["stop_details"]["kind"] == "failure_elsewhere"
    assert any(
        line.startswith("a: ending the run: rank 1 on b killed by SIGKILL") for line in shown
    )
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert state["ended"]["stopped_by"] == stop["stop_reason"]


def test_a_stall_with_a_link_down_is_diagnosed_and_named(tmp_path: Path, shown: list[str]) -> None:
    other = {
        "host": "b",
        "updated": 1.0,
        "last_advance": 0.0,
        "running": True,
        "progress": [{"rank": 1, "status": "running", "test": "bandwidth_all_reduce",
                      "size": 4 << 20, "index": 15, "count": 21, "age_s": 0}],
        "history": {},
        "interface": {"ifname": "fab0", "state": "down", "carrier": None},
        "diagnosis": {"interface": {"ifname": "fab0", "state": "down", "carrier": None},
                      "probes": []},
    }  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "progress.json").write_text(json.dumps(other))
    mine = {"interface": {"ifname": "fab0", "state": "up", "carrier": True}, "probes": [
        {"host": "b", "address": "10.0.0.2", "port": 29500, "ok": False,
         "answer": "no answer in 2 s"}]}  # fmt: skip
    # The rank has been at 4 MiB for 100 s: past the 10 s a link seen down allows.
    node = FakeNode([look("bandwidth_all_reduce", 4 << 20, 100.0)], diagnosis=mine)
    watcher = watch(node, tmp_path)
    watcher.state["last_advance"] -= 100  # the watch began 100 s ago
    watcher.run({})
    diagnose = next(c for c in node.calls if c.get("diagnose") is not None)
    assert diagnose["diagnose"]["ifname"] == "fab0"
    # A loaded control machine between two looks, or diagnosing, is not a control machine gone.
    [stale] = {c["watch_stale_s"] for c in node.calls if "watch_s" in c}
    assert stale >= 30 and diagnose["watch_stale_s"] == stale + DIAGNOSE_WAIT_S
    assert diagnose["diagnose"]["probes"] == HOSTS[0]["probes"]
    reason = node.calls[-1]["stop_reason"]
    assert reason.startswith(
        "stalled: b: fab0 is DOWN (was UP at the pre-flight) — rank 0 waited on rank 1 in "
        "bandwidth_all_reduce at 4 MiB"
    ), reason
    assert "(10 s once a fabric link is down)" in reason
    details = node.calls[-1]["stop_details"]
    assert details["kind"] == "stall" and details["suspect_ranks"] == [1]


def test_a_stop_is_written_before_its_call_and_adopted_with_its_culprits(
    tmp_path: Path, shown: list[str]
) -> None:
    """Host b's watch is ending its run for a stall it named: host a's next look ends a's run
    at once (not after b's stop call), with b's details: the cause stays named for the relaunch
    decision (src/nccl_preflight/core/pairwise_relaunch.py). And a's own `ending` is on disk before
    a's stop call, for the hosts after it."""
    reason = "stalled: b: fab0 is DOWN (was UP at the pre-flight) — rank 0 waited on rank 1"
    stop = {"kind": "stall", "culprits": {"b": ["fab0 is DOWN (was UP at the pre-flight)"]}}
    other = {"host": "b", "updated": 1.0, "running": True, "progress": [], "history": {},
             "ending": {"stopped_by": reason, "stop": stop}, "ended": None}  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "progress.json").write_text(json.dumps(other))
    # Without the stop the run would end by itself after three looks.
    running = look("bandwidth_all_reduce", 4 << 20, 0.5)
    node = FakeNode([running, running, running, {"running": False, "progress": []}])
    node.report = tmp_path
    watch(node, tmp_path).run({})
    assert [c.get("stop_reason") for c in node.calls if "stop_reason" in c] == [reason]
    assert not any("diagnose" in c for c in node.calls)
    details = node.calls[-1]["stop_details"]
    assert details["culprits"] == stop["culprits"] and details["seen_on"] == "b"
    assert node.state_at_stop is not None
    assert node.state_at_stop["ending"] == {"stopped_by": reason, "stop": details}


def test_no_stall_while_a_rank_is_still_checking_in(tmp_path: Path, shown: list[str]) -> None:
    """Rank 1 never wrote its record (a slow torch import): the looks go on until the run ends."""
    ended = {"running": False, "progress": [], "torchrun_rc": 0, "stopped_by": None}
    stuck = look("bandwidth_all_reduce", 1024, 100.0)
    node = FakeNode([stuck, stuck, stuck, ended])
    result = watch(node, tmp_path, stall_timeout=1).run({})
    assert result["running"] is False
    assert not any("stop_reason" in c or "diagnose" in c for c in node.calls)
    assert shown == ["a: rank 0 at bandwidth_all_reduce 1 KiB (15 of 21 tests)"]


# Rank 0 wrote its final result: it passed.
DONE = {"rank": 0, "status": "passed", "test": None, "size": None, "index": 3, "count": 3,
        "age_s": 0.5}  # fmt: skip


def test_a_torchrun_left_in_its_exit_barrier_is_ended_saying_so(
    tmp_path: Path, shown: list[str]
) -> None:
    """Host b's rank failed by itself (exit 1) and b's run ended; a's rank passed and its worker
    exited, but a's torchrun waits in its exit barrier for b. a's watch ends the run at once and
    says why; while a's worker still runs it only looks."""
    failed = {"host": "b", "updated": 1.0, "running": False, "progress": [], "ended": {
        "rc": 1, "stopped_by": None, "timed_out": False, "rank_exits": [
            {"rank": 1, "signal": None, "text": "exited 1 (a check failed)",
             "root_cause": True}]}}  # fmt: skip
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "progress.json").write_text(json.dumps(failed))
    exiting = {"running": True, "progress": [DONE], "workers_exited": False}
    waiting = {"running": True, "progress": [DONE], "workers_exited": True}
    # Left alone, the run would end at nccl_run_timeout, looks after.
    timed_out = {"running": False, "progress": [DONE], "torchrun_rc": -15, "timed_out": True}
    node = FakeNode([exiting, exiting, waiting, waiting, waiting, timed_out])
    node.report = tmp_path
    result = watch(node, tmp_path).run({})
    assert result["running"] is False and not result.get("timed_out")
    looks = [c for c in node.calls if "watch_s" in c and "stop_reason" not in c]
    assert len(looks) == 3
    reason = "torchrun waited in its exit barrier for b, whose ranks failed (rank 1 exited 1 "
    assert node.calls[-1]["stop_reason"].startswith(reason)
    assert node.calls[-1]["stop_details"]["kind"] == "exit_barrier"
    assert any(line.startswith(f"a: ending the run: {reason}") for line in shown)
    assert node.state_at_stop is not None and node.state_at_stop["workers_exited"] is True


def test_a_healthy_run_ends_by_itself_with_no_stop(tmp_path: Path, shown: list[str]) -> None:
    """b's run ended well: its torchrun left the exit barrier, so a's leaves it too; a's watch
    waits for that and asks for no stop."""
    ended_well = {"rc": 0, "stopped_by": None, "timed_out": False, "rank_exits": []}
    well = {"host": "b", "updated": 1.0, "running": False, "progress": [], "ended": ended_well}
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "progress.json").write_text(json.dumps(well))
    waiting = {"running": True, "progress": [DONE], "workers_exited": True}
    ended = {"running": False, "progress": [DONE], "torchrun_rc": 0, "stopped_by": None}
    node = FakeNode([waiting, waiting, ended])
    result = watch(node, tmp_path).run({})
    assert result["running"] is False and result["torchrun_rc"] == 0
    assert not any("stop_reason" in c or "diagnose" in c for c in node.calls)
    assert not any("ending the run" in line for line in shown)


class StartingNode(FakeNode):
    """A node whose start (the first call of the wait's task, `start`) answers ``started``, or
    cannot be reached when ``started`` is an exception."""

    say_not_started = staticmethod(action.ActionModule.say_not_started)
    # No python in these starts' options: the start is the module's call.
    start = action.ActionModule.start

    def __init__(self, started: dict[str, Any] | Exception, looks: list[dict[str, Any]]):
        super().__init__(looks)
        self.started = started

    def _execute_module(self, module_name: str, module_args: dict, task_vars: dict) -> dict:
        if module_args.get("state") == "started":
            self.calls.append(module_args)
            if isinstance(self.started, Exception):
                raise self.started
            return self.started
        return super()._execute_module(module_name, module_args, task_vars)


def test_a_start_that_failed_in_the_waits_call_ends_the_other_hosts_run_at_its_next_look(
    tmp_path: Path, shown: list[str]
) -> None:
    spec = {"host": "a", "report_dir": str(tmp_path)}
    failing = StartingNode({"failed": True, "msg": "MASTER_PORT 29500 is taken"}, [])
    started = action.ActionModule.start_first(failing, {"run_dir": "/tmp/x"}, spec, {})
    assert started["failed"] and failing.calls == [{"run_dir": "/tmp/x", "state": "started"}]
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert (state["running"], state["not_started"]) == (False, "MASTER_PORT 29500 is taken")
    # Host b started; its watch ends its run at the next look, naming a.
    other = FakeNode([look("all_reduce_sum", 1024, 0.1)])
    result = watch(other, tmp_path, host="b").run({})
    reason = "torchrun did not start on a, so the rendezvous could not complete"
    assert other.calls[-1]["stop_reason"] == reason and result["stopped_by"] == reason
    assert other.calls[-1]["stop_details"]["kind"] == "failure_elsewhere"


def test_a_node_the_start_cannot_reach_is_said_not_started_and_stays_unreachable(
    tmp_path: Path,
) -> None:
    node = StartingNode(AnsibleConnectionFailure("ssh: connect to host a: refused"), [])
    with pytest.raises(AnsibleConnectionFailure):
        action.ActionModule.start_first(
            node, {"run_dir": "/tmp/x"}, {"host": "a", "report_dir": str(tmp_path)}, {}
        )
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert "refused" in state["not_started"]


def test_a_start_that_worked_leaves_no_mark_for_the_others(tmp_path: Path) -> None:
    node = StartingNode({"changed": True, "warm_start": True}, [])
    started = action.ActionModule.start_first(
        node, {"run_dir": "/tmp/x"}, {"host": "a", "report_dir": str(tmp_path)}, {}
    )
    assert started == {"changed": True, "warm_start": True}
    assert not (tmp_path / "a" / "progress.json").exists()
