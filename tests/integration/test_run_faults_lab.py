# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Faults while the ranks run, on the lab with the whole playbook (issue 17 items 1-2, issue 15
item 3): a rank killed with SIGKILL ends the run on every node within 10 s and is named with its
signal; a fabric link cut mid-run is named (host, interface, test, size) long before
nccl_run_timeout; the progress of the ranks is printed while they run; nothing stays behind.
A named cause ends the play at once: no pairwise relaunch after it (issue 25 item 2).

Times are read from what the run wrote (launch.json's finished_at, the moment the test acted),
with margins for a shared 2-core machine; speed goals live in bench/.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders.lab_runs import LONG_SWEEP, assert_only_cause
from tests.lab.harness import Lab
from tests.lab.runs import (
    PHASE_WAIT_S,
    assert_nothing_left,
    body_ended,
    during,
    finished_epoch,
    kill_at,
    label,
    launch,
    launch_records,
    new_run_id,
    paused_before_barrier,
    playbook,
    rank_record,
    rank_suites,
    validate,
)
from tests.polling import wait_or_fail


def at_bandwidth(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return str(doc.get("current_test") or "").startswith("bandwidth_") and isinstance(
        doc.get("current_size"), int
    )


def looks_saw_bandwidth(report: Path, hosts: list[Any]) -> bool:
    """Every host's progress.json (what its looks saw) has a rank in a bandwidth_ test."""
    for host in hosts:
        try:
            doc = json.loads((report / host.inventory_name / "progress.json").read_text())
        except (OSError, ValueError):
            return False
        tests = [str(p.get("test") or "") for p in doc.get("progress") or []]
        if not any(t.startswith("bandwidth_") for t in tests):
            return False
    return True


def link_cut_in_bandwidth(
    lab: Lab, report: Path, victim: Any, cut: dict[str, float], undo: list[Callable[[], None]]
) -> Callable[[], None]:
    """An action for `during`: take the victim's fabric link down once rank 0 times a bandwidth
    size and the looks of every host saw it (not a fixed sleep: a look takes 6-10 s on a loaded
    control machine); the time of the cut goes into `cut`, the link's undo into `undo`."""
    record = rank_record(report.name, lab.hosts[0], 0)

    def cut_link() -> None:
        wait_or_fail(
            lambda: at_bandwidth(record) and looks_saw_bandwidth(report, lab.hosts),
            timeout=PHASE_WAIT_S,
            give_up=body_ended,
        )
        undo.append(lab.link_down(victim))
        cut["at"] = time.time()

    return cut_link


def assert_progress_printed(stdout: str, hosts: list[Any]) -> None:
    """The ranks' progress while they ran (launch_progress log): one line per host per test,
    never a wall of retries."""
    progress = [x for x in stdout.splitlines() if re.search(r": rank \d+ at \w+", x)]
    assert any(re.search(r"at bandwidth_\w+ [\d.]+ [KMG]?i?B \(\d+ of \d+ tests\)", x)
               for x in progress), stdout[-4000:]  # fmt: skip
    for host in hosts:
        mine = [x for x in progress if x.strip().startswith(f"{host.inventory_name}:")]
        assert mine, stdout[-4000:]
        # Not a terminal: a host's next line only when its test group changed.
        groups = [re.sub(r" [\d.]+ [KMG]?i?B| \(\d+ of \d+ tests\)", "", x) for x in mine]
        assert all(a != b for a, b in itertools.pairwise(groups)), mine
    assert "RETRYING" not in stdout


@pytest.mark.lab
def test_a_sigkilled_rank_ends_the_run_on_every_node_within_10_s_and_is_named(
    lab2: Lab, tmp_path: Path
) -> None:
    run_id = new_run_id()
    victim_host, victim_rank = lab2.hosts[1], 3  # local rank 1 of node 2 (2 ranks per node)
    killed: dict[str, Any] = {}
    # rank 3 waits in barrier (for rank 0, paused) when it is killed.
    with during(kill_at(lab2, run_id, victim_host, victim_rank, "barrier", PHASE_WAIT_S, killed)):
        result = launch(
            lab2,
            run_id,
            tmp_path,
            {
                "nccl_slots": 2,
                # Long on purpose: the end must come from the death, not from a timeout.
                "nccl_run_timeout": 240,
                "nccl_master_port": 29571,
                # Rank 0 stays before barrier: the ranks in barrier wait for it, and node 1
                # can only end when the watch ends it.
                "nccl_check_args": paused_before_barrier(),
            },
        )
    assert "at" in killed, result.stdout[-3000:]
    assert result.returncode != 0, "a killed rank must fail the play"
    report = tmp_path / run_id
    launches = launch_records(report, lab2.hosts)
    for host, record in launches.items():
        assert record["timed_out"] is False, (host, record)
        # The goal is 10 s (bench/detect.py measures it: BENCHMARKS.md); finished_at has whole
        # seconds. The victim's node ends by itself (torchrun sees the death): 2.5-8 s measured
        # on 2 cores at load 15-28. Node 1 learns it only between looks: node 2's look must
        # return, then node 1's own look, then its stop call ends the tree (kill grace, collect).
        # Each look took 6-9 s and the stop call 4-13 s there, 11.5-31 s in all (measured); the
        # bound leaves room for CI's load and stays far below nccl_run_timeout (240 s): that the
        # death ended the run is what timed_out and stopped_by say.
        bound = 20 if host == victim_host.inventory_name else 60
        took = finished_epoch(record) - killed["at"]
        assert took <= bound + 1, f"{host} ended {took:.1f} s after the kill: {record}"
    exits = launches[victim_host.inventory_name]["rank_exits"]
    root = next(e for e in exits if e["root_cause"])
    assert root["rank"] == victim_rank and root["pid"] == killed["pid"], exits
    assert root["signal"] == "SIGKILL" and root["exitcode"] == -9, root
    # Not the OOM killer here: the kernel log either says so or its lookup is given.
    assert root["oom"] is None
    assert "SIGKILL" in root["text"] and ("OOM" in root["text"] or "dmesg" in root["text"])
    # Rank 0 sleeps before barrier, so node 1 cannot end by itself: the watch ended it, naming
    # the death.
    other = launches[lab2.hosts[0].inventory_name]
    assert f"rank {victim_rank} on {victim_host.inventory_name} killed by SIGKILL" in (
        other["stopped_by"] or ""
    ), other
    assert "killed by SIGKILL" in result.stdout and "FAILED" in result.stdout
    # The JUnit of the killed rank says how it died, at the test it was in.
    suites = rank_suites(report / "junit.xml")
    assert len(suites) == 4
    suite = suites[f"nccl.{label(victim_host)}.rank{victim_rank}"]
    errors = [e.get("message", "") for e in suite.iter("error")]
    assert any("It was killed by SIGKILL" in m for m in errors), errors
    in_error = [c.get("name", "") for c in suite.iter("testcase") if c.find("error") is not None]
    assert any("barrier" in name for name in in_error), in_error
    # The ranks that were not killed still reported their own tests.
    for name, other_suite in suites.items():
        if other_suite is not suite:
            assert "all_reduce_sum" in {c.get("name") for c in other_suite.iter("testcase")}, name
    # The killed rank alone is the cause, first and in the headline; the others fold under it.
    cause = assert_only_cause(report, victim_host.inventory_name, victim_rank)
    # Where it stopped is what happened; the fix says what to look for; the class and the exit
    # status bin/nccl-preflight gives (test_report_lab's killed-rank run, merged into this one:
    # that the wrapper exits with verdict.json's exit_code is that file's other runs').
    verdict = json.loads((report / "verdict.json").read_text())
    assert (verdict["class"], verdict["exit_code"]) == ("rank_lost", 4), verdict["findings"][:2]
    assert cause["test"] == "barrier" and " in barrier" in cause["what"], cause
    assert "SIGKILL" in cause["fix"], cause
    validate(report)
    assert_nothing_left(run_id, lab2.hosts)


@pytest.mark.lab
def test_a_rank_that_stops_advancing_is_a_stall_after_nccl_stall_timeout(
    lab2: Lab, tmp_path: Path
) -> None:
    """Rank 0 sleeps before barrier with every link up: after nccl_stall_timeout the run ends,
    saying the network answers and where the ranks were stuck, not at nccl_run_timeout."""
    run_id = new_run_id()
    started = time.time()
    result = launch(
        lab2,
        run_id,
        tmp_path,
        {
            "nccl_slots": 1,
            "nccl_run_timeout": 300,
            "nccl_stall_timeout": 10,
            "nccl_master_port": 29575,
            "nccl_check_args": paused_before_barrier(),
        },
    )
    assert result.returncode != 0
    report = tmp_path / run_id
    for record in launch_records(report, lab2.hosts).values():
        stopped = record["stopped_by"] or ""
        assert stopped.startswith("stalled: every fabric interface is up and the ring answers"), (
            record
        )
        assert "stuck in barrier" in stopped and "(nccl_stall_timeout 10 s)" in stopped, stopped
        assert record["stop"]["kind"] == "stall" and record["stop"]["culprits"] == {}
        assert record["timed_out"] is False
        # Far from nccl_run_timeout (300 s): the stall ended it.
        assert finished_epoch(record) - started < 200
    validate(report)
    assert_nothing_left(run_id, lab2.hosts)


@pytest.mark.lab
def test_three_hosts_a_link_cut_ends_the_play_at_once_without_the_pairwise_relaunch(
    lab_factory: Callable[..., Lab], tmp_path: Path
) -> None:
    """Issue 25 item 2, the whole playbook on 3 hosts with nccl_pairwise=auto: the middle host's
    link is cut while the ranks time a collective. The stall is named (host, interface, and the
    test and size where the ranks waited), every node's ranks are stopped, and no pairwise
    relaunch runs (it could not pass a dead link and would only wait for its bound): the play
    ends long before nccl_run_timeout (300 s), the verdict, the report and the JUnit name the
    link, and every rank is still in the JUnit. The progress lines of the ranks were printed
    while they ran. (This run also carries what a two-host link cut under --tags launch asserted:
    the same watch, the same stop, one run fewer.)"""
    lab3 = lab_factory(3)
    run_id = new_run_id()
    victim = lab3.hosts[1]
    cut: dict[str, float] = {}
    undo: list[Callable[[], None]] = []
    with during(link_cut_in_bandwidth(lab3, tmp_path / run_id, victim, cut, undo), undo):
        result = playbook(
            lab3,
            run_id,
            tmp_path,
            {
                "nccl_slots": 1,
                "nccl_pairwise": "auto",
                "nccl_run_timeout": 300,
                "nccl_master_port": 29577,
                "launch_progress": "log",
                "nccl_check_args": LONG_SWEEP,
            },
        )
        ended = time.time()
    output = result.stdout + result.stderr
    assert "at" in cut, output[-3000:]
    assert result.returncode != 0, output[-3000:]
    name, ifname = victim.inventory_name, victim.fabric_ifname
    named = f"{name}: {ifname} is DOWN (was UP at the pre-flight)"
    said = " ".join(output.split())  # the callback wraps long messages
    assert f"stalled: {named}" in said, output[-4000:]
    stalled = said.split(f"stalled: {named}", 1)[1][:600]
    assert re.search(r"waited on rank \d+ in bandwidth_\w+ at [\d.]+ [KMG]?i?B", stalled), stalled
    assert "running only the pairwise rounds" not in said, output[-4000:]
    report = tmp_path / run_id
    assert not list(report.glob("*/pairwise")), "no pairwise relaunch after a named cause"
    for host, launched in launch_records(report, lab3.hosts).items():
        assert (launched["stopped_by"] or "").startswith(f"stalled: {named}"), (host, launched)
        assert launched["timed_out"] is False
        # Every host's stop keeps the culprit, adopted or found there (the relaunch reads it).
        stop = launched["stop"]
        assert stop["kind"] == "stall" and name in stop["culprits"], (host, stop)
        assert stop["cause_named"] is True, (host, stop)
        assert stop["test"].startswith("bandwidth_") and isinstance(stop["size_bytes"], int)
        # Goal (bench/detect.py): named <= 30 s after the cut. A look sees the link down, 10 s
        # pass without advance, a diagnose call, the other hosts' evidence and the stop call:
        # 21-23 s at load 12-17 on 2 cores, 41 s at load 23 (two hosts); room for a third.
        took = finished_epoch(launched) - cut["at"]
        assert took <= 110, f"{host} ended {took:.0f} s after the cut"
    assert_progress_printed(result.stdout, lab3.hosts)
    # Long before nccl_run_timeout (300 s) and before a relaunch could have ended (its bound is
    # launch_relaunch_timeout, 120 s, after the 10 s of patience); the goal (30 s) is measured
    # by bench/detect.py (BENCHMARKS.md), not here.
    assert ended - cut["at"] < 120, f"the play ended {ended - cut['at']:.0f} s after the cut"
    verdict = json.loads((report / "verdict.json").read_text())
    assert verdict["exit_code"] != 0, verdict["class"]  # bin/nccl-preflight exits with it
    assert any(named in json.dumps(f) for f in verdict["findings"]), verdict["findings"]
    assert named in (report / "report.html").read_text()
    suites = rank_suites(report / "junit.xml")
    assert set(suites) == {f"nccl.{label(h)}.rank{h.rank}" for h in lab3.hosts}, set(suites)
    for suite_name, suite in suites.items():
        errors = [e.get("message", "") for e in suite.iter("error")]
        assert any(named in m for m in errors), (suite_name, errors)
    assert_only_cause(report, name, victim.rank)  # the host with the link down, alone
    validate(report)
    assert_nothing_left(run_id, lab3.hosts)


@pytest.mark.lab
def test_a_stopped_rank_is_named_with_its_pid_and_its_host_alone_fails(
    lab2: Lab, tmp_path: Path
) -> None:
    """Rank 1 (on the second host) is stopped with SIGSTOP while it times a collective: after
    the short patience the stall names that rank, its pid and state T, with the fix (resume it
    or end what holds it); that host alone fails; the run ends long before nccl_run_timeout."""
    run_id = new_run_id()
    victim = lab2.hosts[1]
    record = rank_record(run_id, victim, 1)
    stopped: dict[str, Any] = {}

    def stop() -> None:
        wait_or_fail(lambda: at_bandwidth(record), timeout=PHASE_WAIT_S, give_up=body_ended)
        stopped["pid"] = int(json.loads(record.read_text())["pid"])
        stopped["at"] = time.time()
        lab2.kill(victim, stopped["pid"], signal.SIGSTOP)

    with during(stop):
        result = launch(
            lab2,
            run_id,
            tmp_path,
            {
                "nccl_slots": 1,
                "nccl_run_timeout": 300,
                "nccl_master_port": 29579,
                "nccl_check_args": LONG_SWEEP,
            },
        )
    assert "pid" in stopped, result.stdout[-3000:]
    assert result.returncode != 0
    report = tmp_path / run_id
    named = f"rank 1 (pid {stopped['pid']}) is stopped (state T: stopped by a signal)"
    said = " ".join(result.stdout.split())  # the callback wraps long messages
    assert f"stalled: {victim.inventory_name}: {named}" in said, result.stdout[-4000:]
    for record_ in launch_records(report, lab2.hosts).values():
        assert record_["stop"]["stopped_ranks"] == [1], record_["stop"]
        assert record_["timed_out"] is False
        # far below nccl_run_timeout (300 s): 10 s of patience, the diagnosis, the stop
        assert finished_epoch(record_) - stopped["at"] < 150
    cause = assert_only_cause(report, victim.inventory_name, 1)
    assert named in cause["what"] and f"kill -CONT {stopped['pid']}" in cause["fix"], cause
    validate(report)
    assert_nothing_left(run_id, lab2.hosts)
