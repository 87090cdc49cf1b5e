# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/core/run_watch.py: the controller's judgment while a run goes on: progress
lines, when a rank advanced, the stall limit the sizes before predict, which failure elsewhere ends
a node's run, and how a stall is worded from every host's evidence."""

from __future__ import annotations

from typing import Any

from nccl_preflight.core.run_watch import (
    LINK_DOWN_PATIENCE_S,
    STALL_MARGIN,
    adopted_stop,
    advance,
    all_in_tests,
    any_running,
    cause_named,
    exit_barrier_wait,
    failure_elsewhere,
    format_size,
    link_down,
    new_watch_state,
    predicted_s,
    progress_line,
    rank_list,
    should_show,
    stall_due,
    stall_limit,
    stall_message,
)


def rank(r: int, test: str | None, size: int | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "rank": r,
        "status": kw.get("status", "running"),
        "test": test,
        "size": size,
        "index": kw.get("index", 12),
        "count": kw.get("count", 31),
        "age_s": kw.get("age_s", 0.0),
    }


def test_words_for_sizes_and_ranks() -> None:
    assert format_size(64 * 1024 * 1024) == "64 MiB"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(8) == "8 B"
    assert rank_list([4]) == "rank 4"
    assert rank_list([7, 4, 5, 6]) == "ranks 4-7"
    assert rank_list([0, 2, 5, 6]) == "ranks 0, 2, 5-6"


def test_progress_line_of_a_host() -> None:
    progress = [rank(r, "bandwidth_all_reduce", 64 << 20) for r in (4, 5, 6, 7)]
    line, group = progress_line("node2", [4, 5, 6, 7], progress)
    assert line == "node2: ranks 4-7 at bandwidth_all_reduce 64 MiB (12 of 31 tests)"
    assert group == "bandwidth_all_reduce"
    mixed = [rank(4, "bandwidth_all_reduce", 64 << 20), rank(5, "bandwidth_all_reduce", 1 << 20)]
    line, _ = progress_line("node2", [4, 5, 6], mixed)
    assert line == (
        "node2: rank 4 at bandwidth_all_reduce 64 MiB, rank 5 at bandwidth_all_reduce 1 MiB, "
        "rank 6 starting (12 of 31 tests)"
    )
    done = [rank(0, None, status="passed", index=31)]
    assert progress_line("n1", [0], done)[0] == "n1: rank 0 done (passed) (31 of 31 tests)"
    assert progress_line("n1", [0, 1], [])[0] == "n1: ranks 0-1 starting"


def test_a_terminal_gets_changes_at_most_every_interval_a_log_one_line_per_test() -> None:
    last = {"line": "a", "group": "g1", "at": 100.0}
    assert should_show(True, "b", "g1", {}, 100.0, 5)
    assert not should_show(True, "b", "g1", last, 103.0, 5)
    assert should_show(True, "b", "g1", last, 105.0, 5)
    assert not should_show(True, "a", "g1", last, 200.0, 5)
    assert not should_show(False, "b", "g1", last, 200.0, 5)
    assert should_show(False, "b", "g2", last, 100.1, 5)


def test_advance_notes_when_each_rank_reached_its_place() -> None:
    history, moved = advance({}, [rank(0, "bandwidth_all_reduce", 1024, age_s=2.0)], 100.0)
    assert moved and history["0"]["since"] == 98.0 and history["0"]["prev"] is None
    same, moved = advance(history, [rank(0, "bandwidth_all_reduce", 1024, age_s=9.0)], 107.0)
    assert not moved and same["0"]["since"] == 98.0
    later, moved = advance(history, [rank(0, "bandwidth_all_reduce", 4096, age_s=1.0)], 110.0)
    assert moved and later["0"]["prev"] == {"size": 1024, "since": 98.0}
    other, _ = advance(later, [rank(0, "bandwidth_broadcast", 1024)], 111.0)
    assert other["0"]["prev"] is None  # another test: its sizes predict nothing here


def test_stall_limit_grows_with_what_the_sizes_before_predict() -> None:
    # 2 MiB started at t=0, 4 MiB at t=20: 4 MiB should take about 40 s (20 s per 2 MiB).
    item = {
        "pos": ["running", "t", 3, 4 << 20],
        "since": 20.0,
        "prev": {"size": 2 << 20, "since": 0.0},
    }
    assert predicted_s(item) == 40.0
    # Sizes seen 1 MiB then 4 MiB (2 MiB unseen between looks): 3 MiB moved in 30 s, 4 MiB ~40 s.
    skipped = {
        "pos": ["running", "t", 3, 4 << 20],
        "since": 30.0,
        "prev": {"size": 1 << 20, "since": 0.0},
    }
    assert predicted_s(skipped) == 40.0
    assert stall_limit([{"0": item}], 30.0) == STALL_MARGIN * 40.0
    quick = {"pos": ["running", "t", 3, 4096], "since": 0.2, "prev": {"size": 2048, "since": 0.1}}
    assert stall_limit([{"0": quick}], 30.0) == 30.0
    finished = {**item, "pos": ["passed", None, 3, None]}
    assert stall_limit([{"0": finished}], 30.0) == 30.0


def test_a_rank_killed_elsewhere_ends_this_run_a_failed_check_does_not() -> None:
    killed = {
        "updated": 10.0,
        "ended": {
            "rc": 1,
            "stopped_by": None,
            "rank_exits": [
                {"rank": 2, "signal": "SIGTERM", "text": "exited 143 after SIGTERM",
                 "root_cause": False},
                {"rank": 3, "signal": "SIGKILL", "text": "killed by SIGKILL (signal 9)",
                 "root_cause": True},
            ],
        },
    }  # fmt: skip
    assert failure_elsewhere("n1", {"n1": {}, "n2": killed}) == (
        "rank 3 on n2 killed by SIGKILL (signal 9)"
    )
    assert failure_elsewhere("n2", {"n2": killed}) is None  # its own end is not news
    failed_check = {
        "ended": {
            "rc": 1,
            "rank_exits": [{"rank": 3, "signal": None, "text": "exited 1", "root_cause": True}],
        }
    }
    assert failure_elsewhere("n1", {"n2": failed_check}) is None
    stalled = {"updated": 11.0, "ended": {"rc": 1, "stopped_by": "stalled: n2: fab0 is DOWN"}}
    assert failure_elsewhere("n1", {"n3": stalled}) == "stalled: n2: fab0 is DOWN"
    assert failure_elsewhere("n1", {"n2": killed, "n3": stalled}).startswith("rank 3 on n2")
    torchrun_killed = {"ended": {"rc": -9, "stopped_by": None, "rank_exits": []}}
    assert (
        failure_elsewhere("n1", {"n2": torchrun_killed}) == "torchrun on n2 was killed by SIGKILL"
    )


def test_a_node_whose_start_failed_in_the_waits_call_ends_every_other_run_first() -> None:
    """Start and wait in one call (no more hosts than forks): the node whose start failed says
    so in its state; every other watch ends its run, before any other cause, and the node itself
    has nothing to end."""
    not_started = {**new_watch_state("n2", 7.0), "running": False, "not_started": "no torch"}
    killed = {"updated": 5.0, "ended": {"rc": -9, "stopped_by": None, "rank_exits": []}}
    states = {"n1": new_watch_state("n1", 1.0), "n2": not_started, "n3": killed}
    reason = "torchrun did not start on n2, so the rendezvous could not complete"
    assert failure_elsewhere("n1", states) == reason
    assert adopted_stop(reason, states)["kind"] == "failure_elsewhere"
    assert failure_elsewhere("n2", {"n2": not_started}) is None
    assert new_watch_state("n1", 1.0)["not_started"] is None


def test_a_run_being_stopped_elsewhere_ends_this_one_and_keeps_its_named_cause() -> None:
    """A host's watch writes `ending` before its stop call: the others end theirs at once, and a
    stall adopted from there keeps its details (its culprits: the cause stays named)."""
    reason = "stalled: n2: fab0 is DOWN (was UP at the pre-flight) — rank 0 waited on rank 1"
    stop = {"kind": "stall", "culprits": {"n2": ["fab0 is DOWN (was UP at the pre-flight)"]},
            "test": "bandwidth_all_reduce", "size_bytes": 4 << 20}  # fmt: skip
    ending = {"updated": 5.0, "running": True, "ending": {"stopped_by": reason, "stop": stop},
              "ended": None}  # fmt: skip
    states = {"n1": {}, "n2": ending}
    assert failure_elsewhere("n1", states) == reason
    assert adopted_stop(reason, states) == {**stop, "message": reason, "seen_on": "n2"}
    # Ended by now: the same.
    ended = {"updated": 6.0, "ended": {"rc": -15, "stopped_by": reason, "stop": stop}}
    assert adopted_stop(reason, {"n1": {}, "n2": ended})["culprits"] == stop["culprits"]
    # A stall whose details are gone is still a stall; a death elsewhere is what it was.
    assert adopted_stop(reason, {"n1": {}}) == {
        "kind": "stall", "message": reason, "seen_on": "another host"}  # fmt: skip
    assert adopted_stop("rank 1 on n2 killed by SIGKILL", states)["kind"] == "failure_elsewhere"


def test_a_torchrun_left_in_its_exit_barrier_by_a_failed_host_is_ended_not_timed_out() -> None:
    """node2's rank failed (wrong data: exit 1): its torchrun returned without the exit barrier,
    node1's passed and waits there for it. Once node1's ranks all finished and exited and node2's
    run ended, node1's torchrun is ended, saying so; never earlier, never in a healthy run."""
    hosts = [{"host": "node1", "ranks": [0, 2]}, {"host": "node2", "ranks": [1]},
             {"host": "node3", "ranks": [3]}]  # fmt: skip
    passed = [rank(r, None, status="passed") for r in (0, 2)]
    mine = {"progress": passed, "workers_exited": True}
    failed = {
        "updated": 5.0,
        "ended": {
            "rc": 1,
            "stopped_by": None,
            "rank_exits": [
                {"rank": 1, "signal": None, "text": "exited 1 (a check failed)", "root_cause": True}
            ],
        },
    }
    waiting = {"progress": [rank(3, None, status="passed")], "workers_exited": True}
    found = exit_barrier_wait("node1", hosts, {"node1": mine, "node2": failed, "node3": waiting})
    reason = (
        "torchrun waited in its exit barrier for node2, whose ranks failed "
        "(rank 1 exited 1 (a check failed)); ended"
    )
    assert found == (reason, {"kind": "exit_barrier", "message": reason, "waited_for": ["node2"]})
    # Not before this node's workers exited, nor while one of its ranks runs or has no record
    # (before the rendezvous torchrun has no worker either).
    for me in (
        {**mine, "workers_exited": False},
        {**mine, "progress": [passed[0], rank(2, "broadcast")]},
        {**mine, "progress": passed[:1]},
    ):
        states = {"node1": me, "node2": failed, "node3": waiting}
        assert exit_barrier_wait("node1", hosts, states) is None
    # Not while a rank of a third host is still in a test (node1 may hold its store), nor
    # before node2's run ended, nor when it ended well (its torchrun left the barrier).
    busy = {"progress": [rank(3, "broadcast")]}
    finishing = {"progress": [rank(1, None, status="failed")]}
    well = {"updated": 5.0, "ended": {"rc": 0, "stopped_by": None, "rank_exits": []}}
    for node2, node3 in ((failed, busy), (finishing, waiting), (well, waiting)):
        states = {"node1": mine, "node2": node2, "node3": node3}
        assert exit_barrier_wait("node1", hosts, states) is None
    # A run ended in its exit barrier is no failure: it ends nothing elsewhere.
    stop = found[1]
    ended_here = {"updated": 6.0, "ended": {"rc": -15, "stopped_by": reason, "stop": stop}}
    assert failure_elsewhere("node3", {"node1": ended_here, "node3": waiting}) is None
    ending = {"ending": {"stopped_by": reason, "stop": stop}}
    assert failure_elsewhere("node3", {"node1": ending}) is None
    states = {"node1": ended_here, "node2": well, "node3": waiting}
    assert exit_barrier_wait("node3", hosts, states) is None
    # Two failed hosts: both named, the earliest failure said.
    other = {"updated": 7.0, "ended": {"rc": 1, "stopped_by": None, "rank_exits": []}}
    states = {"node1": mine, "node2": failed, "node3": other}
    assert exit_barrier_wait("node1", hosts, states)[0] == (  # type: ignore[index]
        "torchrun waited in its exit barrier for node2 and node3, whose ranks failed "
        "(rank 1 exited 1 (a check failed) on node2); ended"
    )


