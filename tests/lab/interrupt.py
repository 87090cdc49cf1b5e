# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""ansible-playbook ended mid-run on a lab, in each way a control machine goes away, and what the
lab's nodes keep afterwards, timed.

The ways (:data:`WAYS`): Ctrl-C as SIGINT to ansible-playbook's pid, to its process group (a
terminal's Ctrl-C), twice; SIGTERM; the control side's SSH killed (every ControlPersist master of
the lab: each session to the nodes drops at once); the connection cut silently (every host drops
the control machine's packets to sshd: nothing closes, only the heartbeats stop); and the control
machine gone (SIGKILL to ansible-playbook's process group, everything below it and every process
of the run on the control side: the tethers and their ssh).

What remains (:func:`remains`): a process anywhere on this machine with the run id in its
arguments (every lab host shares the machine; node and control side alike), a path
``/tmp/nccl-preflight-<run id>-*`` (the run directories and BOOT's directories: the lab hosts
share /tmp), the master's run lock file, and on a lab whose hosts have a TMPDIR of their own
(host_env) BOOT's directories and any module's AnsiballZ payload directory there. Used by
tests/integration/test_interrupt_lab.py (which asserts, with a generous bound) and
bench/interrupt.py (which records the times).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nccl_preflight.node.processes import descendants, process_table
from nccl_preflight.node.run_lock import lock_file_name
from tests.lab.harness import Lab
from tests.lab.runs import (
    leftovers,
    paused_before_barrier,
    payload_dirs,
    rank_record,
    run_dir,
)

ROOT = Path(__file__).resolve().parents[2]
WAYS = (
    "sigint",
    "sigint_group",
    "sigint_twice",
    "sigterm",
    "ssh_killed",
    "connection_cut",
    "sigkill_all",
)
# The ways after which ansible-playbook itself goes on (a node is cut off, not the controller).
CONTROLLER_STAYS = ("ssh_killed", "connection_cut")
# How long a phase may take to come, from the play's start (a loaded 2-core machine).
PHASE_WAIT_S = 480.0
# Generous: the requirement is 10 s; a loaded machine may be slower, never this slow.
CLEAN_BOUND_S = 60.0
MASTER_PORT = 29571
QUICK = ["--max-bytes", "16K", "--iters", "2", "--warmup", "1", "--tests", "correctness"]


def run_paths(run_id: str) -> list[str]:
    """The run's directories and BOOT's directories of its calls (the lab shares /tmp)."""
    return sorted(glob.glob(f"/tmp/nccl-preflight-{run_id}-*"))


def host_tmp_dirs(lab: Lab) -> list[Path]:
    """The hosts' own temporary directories (a TMPDIR of host_env), where they have one."""
    return sorted({Path(env["TMPDIR"]) for env in lab.host_env.values() if "TMPDIR" in env})


def in_host_tmp(run_id: str, lab: Lab) -> list[str]:
    """In the hosts' own TMPDIR: BOOT's directories of the run's calls and any module call's
    AnsiballZ payload directory (nothing else uses those directories: all of it is the run's)."""
    found = []
    for tmp in host_tmp_dirs(lab):
        found += sorted(glob.glob(f"{tmp}/nccl-preflight-{run_id}-*")) + payload_dirs(tmp)
    return found


def remains(run_id: str, lab: Lab) -> list[str]:
    """Everything of the run still on this machine: processes, directories (the hosts' own
    TMPDIR's too), the run lock."""
    lock = Path("/tmp") / lock_file_name(lab.hosts[0].fabric_addr, MASTER_PORT)
    paths = run_paths(run_id) + in_host_tmp(run_id, lab)
    return leftovers(run_id) + paths + ([str(lock)] if lock.exists() else [])


def in_our_namespace(pid: int) -> bool:
    """The process runs on the control side (this machine's network namespace, not a host's)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def node_remains(run_id: str, lab: Lab) -> list[str]:
    """What remains on the lab's hosts alone (a control side that goes on keeps its own)."""
    found = []
    for entry in remains(run_id, lab):
        pid = entry.split(":", 1)[0]
        if not (pid.isdigit() and in_our_namespace(int(pid))):
            found.append(entry)
    return found


def wait_until(condition: Callable[[], bool], bound: float) -> float | None:
    """Seconds until ``condition()`` held (looked at every 0.1 s), None after ``bound``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > bound:
            return None
        time.sleep(0.1)
    return time.monotonic() - began


class Play:
    """ansible-playbook playbooks/validate.yml on a lab, in its own process group, its output in
    a file."""

    def __init__(
        self, lab: Lab, run_id: str, reports: Path, variables: dict[str, Any], *args: str
    ) -> None:
        self.lab, self.run_id = lab, run_id
        self.log = reports / f"{run_id}.log"
        reports.mkdir(parents=True, exist_ok=True)
        extra = {"nccl_run_id": run_id, "nccl_report_root": str(reports), **variables}
        exe = Path(sys.executable).parent / "ansible-playbook"
        with open(self.log, "w") as out:
            argv = [str(exe), "-i", str(lab.inventory_dir), "playbooks/validate.yml"]
            self.proc = subprocess.Popen(
                [*argv, "-e", json.dumps(extra), *args],
                cwd=ROOT,
                env={**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a terminal's Ctrl-C reaches all of it
            )
        self.undo: list[Callable[[], None]] = []

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def control_side(self) -> list[int]:
        """ansible-playbook, everything below it, and every control-side process of the run."""
        table = process_table()
        pids = {self.proc.pid, *descendants(self.proc.pid, table)}
        for pid in table:
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                if self.run_id.encode() in argv and in_our_namespace(pid):
                    pids.add(pid)
        return sorted(pids - {os.getpid()})

    def ssh_masters(self) -> list[int]:
        """The lab's ControlPersist masters (``ssh: <control path> [mux]``)."""
        prefix = f"ssh: {self.lab.state_dir / 'ssh' / 'cp'}/".encode()
        found = []
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError):
                if entry.isdigit() and Path(f"/proc/{entry}/cmdline").read_bytes().startswith(
                    prefix
                ):
                    found.append(int(entry))
        return found

    def end(self, way: str) -> None:
        """End the control machine's part in ``way`` (one of WAYS)."""
        pid = self.proc.pid
        if way == "sigint":
            os.kill(pid, signal.SIGINT)
        elif way == "sigint_group":
            os.killpg(pid, signal.SIGINT)
        elif way == "sigint_twice":
            os.killpg(pid, signal.SIGINT)
            time.sleep(0.3)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGINT)
        elif way == "sigterm":
            os.kill(pid, signal.SIGTERM)
        elif way == "ssh_killed":
            for master in self.ssh_masters():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(master, signal.SIGKILL)
        elif way == "connection_cut":
            for host in self.lab.hosts:
                self.undo.append(self.lab.firewall_drop(host, 22, source=self.lab.control_addr))
        elif way == "sigkill_all":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            for other in self.control_side():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(other, signal.SIGKILL)
        else:
            raise ValueError(f"unknown way {way!r}; one of {', '.join(WAYS)}")

    def wait(self, bound: float) -> float | None:
        """Seconds until ansible-playbook ended, None after ``bound``."""
        return wait_until(lambda: self.proc.poll() is not None, bound)

    def close(self) -> None:
        """Undo any cut, then end whatever of the control side is left."""
        for undo in self.undo:
            undo()
        self.undo.clear()
        if self.proc.poll() is None:
            for pid in self.control_side():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=60)


