# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/run_warden.py: a run's warden ends the run on its node once the
control machine is gone, and nothing may start after that.

The lease is a pure object (heartbeats, the end of stdin, a release line, silence). The warden
itself runs here for real, as its program (stdin a pipe standing in for the tether's session),
watching a run directory whose processes are real processes recorded as the listener and the
supervisor record themselves; BOOT's end of a program whose reader went away and the tether
(src/nccl_preflight/core/tether.py, a local shell standing in for ssh) are in
tests/unit/core/test_tether.py. Every wait is for a condition, with a generous bound.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.node import run_warden
from nccl_preflight.node.processes import is_alive, start_time, write_json
from nccl_preflight.node.run_lease import RELEASE, Lease
from nccl_preflight.node.run_warden import (
    WardenGone,
    end_run,
    recorded_processes,
    warden_address,
    warden_pass,
)
from tests.builders.torchrun import start_hanging_run, tagged_processes
from tests.polling import wait_or_fail

# What the warden program's process runs: its main() on this machine's Python.
WARDEN = "import sys; from nccl_preflight.node.run_warden import main; sys.exit(main([]))"
# Far longer than any test here: a process still alive at the end was not ended by the warden.
SLEEP = "import time; time.sleep(300)"
BOUND_S = 60.0


# ------------------------------------------------------------------------------------------------
# The lease, pure
# ------------------------------------------------------------------------------------------------


def test_heartbeats_renew_the_lease_and_their_longest_gap_is_kept() -> None:
    lease = Lease(6.0, now=100.0)
    assert lease.feed(b"\n", 101.0) is None and lease.feed(b"\n\n", 104.5) is None
    assert lease.left(105.0) == pytest.approx(5.5)
    assert lease.longest_gap == pytest.approx(3.5)
    assert lease.why_gone(None, 110.0) is None


def test_silence_past_the_lease_is_a_controller_gone_and_says_how_long() -> None:
    lease = Lease(6.0, now=100.0)
    lease.feed(b"\n", 101.0)
    assert lease.why_gone(None, 106.9) is None
    why = lease.why_gone(None, 107.2)
    assert why is not None and "no heartbeat from the control machine for 6.2 s" in why


def test_the_end_of_stdin_is_a_controller_gone_at_once() -> None:
    lease = Lease(6.0, now=100.0)
    ended = lease.feed(b"", 100.5)
    assert ended == "eof"
    assert "session closed" in (lease.why_gone(ended, 100.5) or "")


def test_a_release_is_recognised_even_split_between_two_reads() -> None:
    lease = Lease(6.0, now=0.0)
    assert lease.feed(b"\n\nrel", 1.0) is None
    assert lease.feed(b"ease\n", 1.1) == "release"
    assert lease.why_gone("release", 1.1) == ""  # "" = released, not gone
    assert RELEASE == b"release"


def test_the_address_is_abstract_and_one_per_run_directory() -> None:
    one, other = (
        warden_address("/tmp/nccl-preflight-r1-a"),
        warden_address("/tmp/nccl-preflight-r1-b"),
    )
    assert one.startswith("\0nccl-preflight-warden-") and one != other
    assert warden_address("/tmp/nccl-preflight-r1-a/") == one


# ------------------------------------------------------------------------------------------------
# The warden, as its program
# ------------------------------------------------------------------------------------------------


class RunningWarden:
    """The warden program over ``run_dir``, its stdin a pipe (the tether's end)."""

    def __init__(self, run_dir: Path, lease_s: float | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WARDEN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=False,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"run_dir": str(run_dir), **({"lease_s": lease_s} if lease_s else {})}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        self.ready = json.loads(self.proc.stdout.readline())

    def beat(self, line: bytes = b"") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def last_word(self) -> dict:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.proc.wait(timeout=BOUND_S)
        return json.loads(out.splitlines()[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def warden_run(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen]]]:
    """A run directory with a listener-like process (and a child of it, in its own session as
    the torch probe is) recorded in preflight/listener.pid; the processes are ended afterwards
    whatever happened."""
    run_dir = tmp_path / "nccl-preflight-r1-node1"
    (run_dir / "preflight").mkdir(parents=True, mode=0o700)
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys, time\n"
         f"subprocess.Popen([sys.executable, '-c', {SLEEP!r}], start_new_session=True)\n"
         f"print('up', flush=True)\n{SLEEP}"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert parent.stdout is not None and parent.stdout.readline() == b"up\n"
    write_json(
        run_dir / "preflight" / "listener.pid",
        {"pid": parent.pid, "start_time": start_time(parent.pid)},
    )
    children = [p for p in recorded_processes(str(run_dir)) if p != parent.pid]
    assert len(children) == 1, "the probe-like child hangs below the recorded process"
    yield run_dir, [parent]
    for pid in children:
        if is_alive(pid, start_time(pid)):
            os.kill(pid, signal.SIGKILL)
    parent.kill()
    parent.wait()


def ours_alive(run_dir: Path, procs: list[subprocess.Popen]) -> bool:
    return any(p.poll() is None for p in procs) or bool(recorded_processes(str(run_dir)))


def test_the_end_of_stdin_ends_every_recorded_process_and_removes_the_run_directory(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    run_dir, procs = warden_run
    everything = recorded_processes(str(run_dir))
    warden = RunningWarden(run_dir)
    try:
        assert warden.ready["ready"] is True and warden.ready["pid"] == warden.proc.pid
        warden.beat()
        began = time.monotonic()
        warden.close()
        wait_or_fail(lambda: not run_dir.exists() and procs[0].poll() is not None, timeout=BOUND_S)
        wait_or_fail(lambda: not any(is_alive(p, s) for p, s in everything.items()), BOUND_S)
        print(f"ended {time.monotonic() - began:.2f} s after the end of stdin")
        word = warden.last_word()
        assert word["run_dir_removed"] is True and "session closed" in word["why"]
        assert set(word["ended"]) == set(everything)
    finally:
        warden.kill()


def test_heartbeats_keep_the_run_and_silence_past_the_lease_ends_it(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    run_dir, procs = warden_run
    # A lease a loaded 2-core machine cannot miss between two beats (1.5 s did, at load 12).
    warden = RunningWarden(run_dir, lease_s=5.0)
    try:
        until = time.monotonic() + 11.0
        while time.monotonic() < until:  # more than twice the lease, beating every 0.2 s
            warden.beat()
            silent = time.monotonic()  # the last beat sent: the lease runs from its reading
            time.sleep(0.2)
        assert run_dir.is_dir() and procs[0].poll() is None and warden.proc.poll() is None
        # The connection is cut: no more lines, no end either.
        wait_or_fail(lambda: not run_dir.exists() and procs[0].poll() is not None, timeout=BOUND_S)
        assert time.monotonic() - silent >= 4.95, "ended before the lease ran out"
        assert "no heartbeat" in warden.last_word()["why"]
    finally:
        warden.kill()


def test_a_release_ends_the_processes_but_keeps_the_run_directory(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    run_dir, procs = warden_run
    everything = recorded_processes(str(run_dir))
    warden = RunningWarden(run_dir)
    try:
        warden.beat(RELEASE)
        word = warden.last_word()
        assert word["why"] == "released" and word["run_dir_removed"] is False
        assert (run_dir / "preflight" / "listener.pid").is_file()
        wait_or_fail(lambda: not any(is_alive(p, s) for p, s in everything.items()), BOUND_S)
        assert procs[0].poll() is not None
    finally:
        warden.kill()


def test_sighup_from_boot_ends_the_run_as_the_end_of_stdin_does(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    run_dir, procs = warden_run
    warden = RunningWarden(run_dir)
    try:
        warden.proc.send_signal(signal.SIGHUP)
        wait_or_fail(lambda: not run_dir.exists() and procs[0].poll() is not None, timeout=BOUND_S)
        assert "SIGHUP" in warden.last_word()["why"]
    finally:
        warden.kill()


def test_a_start_under_way_holds_the_end_back_and_a_later_start_is_refused(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    run_dir, procs = warden_run
    warden = RunningWarden(run_dir)
    try:
        with warden_pass(str(run_dir), required=True):
            warden.close()  # the controller goes while the start is under way
            time.sleep(1.0)
            assert run_dir.is_dir() and procs[0].poll() is None, "the start is not done yet"
            (run_dir / "started-late").write_text("what the start made before it was done\n")
        wait_or_fail(lambda: not run_dir.exists() and procs[0].poll() is not None, timeout=BOUND_S)
        gone = pytest.raises(WardenGone, match="the run's warden on this node is gone")
        with gone, warden_pass(str(run_dir), required=True, wait=5):
            pytest.fail("nothing may start once the warden ended the run")
    finally:
        warden.kill()


def test_a_start_the_warden_never_answers_gives_up_after_its_wait(tmp_path: Path) -> None:
    run_dir = tmp_path / "nccl-preflight-r2-node1"
    with pytest.raises(WardenGone), warden_pass(str(run_dir), required=True, wait=2):
        pytest.fail("no warden listens for this run directory")
    with warden_pass(str(run_dir), required=False):
        pass  # no warden was started for this run (another connection type): nothing to hold


def test_a_start_holding_its_pass_past_the_wait_does_not_keep_the_run_alive(
    warden_run: tuple[Path, list[subprocess.Popen]],
) -> None:
    """A start that never hands its pass back (hung) delays the end by STARTER_WAIT_S only."""
    run_dir, procs = warden_run
    warden = RunningWarden(run_dir)
    held = threading.Event()
    done = threading.Event()

    def hung_start() -> None:
        with warden_pass(str(run_dir), required=True):
            held.set()
            done.wait(BOUND_S)

    thread = threading.Thread(target=hung_start)
    thread.start()
    try:
        assert held.wait(BOUND_S)
        began = time.monotonic()
        warden.close()
        wait_or_fail(lambda: not run_dir.exists() and procs[0].poll() is not None, timeout=BOUND_S)
        waited = time.monotonic() - began
        assert waited >= run_warden.STARTER_WAIT_S - 0.5, waited
    finally:
        done.set()
        thread.join()
        warden.kill()


# ------------------------------------------------------------------------------------------------
# A real supervised run (the launch's fake torchrun tree) under a gone controller
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def launch_dir(tmp_path: Path) -> Path:
    """A run directory as the launch's start finds it (tests/builders/torchrun.py)."""
    path = tmp_path / "nccl-preflight-run-node1"
    path.mkdir(mode=0o700)
    (path / "nccl.env").write_text("GLOO_SOCKET_IFNAME='lo'\n")
    (path / "check.py").write_text("print('hello')\n")
    return path


def test_end_run_ends_a_supervised_tree_within_its_short_grace_and_leaves_nothing(
    tmp_path: Path,
    fake_python: Path,
    launch_dir: Path,
) -> None:
    run_dir = launch_dir
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=300)
    began = time.monotonic()
    done = end_run(str(run_dir))
    assert done["run_dir_removed"] is True and len(done["ended"]) >= 5
    wait_or_fail(lambda: tagged_processes(run_dir) == [], timeout=BOUND_S)
    print(f"a supervised tree ended in {time.monotonic() - began:.2f} s")
    time.sleep(1.5)  # the supervisor's own end must not write its logs back
    assert not run_dir.exists()


def test_the_supervisor_ends_its_tree_when_its_run_directory_is_removed(
    tmp_path: Path,
    fake_python: Path,
    launch_dir: Path,
) -> None:
    """A start that came after the warden's end finds no directory to work in; a supervisor that
    started just before it ends its own tree (kill_grace would be 2 s here; it uses
    GONE_GRACE_S) and writes nothing back."""
    run_dir = launch_dir
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=300)
    shutil.rmtree(run_dir)
    wait_or_fail(lambda: tagged_processes(run_dir) == [], timeout=BOUND_S)
    time.sleep(1.5)
    assert not run_dir.exists()
