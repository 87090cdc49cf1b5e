# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A control machine that is slow but alive ends no healthy run, and a run that did end on its
node without its results is lost in the report, never an "ok" with nothing: the lab, real
ansible-playbook over SSH, the control side held up deterministically with SIGSTOP.

At 16 and 32 lab hosts (load 25-50) some hosts' waits once returned "ok" within a minute with no
progress, no result and the run directory gone, and the report said their ranks "never
started". Two ways a held-up control side did that, each reproduced here on two hosts:

- its looks stop (the Ansible workers that wait get no CPU) for longer than the watch mark's
  30 s: the node's supervisor took the control machine for gone, ended the run and removed its
  directory. With the run's warden watching the node the looks leave no mark now, so the run
  goes on and its results come back;
- its heartbeats stop (the tether of one host gets no CPU) past the warden's lease: the warden
  ends that host's run, as it must for a connection cut silently. The wait says so - lost, in
  the warden's words, which the tether kept once it ran again - and the report shows that
  host's rank as an error with them; the other host's run is ended at once, not at its timeout.

Every wait is bounded generously (a loaded 2-core machine); nothing of the run may be left.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.node.processes import descendants, process_table
from tests.lab.harness import Lab
from tests.lab.interrupt import PHASE_WAIT_S, Play, ranks_running, remains, wait_until
from tests.lab.runs import label, new_run_id, paused_before_barrier, rank_suites, run_dir, validate

# Longer than the watch mark's 30 s (roles/launch/action_plugins/nccl_torchrun.py
# WATCH_STALE_MIN_S) with room: the supervisor of an unfixed node ends the run by then.
LOOKS_HELD_S = 50.0
# Generous bounds on a loaded machine.
END_BOUND_S = 480.0
GONE_BOUND_S = 120.0
VARIABLES = {
    "nccl_slots": 1,
    "nccl_master_port": 29573,
    # Rank 0 waits before barrier until its own watchdog: the run is alive all along the hold.
    "nccl_check_args": paused_before_barrier(),
    "launch_check_timeout": 150,
    "nccl_run_timeout": 200,
    "nccl_stall_timeout": 0,
}


@contextlib.contextmanager
def held(pids: list[int]) -> Iterator[None]:
    """SIGSTOP ``pids`` for the block, SIGCONT them after it, whatever happens."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    return []


def waiting_workers(play: Play) -> list[int]:
    """ansible-playbook's workers (its forks: the waits of the launch), not their ssh."""
    table = process_table()
    return [
        pid
        for pid in descendants(play.proc.pid, table)
        if any(part.endswith("ansible-playbook") for part in cmdline(pid))
    ]


def tether_of(play: Play, address: str) -> int | None:
    """The tether of the host at ``address``: the tether process whose ssh reaches it."""
    table = process_table()
    for pid in table:
        argv = cmdline(pid)
        ours = "nccl_preflight.core.tether" in argv and play.run_id in argv
        if ours and any(address in cmdline(child) for child in descendants(pid, table)):
            return pid
    return None


def run_until_ranks(lab: Lab, tmp_path: Path) -> Play:
    play = Play(lab, new_run_id(), tmp_path / "reports", VARIABLES)
    running = ranks_running(play.run_id, lab)
    if wait_until(lambda: running() or play.proc.poll() is not None, PHASE_WAIT_S) is None:
        play.close()
        raise AssertionError(f"the ranks never ran:\n{play.output()[-4000:]}")
    return play


def finish(play: Play) -> str:
    assert play.wait(END_BOUND_S) is not None, play.output()[-4000:]
    return play.output()


@pytest.mark.lab
def test_looks_held_up_past_the_watch_mark_end_no_run(lab2: Lab, tmp_path: Path) -> None:
    """Before the fix both runs ended here 30 s into the hold and both hosts' ranks "never
    started"; now they run to rank 0's watchdog and every result comes back."""
    play = run_until_ranks(lab2, tmp_path)
    try:
        workers = waiting_workers(play)
        assert len(workers) >= len(lab2.hosts), workers
        with held(workers):
            alive = wait_until(
                lambda: any(not run_dir(play.run_id, h).is_dir() for h in lab2.hosts),
                LOOKS_HELD_S,
            )
        output = finish(play)
    finally:
        play.close()
    assert alive is None, "a run directory went away while the looks were held up"
    assert "lost:" not in output, output[-4000:]
    report = tmp_path / "reports" / play.run_id
    for host in lab2.hosts:
        assert (report / host.inventory_name / "launch.json").is_file(), output[-4000:]
        assert (report / host.inventory_name / f"rank-{lab2.hosts.index(host)}.json").is_file()
    assert remains(play.run_id, lab2) == []


@pytest.mark.lab
def test_a_run_the_warden_ended_is_lost_with_its_words_not_ok(lab2: Lab, tmp_path: Path) -> None:
    """Before the fix the wait of the held-up host said "ok" with no progress and its rank
    "never started: no launch record was collected"."""
    play = run_until_ranks(lab2, tmp_path)
    cut = lab2.hosts[1]
    try:
        tether = tether_of(play, cut.mgmt_addr)
        assert tether is not None, "no tether for the second host"
        with held([tether]):
            gone = wait_until(lambda: not run_dir(play.run_id, cut).is_dir(), GONE_BOUND_S)
        output = finish(play)
    finally:
        play.close()
    assert gone is not None, "the warden never ended the run of the held-up host"
    words = f"{cut.inventory_name}: lost: the run's warden on {cut.inventory_name} ended the run"
    assert words in output, output[-6000:]
    assert "no heartbeat from the control machine" in output
    wait_task = output.split("TASK [launch : Start torchrun unless it runs", 1)[1].split(
        "TASK [", 1
    )[0]
    assert f"ok: [{cut.inventory_name}]" not in wait_task, wait_task
    report = tmp_path / "reports" / play.run_id
    suites = rank_suites(report / "junit.xml")
    assert {f"nccl.{label(h)}.rank{i}" for i, h in enumerate(lab2.hosts)} <= set(suites)
    errors = suites[f"nccl.{label(cut)}.rank1"].findall(".//error")
    assert errors, "the lost host's rank must be an error"
    message = errors[0].get("message") or ""
    assert f"the run's warden on {cut.inventory_name} ended the run" in message, message
    assert "never started" not in message, message
    validate(report)
    assert remains(play.run_id, lab2) == []