def preflight_running(run_id: str, lab: Lab) -> Callable[[], bool]:
    """Every host's pre-flight listener (and its warm torch probe) has started."""
    return lambda: all(
        (run_dir(run_id, h) / "preflight" / "listener.pid").is_file() for h in lab.hosts
    )


def ranks_running(run_id: str, lab: Lab) -> Callable[[], bool]:
    """The ranks run: rank 0 waits before barrier (paused_before_barrier)."""
    record = rank_record(run_id, lab.hosts[0], 0)

    def at_barrier() -> bool:
        try:
            return json.loads(record.read_text()).get("current_test") == "barrier"
        except (OSError, ValueError):
            return False

    return at_barrier


def phase_variables(phase: str) -> dict[str, Any]:
    """The run's variables: a quick check, or one whose rank 0 stops before barrier (launch)."""
    args = paused_before_barrier() if phase == "launch" else QUICK
    return {
        "nccl_slots": 1,
        "nccl_master_port": MASTER_PORT,
        "nccl_run_timeout": 300,
        "launch_check_timeout": 280,
        "nccl_check_args": args,
    }


def end_mid_run(
    lab: Lab, run_id: str, reports: Path, way: str, phase: str, *args: str
) -> dict[str, Any]:
    """Run validate.yml (``args`` after its own), end it in ``way`` once ``phase``
    ("preflight" or "launch") runs, and
    time it: ``control_end_s`` (from the event to ansible-playbook's end), ``node_clean_s``
    (from the event to nothing of the run on a host), ``clean_s`` (from ansible-playbook's end
    to nothing of the run anywhere; None: not within CLEAN_BOUND_S), ``remains`` (what was
    left then), ``output`` (the end of ansible-playbook's output)."""
    play = Play(lab, run_id, reports, phase_variables(phase), *args)
    running = preflight_running(run_id, lab) if phase == "preflight" else ranks_running(run_id, lab)
    try:
        started = wait_until(lambda: running() or play.proc.poll() is not None, PHASE_WAIT_S)
        if started is None or play.proc.poll() is not None:
            raise AssertionError(f"the {phase} never ran:\n{play.output()[-4000:]}")
        play.end(way)
        marks = watch_the_end(play, lab, way)
    finally:
        play.close()
    event = marks["event"]
    times: dict[str, Any] = {"way": way, "phase": phase, "phase_at_s": round(started, 1)}
    for name in ("control_end", "node_clean"):
        times[f"{name}_s"] = round(marks[name] - event, 2) if name in marks else None
    clean = marks.get("clean")
    times["clean_s"] = round(clean - marks["control_end"], 2) if clean is not None else None
    times["remains"] = remains(run_id, lab)
    times["output"] = play.output()[-3000:]
    return times


def watch_the_end(play: Play, lab: Lab, way: str) -> dict[str, float]:
    """After the event: when ansible-playbook ended, when the hosts and when everything was
    clean (monotonic marks). A cut is undone once the hosts are clean (or after CLEAN_BOUND_S),
    so that ansible-playbook can go on to its end."""
    marks = {"event": time.monotonic()}
    while True:
        now = time.monotonic()
        if "control_end" not in marks and play.proc.poll() is not None:
            marks["control_end"] = now
        if "node_clean" not in marks and not node_remains(play.run_id, lab):
            marks["node_clean"] = now
        if play.undo and ("node_clean" in marks or now - marks["event"] > CLEAN_BOUND_S):
            for undo in play.undo:
                undo()
            play.undo.clear()
        if "control_end" in marks:
            if not remains(play.run_id, lab):
                marks["clean"] = now
                marks.setdefault("node_clean", now)  # clean between the two looks
                return marks
            if now - marks["control_end"] > CLEAN_BOUND_S:
                return marks
        elif now - marks["event"] > PHASE_WAIT_S:
            return marks  # ansible-playbook never ended: close() kills it
        time.sleep(0.2)
