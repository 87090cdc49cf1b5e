# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The torchrun supervisor of library/nccl_torchrun.py: start it detached, wait for it, end it.

The supervisor is a detached process (``processes.detach``) and a child subreaper. It starts
``python -m torch.distributed.run`` in its own session, records every process of its tree (pid and
start time) in ``<run_dir>/torchrun.pids``, and ends every recorded process still alive after the
timeout (``processes.end_processes``: SIGTERM, then SIGKILL after the grace), at once on SIGTERM,
SIGINT or SIGHUP, or when the control machine stopped watching (``watch.json`` went stale). Then
it joins the per-rank logs into ``results/rank-<R>.log``, writes ``launch.json`` and exits. A run
whose directory was removed under it (the run's warden, node/run_warden.py, ended it: its
controller is gone) is ended within ``GONE_GRACE_S`` and leaves nothing: no logs, no launch.json.

``wait_supervisor`` (state=finished) waits on the node for it; ``stop_run`` (state=stopped, and
state=finished once the wait ended) ends whatever a run left alive and makes sure ``launch.json``
exists. Standard library only: shipped to the nodes inside library/nccl_torchrun.py.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .processes import (
    become_subreaper,
    descendants,
    detach,
    end_processes,
    is_alive,
    proc_stat,
    process_table,
    read_json,
    reap_children,
    report,
    signal_quietly,
    write_json,
)
from .run_progress import (
    WATCHER_GONE,
    interface_state,
    rank_exits,
    read_progress,
    watcher_gone,
)
from .warm_torchrun import go, release

PIDS_FILE = "torchrun.pids"
LAUNCH_FILE = "launch.json"
TORCHRUN_LOG = "torchrun.log"
RESULTS_DIR = "results"
# An argument of the rank script that stands for the run directory's RESULTS_DIR: the control
# machine sends it (core/stage.py RESULTS_DIR), the node puts its own path in its place
# (slurm/node_step.py launch).
RESULTS_PLACEHOLDER = "{results}"
LOGS_DIR = "logs"
# The supervisor looks at its tree this often (a look reads every process's /proc/<pid>/stat,
# twice: about 8 ms of CPU on a node with 150 processes, 3% of a core at 0.25 s). Between looks
# it blocks on torchrun, so its end is still seen at once.
POLL_S = 1.0
# state=finished looks at the supervisor this often where the kernel has no pidfd (Linux < 5.3);
# with one, the wait blocks on the supervisor's pidfd and on the output pipe, and so returns the
# moment the supervisor exits or the control machine goes away (wait_supervisor).
FINISH_POLL_S = 0.2
# state=finished waits at most this long beyond the run's own bound (timeout + kill_grace).
FINISH_MARGIN_S = 30
# A watching look leaves this in the run directory; the supervisor ends the run once it is stale.
WATCH_FILE = "watch.json"
# Seconds state=started waits for the detached supervisor to say torchrun runs.
READY_TIMEOUT_S = 30
# wait_supervisor's answer when a watch call's look ended before the run did.
STILL_RUNNING = "\0still running"
# A run whose directory was removed under it (its controller is gone: node/run_warden.py) is
# ended with this grace, not kill_grace: nobody collects its results, and nothing of it may stay.
GONE_GRACE_S = 2.0
RUN_DIR_GONE = "the run directory was removed while the run went on (its controller is gone)"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stop(Exception):
    """Raised by the signal handler: end the tree now."""


def _raise_stop(signum: int, _frame: Any) -> None:
    raise Stop(signal.Signals(signum).name)


def _catch_stop_signals() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, _raise_stop)


