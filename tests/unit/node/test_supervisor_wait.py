# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/supervisor.py wait_supervisor: the node-side wait of state=finished.

It must return when the supervisor exits, not at its next look: it blocks on the supervisor's
pidfd (and on the pipe its result goes to), and looks every ``every`` seconds only where the kernel
has no pidfd. Real processes stand in for the supervisor, recorded in torchrun.pids as the
supervisor records itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nccl_preflight.node import supervisor as nccl_supervisor
from nccl_preflight.node.processes import proc_stat, write_json
from nccl_preflight.node.supervisor import (
    PIDS_FILE,
    STILL_RUNNING,
    wait_supervisor,
)

# Far longer than any wait below: a wait that slept between looks would run into it.
SLOW_LOOK_S = 60.0


def record_supervisor(run_dir: Path, proc: subprocess.Popen[bytes], timeout_s: int = 300) -> None:
    stat = proc_stat(proc.pid)
    assert stat is not None
    write_json(
        run_dir / PIDS_FILE,
        {
            "supervisor_pid": proc.pid,
            "supervisor_starttime": stat["starttime"],
            "started_epoch": time.time(),
            "timeout_s": timeout_s,
            "kill_grace_s": 1,
            "processes": {},
        },
    )


@pytest.fixture
def supervisor(tmp_path: Path):  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    record_supervisor(tmp_path, proc)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def end_later(proc: subprocess.Popen[bytes], after_s: float) -> threading.Timer:
    timer = threading.Timer(after_s, proc.kill)
    timer.start()
    return timer


def test_the_wait_returns_when_the_supervisor_exits_not_at_its_next_look(
    tmp_path: Path, supervisor: subprocess.Popen[bytes]
) -> None:
    end_later(supervisor, 0.5)
    began = time.monotonic()
    assert wait_supervisor(tmp_path, 30, every=SLOW_LOOK_S) is None
    took = time.monotonic() - began
    assert supervisor.poll() is not None or supervisor.wait(timeout=5) is not None
    assert 0.4 <= took < SLOW_LOOK_S / 4, took


def test_a_look_still_returns_still_running_at_its_end(
    tmp_path: Path, supervisor: subprocess.Popen[bytes]
) -> None:
    began = time.monotonic()
    assert wait_supervisor(tmp_path, 30, every=SLOW_LOOK_S, until=time.time() + 1.0) == (
        STILL_RUNNING
    )
    assert 0.9 <= time.monotonic() - began < SLOW_LOOK_S / 4
    assert supervisor.poll() is None


def test_without_pidfd_the_wait_looks_every_interval(
    tmp_path: Path, supervisor: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(nccl_supervisor.os, "pidfd_open", no_pidfd)
    assert nccl_supervisor.exit_watch(supervisor.pid, 1) is None
    end_later(supervisor, 0.3)
    assert wait_supervisor(tmp_path, 30, every=0.05) is None


def test_the_pidfd_is_closed_after_the_wait(
    tmp_path: Path, supervisor: subprocess.Popen[bytes]
) -> None:
    before = set(os.listdir("/proc/self/fd"))
    assert wait_supervisor(tmp_path, 30, until=time.time() + 0.2) == STILL_RUNNING
    assert set(os.listdir("/proc/self/fd")) <= before


def test_a_wait_past_the_run_bound_says_so(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        record_supervisor(tmp_path, proc, timeout_s=0)
        why = wait_supervisor(tmp_path, 1, every=SLOW_LOOK_S)
        assert why is not None and "outlived timeout + kill_grace + 1 s" in why
    finally:
        proc.kill()
        proc.wait(timeout=10)