HOSTS = [
    {"host": "node1", "ranks": [0, 2], "ifname": "fab0", "preflight_state": "up"},
    {"host": "node2", "ranks": [1], "ifname": "fab0", "preflight_state": "up"},
]


def states(node2_iface: dict[str, Any], probes: dict[str, list] | None = None) -> dict:
    probes = probes or {}
    at = [rank(0, "bandwidth_all_reduce", 4 << 20), rank(2, "bandwidth_all_reduce", 4 << 20)]
    return {
        "node1": {
            "progress": at,
            "diagnosis": {
                "interface": {"ifname": "fab0", "state": "up", "carrier": True},
                "probes": probes.get("node1", []),
            },
        },
        "node2": {
            "progress": [rank(1, "bandwidth_all_reduce", 4 << 20)],
            "diagnosis": {"interface": node2_iface, "probes": probes.get("node2", [])},
        },
    }


def test_a_stall_names_the_host_whose_link_went_down_and_where_the_ranks_waited() -> None:
    down = {"ifname": "fab0", "state": "down", "carrier": None}
    probes = {
        "node1": [{"host": "node2", "address": "10.0.0.2", "port": 29500, "ok": False,
                   "answer": "no answer in 2 s"}],
        "node2": [{"host": "node1", "address": "10.0.0.1", "port": 29500, "ok": False,
                   "answer": "Network is unreachable"}],
    }  # fmt: skip
    message, details = stall_message(HOSTS, states(down, probes), 31.0, 30.0)
    assert message.startswith(
        "node2: fab0 is DOWN (was UP at the pre-flight) — ranks 0 and 2 waited on rank 1 in "
        "bandwidth_all_reduce at 4 MiB; no rank advanced for 31 s"
    ), message
    assert details["culprits"] == {"node2": ["fab0 is DOWN (was UP at the pre-flight)"]}
    assert details["cause_named"] is True  # no pairwise relaunch after it
    assert (details["suspect_ranks"], details["waiting_ranks"]) == ([1], [0, 2])
    assert (details["test"], details["size_bytes"]) == ("bandwidth_all_reduce", 4 << 20)