def _ignore_stop_signals() -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def join_rank_logs(run_dir: Path, rank_offset: int) -> list[str]:
    """logs/<rdzv>_*/attempt_*/<local rank>/{stdout,stderr}.log -> results/rank-<R>.log."""
    results = run_dir / RESULTS_DIR
    results.mkdir(parents=True, exist_ok=True)
    per_rank: dict[int, list[Path]] = {}
    for stream in sorted((run_dir / LOGS_DIR).glob("*/attempt_*/*/std*.log")):
        if stream.parent.name.isdigit():
            per_rank.setdefault(int(stream.parent.name), []).append(stream)
    written = []
    for local_rank, streams in sorted(per_rank.items()):
        parts = []
        # stdout first, stderr last: the tail of the log is where a traceback ends up.
        for stream in sorted(streams, key=lambda p: (p.name != "stdout.log", str(p))):
            text = stream.read_text(encoding="utf-8", errors="replace")
            parts.append(f"===== {stream.parent.parent.name} {stream.name} =====\n{text}")
        target = results / f"rank-{rank_offset + local_rank}.log"
        target.write_text("\n".join(parts), encoding="utf-8")
        written.append(str(target))
    return written


# ------------------------------------------------------------------------------------------------
# The supervisor, in the detached process
# ------------------------------------------------------------------------------------------------


