# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A module call of the project ended on its node by a signal, and what the node keeps of it.

The node side of a way out the control machine does not choose: the node shuts down or
systemd-logind ends the SSH session (SIGTERM, SIGKILL after a grace), a terminal's hangup where
Ansible runs modules on a tty (SIGHUP), the OOM killer (SIGKILL). ansible-core's AnsiballZ
wrapper removes its payload directory (``$TMPDIR/ansible_<module>_payload_*``) only when the
module returns; library/'s modules remove it themselves first thing (node/payload.py).

:func:`end_module_call`: ``nccl_torchrun`` over the lab's SSH (pipelining, as validate.yml runs
it) on one host, waiting on a run whose stand-in supervisor is a local process (the lab hosts
share this machine's process table) - ``state=stopped`` with a supervisor that ignores SIGTERM
(the call then waits out ``kill_grace``: Python's default handlers there), ``state=finished``
with ``watch_s`` (the wait's own handlers end the run on SIGTERM/SIGHUP; only SIGKILL is a way
out there) - then the signal to the module's process on the node. The node's sessions get a
TMPDIR of the test's own (a play's ``environment``), so what is left there is this call's alone.
Used by tests/integration/test_interrupt_lab.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.lab.harness import Lab
from tests.lab.interrupt import ROOT, wait_until
from tests.lab.runs import payload_dirs

# A loaded 2-core machine: a module start over SSH took up to a minute under other labs.
CALL_WAIT_S = 240.0
# What the stand-in supervisor runs: it says when it got SIGTERM (the stop's first step) and
# goes on; only SIGKILL ends it.
STAND_IN = (
    "import pathlib, signal, sys, time\n"
    "mark = pathlib.Path(sys.argv[1])\n"
    "signal.signal(signal.SIGTERM, lambda *_: mark.write_text('term'))\n"
    "time.sleep(900)\n"
)


def start_time(pid: int) -> int:
    """The process's start time as node/processes.py records it (field 22 of its stat)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def module_processes(node_tmp: Path) -> list[int]:
    """The Python processes that run with ``node_tmp`` as TMPDIR: the module on the node."""
    marker = f"TMPDIR={node_tmp}".encode()
    found = []
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if not entry.isdigit() or "python" not in os.path.basename(
                os.readlink(f"/proc/{entry}/exe")
            ):
                continue
            if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.append(int(entry))
    return found


def write_play(tmp_path: Path, host: str, node_tmp: Path, args: dict[str, Any]) -> Path:
    play = [
        {
            "hosts": host,
            "gather_facts": False,
            "environment": {"TMPDIR": str(node_tmp)},
            "tasks": [{"name": "The module call the node ends", "nccl_torchrun": args}],
        }
    ]
    path = tmp_path / "module_call.yml"
    path.write_text(json.dumps(play, indent=1))  # JSON is YAML
    return path


def end_module_call(lab: Lab, tmp_path: Path, state: str, way: signal.Signals) -> dict[str, Any]:
    """Run the call (``state``), send ``way`` to its module's process on lab host 0 once it
    waits, and return ``payload_during`` (the payload directories while it ran), ``left`` (what
    remains in the node's TMPDIR once the call ended) and ``output``."""
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir(mode=0o700)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    mark = tmp_path / "supervisor-got-term"
    stand_in = subprocess.Popen([sys.executable, "-c", STAND_IN, str(mark)])
    log = tmp_path / "play.log"
    play: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: Path(f"/proc/{stand_in.pid}/stat").exists(), 10)
        pids = {
            "supervisor_pid": stand_in.pid,
            "supervisor_starttime": start_time(stand_in.pid),
            "timeout_s": 900,
            "kill_grace_s": 60,
            "started_epoch": time.time(),
            "pids": [],
        }
        (run / "torchrun.pids").write_text(json.dumps(pids))
        args: dict[str, Any] = {"state": state, "run_dir": str(run), "timeout": 900}
        if state == "stopped":
            args["kill_grace"] = 60
        else:
            args["watch_s"] = 600
        playbook = write_play(tmp_path, lab.hosts[0].inventory_name, node_tmp, args)
        exe = Path(sys.executable).parent / "ansible-playbook"
        with open(log, "w") as out:
            play = subprocess.Popen(
                [str(exe), "-i", str(lab.inventory_dir), str(playbook)],
                cwd=ROOT,
                env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        waiting = mark.exists if state == "stopped" else (run / "watch.json").exists
        if wait_until(lambda: waiting() or play.poll() is not None, CALL_WAIT_S) is None:
            raise AssertionError(f"the call never waited:\n{log.read_text()[-3000:]}")
        modules = module_processes(node_tmp)
        if play.poll() is not None or len(modules) != 1:
            raise AssertionError(f"no module process ({modules}):\n{log.read_text()[-3000:]}")
        during = payload_dirs(node_tmp)
        os.kill(modules[0], way)
        ended = wait_until(lambda: not module_processes(node_tmp), CALL_WAIT_S)
        assert ended is not None, f"the module outlived {way.name} by {CALL_WAIT_S} s"
        play.wait(timeout=CALL_WAIT_S)
        return {"payload_during": during, "left": payload_dirs(node_tmp), "output": log.read_text()}
    finally:
        if play is not None and play.poll() is None:
            play.kill()
            play.wait(timeout=60)
        stand_in.kill()
        stand_in.wait(timeout=60)