def test_a_stall_with_links_up_names_the_unreachable_host_or_the_rank_behind() -> None:
    up = {"ifname": "fab0", "state": "up", "carrier": True}
    probes = {
        "node1": [{"host": "node2", "address": "10.0.0.2", "port": 29500, "ok": False,
                   "answer": "no answer in 2 s"}],
    }  # fmt: skip
    message, _ = stall_message(HOSTS, states(up, probes), 40.0, 30.0)
    assert message.startswith(
        "node2: unreachable from node1 at 10.0.0.2:29500 (no answer in 2 s) — ranks 0 and 2 "
        "waited on rank 1"
    ), message
    no_carrier = {"ifname": "fab0", "state": "up", "carrier": False}
    assert "fab0 has no carrier" in stall_message(HOSTS, states(no_carrier), 40.0, 30.0)[0]
    # Nothing wrong with the network; rank 1 is a size behind the others.
    behind = states(up)
    behind["node2"]["progress"] = [rank(1, "bandwidth_all_reduce", 2 << 20)]
    message, details = stall_message(HOSTS, behind, 40.0, 30.0, "nccl_stall_timeout 30 s")
    assert message.startswith("every fabric interface is up and the ring answers"), message
    assert "ranks 0 and 2 waited on rank 1 in bandwidth_all_reduce at 4 MiB" in message
    assert message.endswith("(nccl_stall_timeout 30 s)")
    assert details["suspect_ranks"] == [1]


