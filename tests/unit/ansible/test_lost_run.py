# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A run that ended on its node without its results is lost, never an "ok" with nothing.

The Ansible wait (state=finished, node/run_look.py) once answered a look at a run directory that
was gone (its warden or its supervisor had ended the run and removed it) as a run that ended by
itself: "ok", no progress, no result, and the report said the host's ranks "never started". Here
the node says ``lost``, the watch (roles/launch/action_plugins/nccl_torchrun.py) fails the task
with why - in the warden's words, which its tether on the control machine keeps
(core/tether.py's note) - and writes the host's launch.json as lost, so every rank of it is an
error that says why. And where the warden watches the node, the looks leave no watch mark: a
control machine too loaded to look for 30 s (16 and 32 lab hosts at load 25-50) no longer has
the supervisor end a healthy run.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from nccl_preflight.core.junit import classify_missing
from nccl_preflight.core.run_cause import run_cause
from nccl_preflight.core.run_data import HostData, RunData
from nccl_preflight.core.run_watch import lost_record
from nccl_preflight.core.tether import alive, read_note, start_tether, warden_command, warden_ended
from nccl_preflight.node.run_look import finished
from nccl_preflight.node.run_progress import touch_watch, watcher_gone
from nccl_preflight.node.run_warden import end_run
from nccl_preflight.node.supervisor import WATCH_FILE
from tests.builders.launch import HOSTS, FakeNode, action, look, watch
from tests.builders.slurm import make_watch, results
from tests.builders.torchrun import finished_args, start_hanging_run
from tests.polling import wait_or_fail

BOUND_S = 60.0  # a tether's or warden's end, on a loaded machine

LEASE_WORDS = "no heartbeat from the control machine"


def test_a_look_at_a_run_directory_that_is_gone_says_lost_not_ok(tmp_path: Path) -> None:
    gone = tmp_path / "nccl-preflight-r1-node1"
    result = finished({"run_dir": str(gone), "watch_s": 3, "watch_stale_s": 0})
    assert result["running"] is False
    assert result["lost"].startswith(f"the run directory {gone} is gone")
    assert result["progress"] == [] and "collected_archive" not in result


def test_a_wait_whose_run_directory_the_warden_removes_says_lost(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    """One call as long as the run (the pairwise-only wait): the warden ends the run under it."""
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    ender = threading.Timer(1.0, end_run, args=(str(run_dir),))
    ender.start()
    try:
        result = finished(finished_args(run_dir))
    finally:
        ender.join()
    assert result["running"] is False
    assert "is gone" in result["lost"], result


def test_no_watch_mark_is_left_where_the_warden_watches(tmp_path: Path) -> None:
    mark = tmp_path / WATCH_FILE
    touch_watch(mark, 0)
    assert not mark.exists()
    assert watcher_gone(mark, time.time() + 3600) is None, "no mark: never taken for gone"
    touch_watch(mark, 30)
    assert watcher_gone(mark, time.time() + 31)  # without a warden the mark still ends a run


def test_the_watch_leaves_no_mark_with_a_warden_and_one_without(tmp_path: Path) -> None:
    for warden, stale in ((True, 0.0), (False, 30.0)):
        node = FakeNode([{"running": False, "torchrun_rc": 0, "progress": []}])
        spec = {"host": "a", "report_dir": str(tmp_path), "hosts": HOSTS, "interval": 0.01}
        action.RunWatch(node, {"state": "finished", "run_dir": "/tmp/x"}, spec, warden).run({})
        assert node.calls[0]["watch_stale_s"] == stale


class LostNode(FakeNode):
    """A node whose run directory is gone at the second look, with the plugin's own wording."""

    lost_reason = action.ActionModule.lost_reason
    lost = action.ActionModule.lost

    def __init__(self, note: Path, ready: bool = True) -> None:
        gone = (
            "the run directory /tmp/x is gone: the run was ended on this node without its results"
        )
        super().__init__(
            [look("barrier", None, 0.5), {"running": False, "progress": [], "lost": gone}]
        )
        self.tether = {"ready": ready, "note": str(note)}
        self.host_name = "a"


def test_a_run_the_warden_ended_is_lost_in_its_words_and_its_ranks_are_errors(
    tmp_path: Path, shown: list[str]
) -> None:
    note = tmp_path / "a" / "warden.json"
    note.parent.mkdir()
    words = (
        f"{LEASE_WORDS} for 7.4 s (the lease is 6 s): the connection was cut or the machine is gone"
    )
    note.write_text(json.dumps({"why": words, "longest_gap_s": 1.2}))
    node = LostNode(note)
    result = watch(node, tmp_path).run({})
    why = result["lost"]
    assert why.startswith("the run's warden on a ended the run: " + LEASE_WORDS), why
    assert any(line.startswith(f"a: lost: {why}") for line in shown), shown
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert state["running"] is False and state["ended"]["stopped_by"] == f"lost: {why}"
    # The task: failed with why, and the host's launch.json says lost (ActionModule.lost).
    collect = tmp_path / "collected"
    failed = node.lost(dict(result), str(collect))
    assert failed["failed"] is True and failed["msg"] == f"lost: {why}"
    record = json.loads((collect / "launch.json").read_text())
    assert record == lost_record(why)
    # The report: the host's planned rank is an error that says why (and the run's cause).
    host = HostData("a", node_rank=0, nproc_per_node=1, rank_offset=0, launch=record)
    kind, message = classify_missing(host, 0, None, [1])
    assert kind == "hung" and why in message and "never started" not in message, message
    cause = run_cause(RunData("r1", {}, [host]))
    assert cause is not None and cause.kind == "lost" and why in cause.what


def test_a_lost_run_without_the_wardens_words_is_still_lost_naming_the_node(
    tmp_path: Path, shown: list[str]
) -> None:
    node = LostNode(tmp_path / "none.json", ready=False)
    result = watch(node, tmp_path).run({})
    assert result["lost"].startswith("the run directory /tmp/x is gone"), result["lost"]
    assert result["lost"].endswith("(a)")


def test_another_hosts_watch_ends_its_run_when_this_one_is_lost(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    why = "lost: the run's warden on b ended the run: x"
    lost = {"host": "b", "updated": 1.0, "running": False, "ended": {"rc": None, "stopped_by": why}}
    (tmp_path / "b" / "progress.json").write_text(json.dumps(lost))
    node = FakeNode([look("barrier", None, 0.5)])
    watch(node, tmp_path).run({})
    assert node.calls[-1]["stop_reason"] == (
        "the run on b was stopped: lost: the run's warden on b ended the run: x"
    )


def test_a_tether_held_up_past_the_lease_keeps_the_wardens_words(
    tmp_path: Path, main_process: subprocess.Popen, node_run: tuple[Path, subprocess.Popen]
) -> None:
    """The control machine is there but its tether gets no CPU (SIGSTOP) past the lease: the
    warden ends the run, and once the tether runs again it keeps why in its note."""
    run_dir, listener = node_run
    note = tmp_path / "reports" / "node1" / "warden.json"
    command = shlex.join(warden_command(sys.executable, "t9"))
    argv = ["/bin/sh", "-c", f"TMPDIR={shlex.quote(str(tmp_path))} {command}"]
    cache = str(tmp_path / "cache")
    tether = start_tether(argv, str(run_dir), "t9", main_process.pid, cache, note=str(note))
    assert tether["ready"] is True and tether["note"] == str(note), tether
    os.kill(tether["pid"], signal.SIGSTOP)
    try:
        wait_or_fail(lambda: not run_dir.exists() and listener.poll() is not None, timeout=BOUND_S)
    finally:
        os.kill(tether["pid"], signal.SIGCONT)
    wait_or_fail(lambda: not alive(tether["pid"]), timeout=BOUND_S)
    word = read_note(note, wait=BOUND_S)
    assert word is not None and word["why"].startswith(LEASE_WORDS), word
    why = warden_ended("node1", word)
    assert why is not None and why.startswith("the run's warden on node1 ended the run: "), why


def test_a_released_warden_is_no_lost_run() -> None:
    assert warden_ended("n", {"why": "released"}) is None
    assert warden_ended("n", None) is None


def test_a_slurm_node_that_ended_its_run_unwatched_is_lost_in_its_steps_words(
    tmp_path: Path,
) -> None:
    """The Slurm front-end's equivalent: a node whose step ended its run because nothing came
    from the control machine (and removed it) sends no results - lost, never a result - and
    the step's words now say why."""
    from nccl_preflight.node.run_progress import LOST_RECORD, WATCHER_GONE

    watch, step = make_watch(tmp_path, [])
    words = f"{WATCHER_GONE} (no look for 41 s: Ctrl-C or a lost connection)"
    step.records = [
        {"kind": LOST_RECORD, "node": "b", "why": words},
        results("a", {"rc": 0, "stopped_by": None, "rank_exits": []}),
    ]
    step.next_record = lambda _wait: step.records.pop(0) if step.records else None
    assert watch.run(60) == ["b"]
    record = watch.lost_record("b")
    assert record["cut_short"] is True
    assert (
        record["lost"]
        == f"no results came back from b; its launch step ended the run there: {words}"
    )
