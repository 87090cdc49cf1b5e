# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The Ansible path's warm start: the pre-flight's listener process holds its torch probe
(node/warm_torchrun.py) and becomes the run's supervisor, so a node imports torch once.

The facts call's start (node/preflight_calls.py, ``warm``) has the listener process run the torch
probe warm. Once its result (listener.json, ``holds``: true) is written, the listener process
``hold``s: it waits for GO_FILE in its directory, written by nccl_torchrun state=started
(``launch_in_holder``), and then is what ``supervisor.start_supervisor`` would have started: the
detached supervisor of this run (``supervisor.supervise``), its torchrun the held probe
(``Supervision.adopt``), its streams to torchrun.log; it answers in STARTED_FILE as the cold
supervisor answers on its ready pipe. It lets the probe go and exits when its directory is
removed (no launch followed: the pre-flight failed, --tags preflight, the cleanup) or at its
deadline (the listener's own, preflight_listen_timeout). Where no holder waits, or it uses
another Python than the launch, the start is cold, as before. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .processes import is_alive, read_json, start_time, write_json
from .supervisor import READY_TIMEOUT_S, TORCHRUN_LOG, supervise
from .warm_torchrun import release

WARM_FILE = "warm.json"  # the holder: {pid, start_time, python}, written as it starts to hold
GO_FILE = "launch.go"
STARTED_FILE = "launch.started"
HOLD_POLL_S = 0.02


def same_python(one: str, other: str) -> bool:
    """The two names (absolute paths or names on PATH) are the same interpreter path. Links are
    not followed: two venvs' pythons link to one interpreter and still differ."""
    found = [shutil.which(name) or name for name in (one, other)]
    return os.path.abspath(found[0]) == os.path.abspath(found[1])


def hold(path: str, probe: subprocess.Popen, python: str, deadline: float) -> int:
    """In the listener process, after its result: wait for GO_FILE, then supervise the run with
    the held probe (of ``python``) as torchrun; -> the process's exit status."""
    pid = os.getpid()
    write_json(
        os.path.join(path, WARM_FILE), {"pid": pid, "start_time": start_time(pid), "python": python}
    )
    go_path = os.path.join(path, GO_FILE)
    while not os.path.exists(go_path):
        if not os.path.isdir(path) or time.monotonic() >= deadline or probe.poll() is not None:
            release(probe, wait=0)  # at once: the run is over (nothing stays after it)
            return 0
        time.sleep(HOLD_POLL_S)
    spec = read_json(go_path) or {}
    run_dir = Path(spec["run_dir"])
    fd = os.open(run_dir / TORCHRUN_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    started = os.path.join(path, STARTED_FILE)
    return supervise(
        spec["argv"],
        spec["env"],
        run_dir,
        int(spec["timeout"]),
        int(spec["kill_grace"]),
        int(spec["rank_offset"]),
        lambda doc: write_json(started, doc),
        agent=probe,
    )


def holder(warm_dir: str, python: str) -> dict[str, Any] | None:
    """WARM_FILE's record when its process is alive and holds a probe of ``python``."""
    record = read_json(os.path.join(warm_dir, WARM_FILE)) or {}
    if not record.get("pid") or not same_python(str(record.get("python") or ""), python):
        return None
    return record if is_alive(int(record["pid"]), record.get("start_time")) else None


def launch_in_holder(
    warm_dir: str,
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    timeout: int,
    kill_grace: int,
    rank_offset: int,
) -> dict[str, Any] | None:
    """nccl_torchrun state=started through the holder of ``warm_dir``: -> what the supervisor
    answered ({supervisor_pid, torchrun_pid} or {error}); None when no holder waits (start
    cold then)."""
    record = holder(warm_dir, argv[0])
    if record is None:
        return None
    spec = {
        "argv": argv,
        "env": env,
        "run_dir": str(run_dir),
        "timeout": timeout,
        "kill_grace": kill_grace,
        "rank_offset": rank_offset,
    }
    write_json(os.path.join(warm_dir, GO_FILE), spec)
    started = os.path.join(warm_dir, STARTED_FILE)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = read_json(started)
        if answer is not None:
            return answer
        if not is_alive(int(record["pid"]), record.get("start_time")):
            return None  # it let go (its deadline) before it read the go: start cold
        time.sleep(HOLD_POLL_S)
    return {"error": f"the warm supervisor reported nothing in {READY_TIMEOUT_S:.0f} s"}