def test_stall_detection_waits_until_every_rank_is_in_its_tests() -> None:
    hosts = [{"host": "a", "ranks": [0, 1]}, {"host": "b", "ranks": [2]}]
    in_tests = {"a": {"progress": [rank(0, "barrier", index=1), rank(1, None, status="passed")]}}
    assert not all_in_tests(hosts, in_tests)  # rank 2 wrote nothing yet
    in_tests["b"] = {"progress": [rank(2, "checkin", index=0)]}
    assert not all_in_tests(hosts, in_tests)  # still checking in
    in_tests["b"] = {"progress": [rank(2, "all_reduce_sum", index=2)]}
    assert all_in_tests(hosts, in_tests)


def test_no_stall_once_every_rank_finished() -> None:
    done = {"a": {"progress": [rank(0, None, status="passed")]}, "b": {"progress": []}}
    assert not any_running(done)
    done["b"]["progress"] = [rank(1, "barrier")]
    assert any_running(done)


def test_a_named_cause_is_a_link_down_or_a_definite_probe_error_not_a_slow_answer() -> None:
    """What ends a stalled run without the pairwise relaunch (plugins/filter/
    core/pairwise_relaunch.py): a link down or without carrier, a probe with no route; not a
    probe that only got no answer in time (a slow link delays the SYN that long)."""
    up = {"ifname": "fab0", "state": "up", "carrier": True}
    assert cause_named(HOSTS, states({"ifname": "fab0", "state": "down", "carrier": None}))
    assert cause_named(HOSTS, states({**up, "carrier": False}))

    def probe(answer: str, timed_out: bool) -> dict[str, list]:
        return {"node1": [{"host": "node2", "address": "10.0.0.2", "port": 29500, "ok": False,
                           "answer": answer, "timed_out": timed_out}]}  # fmt: skip

    assert cause_named(HOSTS, states(up, probe("No route to host", False)))
    slow = states(up, probe("no answer in 2 s", True))
    assert not cause_named(HOSTS, slow)
    message, details = stall_message(HOSTS, slow, 40.0, 30.0)
    assert message.startswith("node2: unreachable from node1") and not details["cause_named"]
    # Nothing wrong with the network: the rank behind is no named cause either.
    assert not cause_named(HOSTS, states(up))


