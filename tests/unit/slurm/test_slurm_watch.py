# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/slurm/launch.py's Watch: the launch step's records judged as roles/launch's
watch judges its looks (core/run_watch.py): a rank killed on one node ends the others naming it;
a stall asks every node for its evidence, then ends every node's run with the stall's words."""

from __future__ import annotations

import json
import time
from pathlib import Path

from nccl_preflight.core.run_watch import LINK_DOWN_PATIENCE_S, watch_hosts
from nccl_preflight.slurm.launch import SILENT_S, Watch
from tests.builders.slurm import ENV, FACTS, LAYOUT, FakeStep, make_watch, progress, results


def test_watch_hosts_probe_the_next_node_of_the_ring_at_master_port() -> None:
    hosts = watch_hosts(LAYOUT, ENV, FACTS)
    assert hosts[0] == {
        "host": "a",
        "ranks": [0],
        "ifname": "fab0",
        "address": "10.0.0.1",
        "preflight_state": "UP",
        "probes": [{"host": "b", "address": "10.0.0.2", "port": 29500}],
    }
    assert hosts[1]["probes"] == [{"host": "a", "address": "10.0.0.1", "port": 29500}]


def test_a_rank_killed_on_one_node_ends_the_others_naming_it(tmp_path: Path) -> None:
    shown: list[str] = []
    watch, step = make_watch(tmp_path, shown)
    watch.note("a", progress("a", 0, "barrier", 0))
    watch.judge()
    assert step.said == []
    exits = [{"rank": 1, "root_cause": True, "signal": "SIGKILL", "text": "killed by SIGKILL"}]
    watch.results("b", results("b", {"rc": 1, "stopped_by": None, "rank_exits": exits}))
    watch.judge()
    assert step.said == [
        {
            "stop": "rank 1 on b killed by SIGKILL",
            "details": {
                "kind": "failure_elsewhere",
                "message": "rank 1 on b killed by SIGKILL",
                "seen_on": "another host",
            },
        }
    ]
    assert "a: ending the run: rank 1 on b killed by SIGKILL" in shown
    watch.judge()  # said once
    assert len(step.said) == 1
    assert json.loads((tmp_path / "b" / "progress.json").read_text())["running"] is False


def test_a_stall_with_a_link_down_asks_for_evidence_then_stops_every_node(tmp_path: Path) -> None:
    shown: list[str] = []
    watch, step = make_watch(tmp_path, shown)
    watch.note("a", progress("a", 0, "bandwidth_all_reduce", 1 << 20))
    watch.note("b", progress("b", 1, "bandwidth_all_reduce", 1 << 20, iface="down"))
    assert "b: rank 1 at bandwidth_all_reduce 1 MiB (5 of 9 tests) [fab0 DOWN]" in shown
    watch.judge()
    assert step.said == []  # the link is down, but not for its patience yet
    for state in watch.states.values():
        state["last_advance"] -= 11
    watch.judge()
    assert [list(m) for m in step.said] == [["diagnose"]]
    assert step.said[0]["diagnose"]["b"] == {
        "ifname": "fab0",
        "probes": [{"host": "a", "address": "10.0.0.1", "port": 29500}],
        "probe_timeout": 2.0,
        "source": "10.0.0.2",
    }
    watch.judge()  # waiting for the evidence of both nodes
    assert len(step.said) == 1
    down = {"ifname": "fab0", "state": "down", "carrier": None}
    for node, iface in (("a", {"ifname": "fab0", "state": "up", "carrier": True}), ("b", down)):
        watch.note(
            node,
            {"kind": "diagnosis", "node": node, "diagnosis": {"interface": iface, "probes": []}},
        )
    watch.judge()
    stop = step.said[-1]
    assert stop["stop"].startswith("stalled: b: fab0 is DOWN (was UP at the pre-flight) — ")
    assert "in bandwidth_all_reduce at 1 MiB" in stop["stop"]
    assert stop["details"]["kind"] == "stall" and "b" in stop["details"]["culprits"]
    assert stop["details"]["cause_named"] is True
    assert any(line.startswith("a, b: ending the run: stalled: b: fab0") for line in shown)
    state = json.loads((tmp_path / "a" / "progress.json").read_text())
    assert state["ending"]["stopped_by"] == stop["stop"]


THREE = {
    "hosts": [{"host": n, "ranks": [i]} for i, n in enumerate("abc")],
    "by_host": {n: {"ranks": [i]} for i, n in enumerate("abc")},
}
ENV3 = {n: {"ifname": "fab0", "address": f"10.0.0.{i + 1}", "master_port": 29500}
        for i, n in enumerate("abc")}  # fmt: skip
FACTS3 = {n: {"interfaces": {"fab0": {"state": "UP"}}} for n in "abc"}


def test_a_node_cut_off_goes_silent_is_not_waited_for_and_is_named(tmp_path: Path) -> None:
    """Node b's records stop (its links cut): after SILENT_S it is silent, the stall is due
    after the short patience, the diagnosis waits only for the nodes that answer, the stop names
    b (its link, the peer that cannot reach it), and once a and c sent their results the watch
    waits no more: b gets a launch.json saying it was lost."""
    shown: list[str] = []
    step = FakeStep()
    watch = Watch(step, tmp_path, watch_hosts(THREE, ENV3, FACTS3), 30.0, shown.append)  # type: ignore[arg-type]
    for node in "abc":
        watch.note(node, progress(node, "abc".index(node), "bandwidth_all_reduce", 1 << 20))
        watch.spoke.add(node)
    watch.judge()
    assert watch.silent() == [] and step.said == []
    # b says nothing for longer than SILENT_S while a and c keep sending
    watch.heard["b"] -= SILENT_S + 2
    for state in watch.states.values():
        state["last_advance"] -= LINK_DOWN_PATIENCE_S + 1
    watch.judge()
    assert watch.silent() == ["b"]
    assert "b: silent: no record from its task for 12 s" in shown
    assert [list(m) for m in step.said] == [["diagnose"]]
    unanswered = {"host": "b", "address": "10.0.0.2", "port": 29500, "ok": False,
                  "answer": "no answer in 2 s", "timed_out": True}  # fmt: skip
    up = {"ifname": "fab0", "state": "up", "carrier": True}
    for node, probes in (("a", [unanswered]), ("c", [])):
        diagnosis = {"interface": up, "probes": probes}
        watch.note(node, {"kind": "diagnosis", "node": node, "diagnosis": diagnosis})
        watch.heard[node] = time.time()
    watch.judge()  # b's evidence is not waited for
    stop = step.said[-1]
    assert stop["stop"].startswith("stalled: b: silent for 1"), stop
    assert "unreachable from a at 10.0.0.2:29500 (no answer in 2 s)" in stop["stop"]
    assert stop["details"]["cause_named"] is True and watch.named()
    assert watch.awaited() == ["a", "c"]
    for node in "ac":
        watch.results(node, results(node, {"rc": -15, "stopped_by": stop["stop"]}))
    assert watch.awaited() == []
    assert watch.run(60) == ["b"]  # returns at once: nothing more is awaited
    lost = watch.lost_record("b")
    assert lost["cut_short"] is True and lost["stopped_by"] == stop["stop"]
    assert lost["lost"].startswith("b was silent for 1") and lost["stop"]["cause_named"]


def test_a_node_not_heard_of_before_its_first_record_or_while_none_come_is_not_silent(
    tmp_path: Path,
) -> None:
    step = FakeStep()
    watch = Watch(step, tmp_path, watch_hosts(THREE, ENV3, FACTS3), 30.0, [].append)  # type: ignore[arg-type]
    now = time.time()
    watch.heard = {"a": now, "b": now - 60, "c": now}
    watch.spoke = {"a", "c"}  # b is still starting its torchrun: no record yet
    watch.listen(now)
    assert watch.silent() == []
    watch.spoke.add("b")
    watch.heard = {n: now - 60 for n in "abc"}  # nothing from anyone: the step, not a node
    watch.listen(now)
    assert watch.silent() == []
    step.ended = {"c": "srun: error: c: task 2: Killed"}  # type: ignore[attr-defined]
    watch.listen(now)
    assert watch.silent() == ["c"]  # srun said its task ended


def test_every_message_to_a_node_renews_its_watch_file_so_a_cut_off_node_ends_alone(
    tmp_path: Path,
) -> None:
    """slurm/node_step.py: every message of the control machine (the watch's heartbeat too)
    renews the supervisor's watch file; without one for its stale limit the supervisor ends the
    run (node/run_progress.py watcher_gone), as a node cut off from the control machine must."""
    import queue

    from nccl_preflight.node.run_progress import touch_watch, watcher_gone
    from nccl_preflight.slurm.node_step import _stop_message

    heard = tmp_path / "watch.json"
    touch_watch(heard, 30.0)
    old = json.loads(heard.read_text())["at"]
    assert watcher_gone(heard, now=old + 29) is None
    assert watcher_gone(heard, now=old + 31)  # nobody spoke for 31 s: the run ends
    messages: queue.Queue = queue.Queue()
    time.sleep(0.01)
    messages.put({"alive": True})
    assert _stop_message(messages, tmp_path, heard) is None
    renewed = json.loads(heard.read_text())
    assert renewed["at"] > old and renewed["stale_after_s"] == 30.0
    assert watcher_gone(heard, now=renewed["at"] + 29) is None
    messages.put({"stop": "stalled: x", "details": {"kind": "stall"}})
    assert _stop_message(messages, tmp_path, heard) == ("stalled: x", {"kind": "stall"})