class Supervision:
    """What the supervisor knows of its run: the recorded tree and how the run ended."""

    def __init__(self, argv: list[str], run_dir: Path, timeout: int, kill_grace: int) -> None:
        self.argv = argv
        self.run_dir = run_dir
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.me = os.getpid()
        self.subreaper = become_subreaper()
        self.started_at = _now()
        self.proc: subprocess.Popen[bytes] | None = None
        self.recorded: dict[int, int] = {}
        self.timed_out = False
        self.stopped_by: str | None = None
        self.warm = False  # torchrun in the warm torch probe (adopt)
        own = proc_stat(self.me)
        self.pids_doc: dict[str, Any] = {
            "supervisor_pid": self.me,
            "supervisor_starttime": own["starttime"] if own else None,
            "started_epoch": time.time(),
            "timeout_s": timeout,
            "kill_grace_s": kill_grace,
            "torchrun_pid": None,
            "processes": {},
        }

    def write_pids(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # the run directory was removed: RUN_DIR_GONE
            write_json(self.run_dir / PIDS_FILE, self.pids_doc)

    def write_launch(self, rc: int | None, killed: list[int], error: str | None) -> None:
        write_json(
            self.run_dir / LAUNCH_FILE,
            {
                "rc": rc,
                "timed_out": self.timed_out,
                "killed_pids": killed,
                "timeout_s": self.timeout,
                "stopped_by": self.stopped_by,
                "error": error,
                "subreaper": self.subreaper,
                "started_at": self.started_at,
                "finished_at": _now(),
                "cmd": self.argv,
                "warm_start": self.warm,
            },
        )

    def start(self, env: dict[str, str]) -> None:
        """Start torchrun in its own session, stdio to torchrun.log; record it. OSError: it
        could not start."""
        with open(self.run_dir / TORCHRUN_LOG, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.run_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._record_torchrun()

    def adopt(self, agent: subprocess.Popen, env: dict[str, str]) -> None:
        """torchrun in ``agent``, the warm torch probe (node/warm_torchrun.py), which already
        imported torch in its own session: it is told to become this argv in the run directory,
        its streams to torchrun.log. OSError: it is gone; start() then."""
        log = str(self.run_dir / TORCHRUN_LOG)
        # What the launch sets beyond this process's own environment (nccl.env's variables);
        # the probe keeps its own underneath, as its Python (or a wrapper) set it up.
        overlay = {k: v for k, v in env.items() if os.environ.get(k) != v}
        go(agent, str(self.run_dir), log, overlay, self.argv[3:])  # after -m torch.distributed.run
        self.proc = agent
        self.warm = True
        self._record_torchrun()

    def _record_torchrun(self) -> None:
        assert self.proc is not None
        self.pids_doc["torchrun_pid"] = self.proc.pid
        self.pids_doc["pgid"] = self.proc.pid
        child = proc_stat(self.proc.pid)
        if child is not None:
            self.recorded[self.proc.pid] = child["starttime"]
            self.pids_doc["processes"] = {str(self.proc.pid): child["starttime"]}
        self.write_pids()

    def watch(self, deadline: float) -> None:
        """Record the tree until torchrun exits, the deadline passes or nobody watches."""
        assert self.proc is not None
        while True:
            found = descendants(self.me, process_table())
            if any(self.recorded.get(pid) != st for pid, st in found.items()):
                self.recorded.update(found)
                self.pids_doc["processes"] = {str(p): s for p, s in self.recorded.items()}
                self.write_pids()
            if self.proc.poll() is not None:
                return
            if time.monotonic() >= deadline:
                self.timed_out = True
                return
            self.stopped_by = watcher_gone(self.run_dir / WATCH_FILE)
            if not self.run_dir.is_dir():
                self.stopped_by = RUN_DIR_GONE
            if self.stopped_by:
                return
            reap_children(keep=self.proc.pid)
            try:
                self.proc.wait(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                continue
            return

    def end(self, rank_offset: int) -> None:
        """End what is left of the tree, join the logs, write launch.json; with the run
        directory gone (RUN_DIR_GONE) only end the tree, within GONE_GRACE_S."""
        keep = self.proc.pid if self.proc is not None else None
        self.recorded.update(descendants(self.me, process_table()))
        self.recorded.pop(self.me, None)
        gone = not self.run_dir.is_dir()
        grace = min(self.kill_grace, GONE_GRACE_S) if gone else self.kill_grace
        killed = end_processes(self.recorded, grace, reap=True, keep=keep)
        rc = self.proc.wait() if self.proc is not None else None
        if gone or not self.run_dir.is_dir():
            self.stopped_by = self.stopped_by or RUN_DIR_GONE
            return  # nothing to write into, nobody to collect
        join_rank_logs(self.run_dir, rank_offset)
        self.write_launch(rc, killed, None)
        if self.stopped_by and WATCHER_GONE in self.stopped_by:
            # Nobody will come to collect: leave nothing on the node (docs/design.md).
            shutil.rmtree(self.run_dir, ignore_errors=True)


def start_or_adopt(run: Supervision, env: dict[str, str], agent: subprocess.Popen | None) -> None:
    """torchrun in the held warm probe ``agent`` when there is one, else a fresh process.
    OSError: it could not start."""
    if agent is not None:
        try:
            run.adopt(agent, env)
            return
        except OSError:
            release(agent)  # it went away after it was ready: a cold start then
    run.start(env)


def supervise(
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    timeout: int,
    kill_grace: int,
    rank_offset: int,
    answer: Callable[[dict[str, Any]], None],
    agent: subprocess.Popen | None = None,
) -> int:
    """Run torchrun, bounded by `timeout`; end its tree; join the logs; write launch.json.

    Runs in the detached process. ``answer``s once torchrun runs and its pid is recorded (or why
    it could not start). ``agent``: a held warm torch probe to become torchrun
    (node/warm_launch.py); a cold start when it is gone.
    """
    run = Supervision(argv, run_dir, timeout, kill_grace)
    _catch_stop_signals()
    run.write_pids()
    deadline = time.monotonic() + timeout
    try:
        try:
            start_or_adopt(run, env, agent)
        except OSError as exc:
            why = f"cannot start {argv[0]}: {exc}"
            answer({"error": why})
            run.write_launch(None, [], why)
            return 1
        answer({"supervisor_pid": run.me, "torchrun_pid": run.pids_doc["torchrun_pid"]})
        run.watch(deadline)
    except Stop as exc:
        run.stopped_by = str(exc)
    finally:
        _ignore_stop_signals()
    run.end(rank_offset)
    return 0


def start_supervisor(
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    timeout: int,
    kill_grace: int,
    rank_offset: int,
) -> dict[str, Any]:
    """Start the detached supervisor; -> {supervisor_pid, torchrun_pid} or {error}."""

    def body(ready_fd: int) -> int:
        def answer(doc: dict[str, Any]) -> None:
            report(ready_fd, doc)

        return supervise(argv, env, run_dir, timeout, kill_grace, rank_offset, answer)

    ready = detach(body, run_dir / TORCHRUN_LOG, ready_timeout=READY_TIMEOUT_S)
    if ready is None:
        return {"error": f"the detached supervisor reported nothing in {READY_TIMEOUT_S:.0f} s"}
    return ready


# ------------------------------------------------------------------------------------------------
# state=stopped and state=finished
# ------------------------------------------------------------------------------------------------


def read_pids(run_dir: Path) -> dict[str, Any] | None:
    """torchrun.pids of the run, None when the run never started."""
    return read_json(run_dir / PIDS_FILE)


def _end_supervisor(doc: dict[str, Any], grace: int) -> list[int]:
    """Ask the supervisor to end its tree and write launch.json itself; kill it when it does not
    go within grace + 10 s. -> what had to be killed."""
    sup_pid, sup_start = doc.get("supervisor_pid"), doc.get("supervisor_starttime")
    if not sup_pid or sup_start is None or not is_alive(sup_pid, sup_start):
        return []
    signal_quietly(sup_pid, signal.SIGTERM)
    deadline = time.monotonic() + grace + 10
    while time.monotonic() < deadline and is_alive(sup_pid, sup_start):
        time.sleep(0.1)
    if is_alive(sup_pid, sup_start):
        return end_processes({sup_pid: sup_start}, 0)
    return []


def _end_recorded(doc: dict[str, Any], grace: int) -> list[int]:
    """End every recorded process still alive, and what hangs below it."""
    recorded = {int(p): int(s) for p, s in doc.get("processes", {}).items()}
    # Children started after the last record still hang below a recorded process.
    table = process_table()
    for pid, st in list(recorded.items()):
        if is_alive(pid, st):
            recorded.update(descendants(pid, table))
    return end_processes(recorded, grace)


def _amend_launch(
    launch: dict[str, Any],
    killed: list[int],
    reason: str | None,
    details: dict[str, Any] | None,
    run_dir: Path,
) -> bool:
    """Add what this call did to the supervisor's launch.json; -> whether it changed."""
    changed = False
    if killed:
        launch["killed_pids"] = sorted(set(launch.get("killed_pids") or []) | set(killed))
        changed = True
    if reason and launch.get("stopped_by"):
        launch["stopped_by"] = reason
        if details:
            launch["stop"] = details
        changed = True
    if "rank_exits" not in launch:
        launch["rank_exits"] = rank_exits(run_dir / TORCHRUN_LOG)
        changed = True
    return changed


def _never_started(killed: list[int], timeout: int, reason: str | None) -> dict[str, Any]:
    """launch.json of a run whose supervisor never wrote its record."""
    return {
        "rc": None,
        "timed_out": False,
        "killed_pids": killed,
        "timeout_s": timeout,
        "stopped_by": "state=stopped",
        "error": reason,
        "started_at": None,
        "finished_at": _now(),
    }


def stop_run(
    run_dir: Path,
    grace: int,
    timeout: int,
    rank_offset: int,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """End whatever the run of run_dir left alive; join the logs; make sure launch.json exists."""
    launch_path = run_dir / LAUNCH_FILE
    killed: list[int] = []
    doc = read_pids(run_dir)
    if doc is not None:
        killed += _end_supervisor(doc, grace)
        killed += _end_recorded(doc, grace)
    rank_logs = join_rank_logs(run_dir, rank_offset) if run_dir.is_dir() else []
    launch: dict[str, Any] | None = None
    if launch_path.is_file():
        launch = read_json(launch_path)
        if _amend_launch(launch, killed, reason, details, run_dir):
            write_json(launch_path, launch)
    elif run_dir.is_dir():
        # The supervisor never wrote its record: the run did not start (or it was killed).
        launch = _never_started(killed, timeout, reason)
        write_json(launch_path, launch)
    launch = launch or {}
    return {
        "changed": bool(killed),
        "torchrun_rc": launch.get("rc"),
        "timed_out": bool(launch.get("timed_out")),
        "stopped_by": launch.get("stopped_by"),
        "stop": launch.get("stop"),
        # Ended by the supervisor at the timeout or by this call: the whole run's record.
        "killed_pids": sorted(set(launch.get("killed_pids") or []) | set(killed)),
        "ended_now": killed,
        "rank_exits": launch.get("rank_exits") or [],
        "rank_logs": rank_logs,
        "launch_json": str(launch_path),
    }


def workers_exited(run_dir: Path) -> bool:
    """Whether the run's torchrun is alive with no process left below it: every worker exited
    and torchrun waits (torch elastic's exit barrier, which a node whose worker group failed never
    enters; docs/design.md, "Watching a run"). False when torchrun is gone or was never recorded."""
    doc = read_pids(run_dir) or {}
    pid = doc.get("torchrun_pid")
    if not isinstance(pid, int) or not is_alive(pid, (doc.get("processes") or {}).get(str(pid))):
        return False
    table = process_table()
    return all(table[p]["state"] in ("Z", "X") for p in descendants(pid, table))


def running_look(run_dir: Path, ifname: str | None) -> dict[str, Any]:
    """A watching look's answer while the run goes on (library/nccl_torchrun.py's RETURN):
    every rank's place, whether torchrun waits with its workers gone, the fabric interface."""
    look = {"changed": False, "running": True, "progress": read_progress(run_dir / RESULTS_DIR)}
    look["workers_exited"] = workers_exited(run_dir)
    if ifname:
        look["interface"] = interface_state(ifname)
    return look


def reader_gone(fd: int) -> bool:
    """Whoever reads our output (sshd, Ansible's worker) closed its end of the pipe: Ctrl-C or a
    lost connection on the control machine. Never true for a file or a terminal."""
    watch = select.poll()
    watch.register(fd, 0)  # POLLERR and POLLHUP are reported whatever the mask
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in watch.poll(0))


def exit_watch(pid: int, out_fd: int) -> tuple[select.poll, int] | None:
    """A poll that wakes when ``pid`` exits (its pidfd turns readable, zombie included) or when
    whoever reads ``out_fd`` closes it, and the pidfd to close; None where the kernel or Python
    has no pidfd_open, or ``pid`` is already gone."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
    watch = select.poll()
    watch.register(pidfd, select.POLLIN)
    watch.register(out_fd, 0)  # POLLERR and POLLHUP are reported whatever the mask
    return watch, pidfd


def wait_supervisor(
    run_dir: Path, margin: float, every: float = FINISH_POLL_S, until: float | None = None
) -> str | None:
    """Wait until the run's supervisor exited, at most until its own bound plus `margin`.

    Returns why the run must be ended now (a signal that interrupted the wait: SIGTERM, SIGINT or
    SIGHUP; the bound passed; nobody reads our result any more), else None. With `until` (an
    epoch), returns STILL_RUNNING when the run is still alive then. It blocks on the supervisor's
    pidfd and on our output pipe (``exit_watch``), so it returns as soon as either says so; where
    there is no pidfd it looks every `every` seconds.
    """
    doc = read_pids(run_dir)
    if doc is None:
        return None
    sup_pid, sup_start = doc.get("supervisor_pid"), doc.get("supervisor_starttime")
    if not sup_pid or sup_start is None:
        return None
    bound = float(doc.get("timeout_s") or 0) + float(doc.get("kill_grace_s") or 0) + margin
    deadline = float(doc.get("started_epoch") or time.time()) + bound
    out_fd = sys.stdout.fileno()
    # Opened before the identity check below: a pid reused after the pidfd was opened is not ours.
    watch = exit_watch(int(sup_pid), out_fd)
    _catch_stop_signals()
    try:
        while is_alive(sup_pid, sup_start):
            now = time.time()
            if now >= deadline:
                return f"the run outlived timeout + kill_grace + {margin:.0f} s"
            if reader_gone(out_fd):
                return "the control machine went away (the session waiting for the run closed)"
            if until is not None and now >= until:
                return STILL_RUNNING
            if watch is None:
                time.sleep(every)
                continue
            wake = min(deadline, until if until is not None else deadline)
            woke = watch[0].poll(max(0.0, wake - now) * 1000 + 1)
            if any(event & select.POLLNVAL for _, event in woke):  # never busy-loop on a bad fd
                time.sleep(every)
    except Stop as exc:
        return str(exc)
    finally:
        _ignore_stop_signals()
        if watch is not None:
            os.close(watch[1])
    return None