def watch_state(last_advance: float, *entries: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"last_advance": last_advance, "history": {}, "progress": list(entries), **kw}


WATCHED = [{"host": "a", "ranks": [0]}, {"host": "b", "ranks": [1]}]


def test_a_stall_is_due_after_the_stall_timeout_once_every_rank_is_in_its_tests() -> None:
    states = {"a": watch_state(100.0, rank(0, "barrier")), "b": watch_state(95.0, rank(1, "x"))}
    assert stall_due(WATCHED, states, 30, 130) is None  # 30 s since the last advance: not more
    quiet, limit, why = stall_due(WATCHED, states, 30, 131)  # type: ignore[misc]
    assert (quiet, limit, why) == (31, 30, "nccl_stall_timeout 30 s")
    assert stall_due(WATCHED, states, 0, 1000) is None  # 0: no stall detection
    # A rank still checking in (index 0) is the check-in's finding, not a stall.
    early = {**states, "b": watch_state(95.0, rank(1, "check_in", index=0))}
    assert stall_due(WATCHED, early, 30, 1000) is None
    # Every rank finished: the processes only exit.
    done = {h: watch_state(0.0, rank(i, None, status="passed")) for i, h in enumerate("ab")}
    assert stall_due(WATCHED, done, 30, 1000) is None


def test_a_link_down_makes_the_stall_due_after_its_short_patience_even_before_the_tests() -> None:
    down = {"ifname": "fab0", "state": "down", "carrier": None}
    states = {
        "a": watch_state(100.0, rank(0, "check_in", index=0)),
        "b": watch_state(100.0, rank(1, "check_in", index=0), interface=down),
    }
    assert link_down(states["b"]) and not link_down(states["a"])
    assert link_down({"interface": {"state": "up", "carrier": False}})
    assert stall_due(WATCHED, states, 300, 100 + LINK_DOWN_PATIENCE_S) is None
    quiet, limit, why = stall_due(WATCHED, states, 300, 111)  # type: ignore[misc]
    assert (quiet, limit) == (11, LINK_DOWN_PATIENCE_S)
    assert why == "10 s once a fabric link is down"


