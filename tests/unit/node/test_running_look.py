# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/supervisor.py running_look: what a watching look returns while the run
goes on, here its ``workers_exited``: torchrun alive with no worker left below it (torch
elastic's exit barrier). A real process stands in for torchrun, recorded in torchrun.pids as the
supervisor records it; its worker is a real child that exits when told to."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from nccl_preflight.node.processes import proc_stat, write_json
from nccl_preflight.node.supervisor import PIDS_FILE, running_look

# Starts a worker that exits once the file argv[1] exists, waits for it (a zombie meanwhile
# would not count: torchrun reaps at its next monitor look), then stays, as torchrun in its
# exit barrier does.
TORCHRUN = (
    "import os, subprocess, sys, time\n"
    "worker = subprocess.Popen([sys.executable, '-c', 'import os, sys, time\\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)', sys.argv[1]])\n"
    "worker.wait()\n"
    "time.sleep(120)\n"
)


def record_torchrun(run_dir: Path, proc: subprocess.Popen[bytes]) -> None:
    stat = proc_stat(proc.pid)
    assert stat is not None
    write_json(
        run_dir / PIDS_FILE,
        {"torchrun_pid": proc.pid, "processes": {str(proc.pid): stat["starttime"]}},
    )


def has_child(pid: int) -> bool:
    return bool(Path(f"/proc/{pid}/task/{pid}/children").read_text().split())


def test_a_look_says_when_torchrun_waits_with_every_worker_gone(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "rank-3.json").write_text(json.dumps({"status": "passed", "test_count": 3}))
    release = tmp_path / "release"
    torchrun = subprocess.Popen([sys.executable, "-c", TORCHRUN, str(release)])
    try:
        record_torchrun(tmp_path, torchrun)
        deadline = time.monotonic() + 20
        while not has_child(torchrun.pid):
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        look = running_look(tmp_path, "lo")
        assert look["running"] is True and look["workers_exited"] is False
        assert look["progress"][0]["rank"] == 3 and look["interface"]["ifname"] == "lo"
        release.touch()
        while has_child(torchrun.pid):
            assert time.monotonic() < deadline, "the worker never exited"
            time.sleep(0.05)
        look = running_look(tmp_path, None)
        assert look["workers_exited"] is True and "interface" not in look
    finally:
        torchrun.kill()
        torchrun.wait(timeout=10)
    # torchrun gone: nothing waits.
    assert running_look(tmp_path, None)["workers_exited"] is False
    # A run whose torchrun was never recorded: no.
    (tmp_path / PIDS_FILE).unlink()
    assert running_look(tmp_path, None)["workers_exited"] is False