def test_a_stopped_rank_is_named_with_its_pid_and_ends_the_run_after_the_short_patience() -> None:
    """A rank whose process is stopped (state T, node/run_progress.py's ``stopped``): the stall is
    due after LINK_DOWN_PATIENCE_S, names that rank alone (not its whole node), and is a named
    cause: no pairwise relaunch after it."""
    stopped = {**rank(2, "bandwidth_all_reduce", 32 << 10), "stopped": {"pid": 4242, "state": "T"}}
    watched = [*WATCHED, {"host": "c", "ranks": [2, 3]}]
    states = {
        "a": watch_state(100.0, rank(0, "bandwidth_all_reduce", 32 << 10)),
        "b": watch_state(100.0, rank(1, "bandwidth_all_reduce", 32 << 10)),
        "c": watch_state(100.0, stopped, rank(3, "bandwidth_all_reduce", 32 << 10)),
    }
    assert stall_due(watched, states, 300, 100 + LINK_DOWN_PATIENCE_S) is None
    quiet, limit, why = stall_due(watched, states, 300, 111)  # type: ignore[misc]
    assert (quiet, limit, why) == (11, LINK_DOWN_PATIENCE_S, "10 s once a rank is stopped")
    hosts = [{**h, "ifname": "fab0", "preflight_state": "UP"} for h in watched]
    message, details = stall_message(hosts, states, quiet, limit, why)
    assert message.startswith(
        "c: rank 2 (pid 4242) is stopped (state T: stopped by a signal) — ranks 0-1, 3 waited "
        "on rank 2 in bandwidth_all_reduce at 32 KiB; no rank advanced for 11 s (10 s once a "
        "rank is stopped)"
    ), message
    assert details["culprits"] == {
        "c": ["rank 2 (pid 4242) is stopped (state T: stopped by a signal)"]
    }
    assert (details["suspect_ranks"], details["stopped_ranks"]) == ([2], [2])
    assert details["waiting_ranks"] == [0, 1, 3]
    assert details["cause_named"] is True
    # a rank that finished is not stopped, whatever its process does now
    done = {**stopped, "status": "passed"}
    assert not cause_named(hosts, {**states, "c": watch_state(100.0, done)})


def test_a_silent_host_that_its_peer_cannot_reach_is_the_named_cause() -> None:
    """A host the watch heard nothing from (``silent``: the Slurm watch sets it) gets the short
    patience; with its ring peer's probe unanswered it is the culprit, its link named, and a
    named cause; heard of again or reachable, it is no named cause."""
    up = {"ifname": "fab0", "state": "up", "carrier": True}
    silent = {"since": 90.0, "for_s": 12.0}
    states = {
        "a": watch_state(100.0, rank(0, "bandwidth_all_reduce", 4 << 20), interface=up),
        "b": watch_state(99.0, rank(1, "bandwidth_all_reduce", 4 << 20), silent=silent),
    }
    quiet, limit, why = stall_due(WATCHED, states, 300, 111)  # type: ignore[misc]
    assert (limit, why) == (LINK_DOWN_PATIENCE_S, "10 s once a node went silent")
    states["a"]["diagnosis"] = {
        "interface": up,
        "probes": [{"host": "b", "address": "10.0.0.2", "port": 29500, "ok": False,
                    "answer": "no answer in 2 s", "timed_out": True}],
    }  # fmt: skip
    hosts = [{**h, "ifname": "fab0", "preflight_state": "UP"} for h in WATCHED]
    message, details = stall_message(hosts, states, quiet, limit, why)
    assert details["culprits"] == {
        "b": [
            "silent for 12 s: the node and its fabric link fab0 stopped answering (no word from "
            "its task)",
            "unreachable from a at 10.0.0.2:29500 (no answer in 2 s)",
        ]
    }
    assert message.startswith("b: silent for 12 s: the node and its fabric link fab0"), message
    assert "rank 0 waited on rank 1 in bandwidth_all_reduce at 4 MiB" in message
    assert details["cause_named"] is True
    reachable = {**states["a"], "diagnosis": {"interface": up, "probes": []}}
    assert not cause_named(hosts, {**states, "a": reachable})
    heard = {**states["b"], "silent": None}
    assert not cause_named(hosts, {**states, "b": heard})
    assert stall_due(WATCHED, {**states, "b": heard}, 300, 111) is None
