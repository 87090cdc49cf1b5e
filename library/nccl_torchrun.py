#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Ansible module: run torchrun for one node, detached and bounded in time; wait for it, end its
whole process tree and bring its results back in the same call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_torchrun
short_description: Run torchrun on one node in time bounds, end its process tree, return its results
description:
  - O(state=started) makes O(run_dir) when it is missing (mode O(run_dir_mode), with the checks of
    C(module_utils/nccl_run_dir), which refuse a symbolic link, something that is not a directory,
    or a directory owned by another user, and set the mode of one it finds exactly), writes
    O(env_content) to O(env_file) and O(script_content) to O(script) (when given), waits on node
    rank 0 until nothing accepts connections on O(master_addr):O(master_port) any more (a previous
    run's store may still be closing; at most O(port_wait_timeout) seconds), then starts a detached
    supervisor (double fork and C(setsid), standard streams to C(<run_dir>/torchrun.log), like
    Ansible's C(async_wrapper)) and returns at once, so every node starts together whatever C(forks)
    is.
  - The supervisor starts C(python -m torch.distributed.run) with static rendezvous in its own
    session, records every process of its tree (pid and start time) in C(<run_dir>/torchrun.pids),
    and ends every recorded process still alive after O(timeout) seconds (SIGTERM, then SIGKILL
    after O(kill_grace) seconds), or at once when it receives SIGTERM, SIGINT or SIGHUP. torchrun
    starts each worker in a new session, so killing its process group is not enough; the
    supervisor is a child subreaper, so orphaned workers stay in its tree. Then it joins the
    per-rank logs torchrun wrote under C(<run_dir>/logs) into C(<run_dir>/results/rank-<R>.log)
    (R = O(rank_offset) + local rank), writes C(<run_dir>/launch.json) and exits.
  - O(state=finished) waits on the node (one look every 0.2 s) until the supervisor exited, at most
    O(timeout) + O(kill_grace) + 30 seconds after the start; then it ends whatever is still alive
    (as O(state=stopped)). With O(stop_reason) it ends the run at once instead of waiting. It
    also ends the run at once when it receives SIGTERM, SIGINT or SIGHUP, or when whoever reads
    its result closed the pipe (Ctrl-C or a lost connection on the control machine).
  - O(state=stopped) ends whatever a run of the same O(run_dir) left running (first asking the
    supervisor to stop, then every recorded process), joins the logs and writes C(launch.json) if
    the supervisor could not. Safe to run at any time, also when nothing was started.
  - With O(collect), O(state=finished) and O(state=stopped) return C(results/rank-*.json),
    C(results/rank-*.log), C(torchrun.log), C(launch.json) and the ranks' NCCL logs
    (C(results/nccl.<pid>.log), named C(nccl-rank-<R>.log) by the pid in C(rank-<R>.json))
    as one gzip tar archive in
    RV(collected_archive) (logs longer than O(collect_log_max_bytes) keep their end, after a line
    that says how much was cut). The action plugin of roles/launch unpacks it into O(collect_to)
    on the control machine and drops it from the result.
  - With O(remove_run_dir), O(state=finished) and O(state=stopped) remove O(run_dir) once the
    results are packed and nothing of the run is alive.
  - Processes are only ever ended by their recorded pid (checked against the recorded start time,
    so a reused pid is never hit), never by name.
  - The node's environment is C(nccl.env) (O(env_file), shell-quoted C(KEY=value) lines; written
    from O(env_content) when given, else read as it is) plus O(environment); nothing passes through
    a shell.
options:
  state:
    description:
      - C(started) starts torchrun detached and returns; C(finished) waits for it to end;
        C(stopped) ends a run.
    type: str
    choices: [started, finished, stopped]
    default: finished
  run_dir:
    description:
      - The private run directory of this host (holds the script and nccl.env). O(state=started)
        makes it when it is missing; its parent must exist.
    type: path
    required: true
  run_dir_mode:
    description:
      - With O(state=started), the octal mode of O(run_dir), as a string; set exactly, also on a
        directory that already exists.
    type: str
    default: "0700"
  python:
    description: The node's Python that has torch. Required with O(state=started).
    type: path
  script:
    description: The script torchrun runs in every worker. Required with O(state=started).
    type: path
  script_content:
    description:
      - Text written to O(script) (mode 0600) before the start, so the script needs no copy of its
        own. Not shown in the task's C(invocation).
    type: str
  script_args:
    description: Arguments for the script.
    type: list
    elements: str
    default: []
  nnodes:
    description: Number of nodes. Required with O(state=started).
    type: int
  node_rank:
    description: Rank of this node. Required with O(state=started).
    type: int
  nproc_per_node:
    description: Workers on this node. Required with O(state=started).
    type: int
  rank_offset:
    description: Global rank of this node's local rank 0 (to name the rank logs).
    type: int
    default: 0
  master_addr:
    description: The master's address on the fabric. Required with O(state=started).
    type: str
  master_port:
    description: MASTER_PORT. Required with O(state=started).
    type: int
  local_addr:
    description: This node's address on the fabric (torchrun C(--local-addr)).
    type: str
  rdzv_id:
    description: Rendezvous id; names torchrun's log sub-directory.
    type: str
    default: nccl-preflight
  env_file:
    description:
      - File of shell-quoted C(KEY=value) lines added to the environment.
      - With O(env_content), the file is written first; it must then be directly inside
        O(run_dir) (default C(<run_dir>/nccl.env)). Without it, the file must already exist.
    type: path
  env_content:
    description:
      - With O(state=started), the whole text of O(env_file), written atomically (a temporary file
        in O(run_dir), then a rename) with O(env_file_mode) before it is read; so nccl.env needs no
        call of its own.
    type: str
  env_file_mode:
    description: Octal mode of O(env_file) written from O(env_content), as a string.
    type: str
    default: "0600"
  environment:
    description: More environment for torchrun (wins over O(env_file)).
    type: dict
    default: {}
  timeout:
    description: Seconds torchrun may run before its whole tree is ended.
    type: int
    default: 300
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL when ending the tree.
    type: int
    default: 5
  port_wait_timeout:
    description:
      - With O(state=started) on node rank 0, seconds to wait until MASTER_PORT is free; the task
        fails when it is still in use then. 0 does not wait.
    type: int
    default: 30
  stop_reason:
    description:
      - With O(state=finished), end the run at once instead of waiting, and record this reason as
        C(stopped_by) in C(launch.json) (for example, another node could not start).
      - With O(state=stopped), the reason replaces C(stopped_by) of a run that was still alive;
        when no C(launch.json) exists (the run never started), it is recorded as its C(error).
    type: str
    default: ""
  collect:
    description: Return the run's results in RV(collected_archive).
    type: bool
    default: false
  collect_log_max_bytes:
    description: A log longer than this keeps only its last this many bytes in the archive.
    type: int
    default: 4194304
  collect_to:
    description:
      - Directory on the control machine to unpack the results into (C(rank-<R>.json),
        C(rank-<R>.log), C(torchrun.log), C(launch.json), C(nccl-rank-<R>.log)); sets
        O(collect).
      - Handled by the action plugin of roles/launch on the control machine, never by the node.
    type: path
  remove_run_dir:
    description:
      - With O(state=finished) or O(state=stopped), remove O(run_dir) once nothing of the run is
        alive and the results are packed.
    type: bool
    default: false
  watch_s:
    description:
      - With O(state=finished), look for at most this many seconds; when the run is still alive
        then, return at once with RV(running) true and RV(progress), ending nothing. 0 waits
        until the run ended (one call as long as the run).
      - Each such look leaves C(<run_dir>/watch.json); the supervisor ends the run when no look
        came for O(watch_stale_s) seconds (the control machine is gone).
    type: float
    default: 0
  watch_stale_s:
    description: Seconds without a look after which the supervisor ends a watched run.
    type: float
    default: 30
  watch_ifname:
    description:
      - With O(watch_s), a look that finds the run alive also returns RV(interface), this fabric
        interface's state and carrier now.
    type: str
  diagnose:
    description:
      - With O(state=finished), end nothing and return RV(diagnosis) at once, a stall's evidence
        on this node. Keys C(ifname) (the fabric interface whose state and carrier to read),
        C(probes) (a list of C({host, address, port}) to open a TCP connection to; refused counts
        as reachable), C(probe_timeout) (seconds, default 2), C(source) (address to bind).
    type: dict
  stop_details:
    description:
      - With O(stop_reason), recorded as C(stop) in C(launch.json) (what the watch knew, such as
        a stall's culprits, ranks, test and size).
    type: dict
  watch:
    description:
      - Handled by the action plugin of roles/launch on the control machine, never by the node;
        it then calls this module with O(watch_s) until the run ended, prints the progress of the
        host's ranks, ends the run when another host's run failed or when no rank advanced for
        the stall timeout (after a O(diagnose) call on every host). Keys are documented in
        roles/launch/action_plugins/nccl_torchrun.py.
    type: dict
attributes:
  check_mode:
    support: none
    details: Starting or ending processes cannot be predicted; in check mode the task is skipped.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the collectives on every node at once
  nccl_torchrun:
    state: started
    run_dir: "{{ nccl_env_run_dir }}"
    python: "{{ nccl_env_python }}"
    script: "{{ nccl_env_run_dir }}/nccl_check.py"
    script_content: "{{ lookup('ansible.builtin.file', 'files/nccl_check.py', rstrip=false) }}"
    script_args: ["--out-dir", "{{ nccl_env_run_dir }}/results"]
    nnodes: "{{ nccl_env_nnodes }}"
    node_rank: "{{ nccl_env_node_rank }}"
    nproc_per_node: "{{ nccl_env_nproc_per_node }}"
    rank_offset: "{{ nccl_env_rank_offset }}"
    master_addr: "{{ nccl_env_master_addr }}"
    master_port: "{{ nccl_env_master_port }}"
    local_addr: "{{ nccl_env_address }}"
    run_dir_mode: "0700"
    env_file: "{{ nccl_env_file }}"
    env_content: "{{ nccl_env_file_content }}"
    env_file_mode: "0600"
    timeout: 300

- name: Wait for the run to end on the node and bring its results to the control machine
  nccl_torchrun:
    state: finished
    run_dir: "{{ nccl_env_run_dir }}"
    rank_offset: "{{ nccl_env_rank_offset }}"
    collect_to: "reports/{{ nccl_run_id }}/{{ inventory_hostname }}"
    remove_run_dir: true
  register: launch_result

- name: End everything the run left behind
  nccl_torchrun:
    run_dir: "{{ nccl_env_run_dir }}"
    state: stopped
"""

RETURN = r"""
torchrun_rc:
  description:
    - torchrun's exit status (negative = killed by that signal); null when unknown or still running.
    - Not named C(rc), so that a failed check does not fail the task; the report judges.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the run hit O(timeout).
  returned: always
  type: bool
stopped_by:
  description: Why the run was ended early (a signal name or O(stop_reason)), else null.
  returned: always
  type: str
killed_pids:
  description:
    - Recorded processes that were still alive at the end of the run and were ended (by the
      supervisor at the timeout or by this call); as C(killed_pids) in C(launch.json).
  returned: always
  type: list
  elements: int
ended_now:
  description: The processes this call itself had to end (a run still alive, or left over).
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: int
run_dir_created:
  description: Whether this call made O(run_dir).
  returned: when O(state=started)
  type: bool
env_file:
  description: The environment file that was read (written from O(env_content) when given), or null.
  returned: when O(state=started)
  type: str
  sample: /tmp/nccl-preflight-20261122T010203-abc123-spark-1/nccl.env
cmd:
  description: The torchrun command line.
  returned: when O(state=started)
  type: list
  elements: str
supervisor_pid:
  description: The detached process that runs and bounds torchrun.
  returned: when O(state=started)
  type: int
torchrun_pid:
  description: torchrun's pid.
  returned: when O(state=started)
  type: int
rank_logs:
  description: The rank logs written under C(<run_dir>/results).
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: str
launch_json:
  description: Path of launch.json on the node.
  returned: always
  type: str
collected:
  description: Names of the files in RV(collected_archive).
  returned: when O(collect)
  type: list
  elements: str
truncated:
  description: Names of the logs of which only the end was collected.
  returned: when O(collect)
  type: list
  elements: str
collected_archive:
  description:
    - Base64 of a gzip tar archive of the collected files, flat (no directories).
    - The action plugin of roles/launch removes it from the result after unpacking it.
  returned: when O(collect) and the action plugin did not take it
  type: str
collected_to:
  description: Where the action plugin unpacked the collected files on the control machine.
  returned: when O(collect_to)
  type: str
running:
  description: Whether the run is still alive (a look with O(watch_s) or O(diagnose) ended first).
  returned: when O(state=finished)
  type: bool
progress:
  description:
    - Every rank's place, from its C(rank-<R>.json) (the progress contract of docs/design.md)
      C({rank, status, test, size, index, count, age_s}).
  returned: when O(state=finished)
  type: list
  elements: dict
rank_exits:
  description:
    - The ranks torchrun reported as failed, root cause first C({rank, local_rank, pid, exitcode,
      signal, text, root_cause}); a SIGKILL also has C(oom), the kernel's OOM-killer line or
      null, and C(text) says where to look when the kernel log is not readable.
  returned: when O(state=finished) or O(state=stopped)
  type: list
  elements: dict
interface:
  description: With O(watch_ifname), C({ifname, state, carrier, reason}) at the look.
  returned: when O(watch_ifname) and the run is still alive
  type: dict
diagnosis:
  description: With O(diagnose), C({interface {ifname, state, carrier, reason}, probes [...]}).
  returned: when O(diagnose)
  type: dict
run_dir_removed:
  description: Whether O(run_dir) was removed.
  returned: when O(state=finished) or O(state=stopped)
  type: bool
"""

import base64
import contextlib
import ctypes
import io
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_run_dir import (
    bad_file_name,
    make_private_dir,
    parse_mode,
    private_dir_problem,
)
from ansible.module_utils.nccl_run_observe import (
    WATCHER_GONE,
    interface_state,
    rank_exits,
    read_progress,
    tcp_probe,
    touch_watch,
    watcher_gone,
)

PIDS_FILE = "torchrun.pids"
LAUNCH_FILE = "launch.json"
TORCHRUN_LOG = "torchrun.log"
RESULTS_DIR = "results"
LOGS_DIR = "logs"
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.25
# state=finished looks at the supervisor this often.
FINISH_POLL_S = 0.2
# state=finished waits at most this long beyond the run's own bound (timeout + kill_grace).
FINISH_MARGIN_S = 30
# A watching look leaves this in the run directory; the supervisor ends the run once it is stale.
WATCH_FILE = "watch.json"
# Seconds state=started waits for the detached supervisor to say torchrun runs.
READY_TIMEOUT_S = 30
MAX_FD = 65536
# The files a run leaves for the control machine (docs/design.md, reports/<run-id>/<host>/).
COLLECTED_NAME = re.compile(
    r"^(rank-\d+\.(json|log)|torchrun\.log|launch\.json|nccl-(rank|pid)-\d+\.log)$"
)
# NCCL_DEBUG_FILE of the ranks (roles/nccl_env/templates/nccl.env.j2): results/nccl.<pid>.log.
NCCL_DEBUG_LOG = re.compile(r"^nccl\.(\d+)\.log$")


# wait_supervisor's answer when a watch call's look ended before the run did.
STILL_RUNNING = "\0still running"


class Stop(Exception):
    """Raised by the signal handler: end the tree now."""


# ------------------------------------------------------------------------------------------------
# Pure helpers
# ------------------------------------------------------------------------------------------------


def parse_env_file(text: str, path: str = "nccl.env") -> dict[str, str]:
    """KEY=value lines with shell-quoted values (optionally `export KEY=...`, # comments)."""
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            words = words[1:]
        if not words:
            continue
        if len(words) != 1 or "=" not in words[0] or words[0].startswith("="):
            raise ValueError(f"{path}:{number}: expected KEY=value, got {line!r}")
        key, value = words[0].split("=", 1)
        env[key] = value
    return env


def build_argv(params: dict[str, Any]) -> list[str]:
    """python -m torch.distributed.run with static rendezvous, per-rank logs under logs/."""
    run_dir = params["run_dir"]
    return [
        params["python"],
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(params["nnodes"]),
        "--node-rank",
        str(params["node_rank"]),
        "--nproc-per-node",
        str(params["nproc_per_node"]),
        "--master-addr",
        str(params["master_addr"]),
        "--master-port",
        str(params["master_port"]),
        "--local-addr",
        str(params["local_addr"]),
        "--rdzv-id",
        str(params["rdzv_id"]),
        "--max-restarts",
        "0",
        "--log-dir",
        os.path.join(run_dir, LOGS_DIR),
        "--redirects",
        "3",
        params["script"],
        *[str(arg) for arg in params["script_args"]],
    ]


def parse_stat(text: str) -> dict[str, Any]:
    """Fields of /proc/<pid>/stat that matter here (comm may hold spaces and parentheses)."""
    rest = text[text.rindex(")") + 2 :].split()
    return {
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgid": int(rest[2]),
        "sid": int(rest[3]),
        "starttime": int(rest[19]),
    }


def proc_stat(pid: int) -> dict[str, Any] | None:
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def process_table() -> dict[int, dict[str, Any]]:
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    return table


def descendants(root: int, table: dict[int, dict[str, Any]]) -> dict[int, int]:
    """{pid: starttime} of every live descendant of root."""
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat["ppid"], []).append(pid)
    found: dict[int, int] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found[pid] = table[pid]["starttime"]
        stack.extend(children.get(pid, []))
    return found


def is_alive(pid: int, starttime: int) -> bool:
    """The recorded process still exists (same start time) and is not a zombie."""
    stat = proc_stat(pid)
    return stat is not None and stat["starttime"] == starttime and stat["state"] not in "ZX"


def end_processes(
    recorded: dict[int, int], grace: float, reap: bool = False, keep: int | None = None
) -> list[int]:
    """SIGTERM every live recorded process, then SIGKILL what is left after `grace` seconds.

    With `reap`, zombies reparented to us are collected meanwhile (but never `keep`, the child
    whose exit status Popen still has to read). Returns the pids that were alive and signalled.
    """
    alive = {pid: st for pid, st in recorded.items() if is_alive(pid, st)}
    for pid in alive:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap:
            reap_children(keep)
        if not any(is_alive(pid, st) for pid, st in alive.items()):
            break
        time.sleep(0.1)
    for pid, st in alive.items():
        if is_alive(pid, st):
            _signal(pid, signal.SIGKILL)
    if reap:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(is_alive(p, s) for p, s in alive.items()):
            reap_children(keep)
            time.sleep(0.05)
        reap_children(keep)
    return sorted(alive)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def reap_children(keep: int | None = None) -> None:
    """Collect zombies reparented to us (we are a subreaper), but never `keep`."""
    me = os.getpid()
    for pid, stat in process_table().items():
        if stat["ppid"] == me and stat["state"] == "Z" and pid != keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def write_json(path: Path, doc: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------------
# state=started: the detached supervisor
# ------------------------------------------------------------------------------------------------


def port_in_use(host: str, port: int, timeout: float = 1.0) -> bool:
    """Something accepts TCP connections on host:port (as wait_for state=stopped looks)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port_free(host: str, port: int, timeout: float, every: float = 0.2) -> bool:
    """True once nothing accepts connections on host:port; False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while port_in_use(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True


def supervise(
    argv: list[str],
    env: dict[str, str],
    run_dir: Path,
    timeout: int,
    kill_grace: int,
    rank_offset: int,
    ready_fd: int,
) -> int:
    """Run torchrun, bounded by `timeout`; end its tree; join the logs; write launch.json.

    Runs in the detached process. Writes one JSON line to `ready_fd` once torchrun runs and its
    pid is recorded (or why it could not start), then closes it.
    """
    subreaper = become_subreaper()

    def on_signal(signum: int, _frame: Any) -> None:
        raise Stop(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    started_at = _now()
    me = os.getpid()
    own = proc_stat(me)
    recorded: dict[int, int] = {}
    timed_out = False
    stopped_by: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    pids_doc: dict[str, Any] = {
        "supervisor_pid": me,
        "supervisor_starttime": own["starttime"] if own else None,
        "started_epoch": time.time(),
        "timeout_s": timeout,
        "kill_grace_s": kill_grace,
        "torchrun_pid": None,
        "processes": {},
    }
    write_json(run_dir / PIDS_FILE, pids_doc)
    deadline = time.monotonic() + timeout
    try:
        try:
            with open(run_dir / TORCHRUN_LOG, "ab") as log:
                proc = subprocess.Popen(
                    argv,
                    cwd=run_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            why = f"cannot start {argv[0]}: {exc}"
            os.write(ready_fd, json.dumps({"error": why}).encode())
            os.close(ready_fd)
            write_json(
                run_dir / LAUNCH_FILE,
                {
                    "rc": None,
                    "timed_out": False,
                    "killed_pids": [],
                    "timeout_s": timeout,
                    "stopped_by": None,
                    "error": why,
                    "subreaper": subreaper,
                    "started_at": started_at,
                    "finished_at": _now(),
                    "cmd": argv,
                },
            )
            return 1
        pids_doc["torchrun_pid"] = proc.pid
        pids_doc["pgid"] = proc.pid
        child = proc_stat(proc.pid)
        if child is not None:
            recorded[proc.pid] = child["starttime"]
            pids_doc["processes"] = {str(proc.pid): child["starttime"]}
        write_json(run_dir / PIDS_FILE, pids_doc)
        os.write(ready_fd, json.dumps({"supervisor_pid": me, "torchrun_pid": proc.pid}).encode())
        os.close(ready_fd)
        while True:
            found = descendants(me, process_table())
            if any(recorded.get(pid) != st for pid, st in found.items()):
                recorded.update(found)
                pids_doc["processes"] = {str(p): s for p, s in recorded.items()}
                write_json(run_dir / PIDS_FILE, pids_doc)
            if proc.poll() is not None:
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            stopped_by = watcher_gone(run_dir / WATCH_FILE)
            if stopped_by:
                break
            reap_children(keep=proc.pid)
            time.sleep(POLL_S)
    except Stop as exc:
        stopped_by = str(exc)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    keep = proc.pid if proc is not None else None
    recorded.update(descendants(me, process_table()))
    recorded.pop(me, None)
    killed = end_processes(recorded, kill_grace, reap=True, keep=keep)
    rc = proc.wait() if proc is not None else None
    join_rank_logs(run_dir, rank_offset)
    write_json(
        run_dir / LAUNCH_FILE,
        {
            "rc": rc,
            "timed_out": timed_out,
            "killed_pids": killed,
            "timeout_s": timeout,
            "stopped_by": stopped_by,
            "error": None,
            "subreaper": subreaper,
            "started_at": started_at,
            "finished_at": _now(),
            "cmd": argv,
        },
    )
    if stopped_by and WATCHER_GONE in stopped_by:
        # Nobody will come to collect: leave nothing on the node (docs/design.md).
        shutil.rmtree(run_dir, ignore_errors=True)
    return 0


def _detached_child(
    read_fd: int, write_fd: int, log_path: Path, body: Callable[[int], int]
) -> NoReturn:
    """In the first child of fork(): new session, second fork, run `body` in the grandchild.

    Never returns: both processes leave with os._exit, so neither runs the caller's cleanup
    (AnsiballZ removes its payload directory, AnsibleModule prints its result: the module's job).
    """
    code = 70
    try:
        os.close(read_fd)
        os.setsid()
        if os.fork() > 0:
            code = 0
            return
        # The grandchild: not a session leader, so it can never get a terminal. Its standard
        # streams leave the module's pipes (or the SSH session would wait for it to end).
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in (devnull, log):
            if fd > 2:
                os.close(fd)
        os.closerange(3, write_fd)
        os.closerange(write_fd + 1, MAX_FD)
        code = body(write_fd)
    except BaseException:  # the last word of a detached process: log it, then _exit
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def spawn_detached(
    log_path: Path, body: Callable[[int], int], ready_timeout: float
) -> dict[str, Any]:
    """Run body(ready_fd) in a detached process (double fork + setsid); return what it reported.

    `body` writes one JSON object to ready_fd and closes it once it is running.
    """
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _detached_child(read_fd, write_fd, log_path, body)
    os.close(write_fd)
    os.waitpid(pid, 0)
    chunks = []
    deadline = time.monotonic() + ready_timeout
    with os.fdopen(read_fd, "rb") as ready:
        while time.monotonic() < deadline:
            if not select.select([ready], [], [], max(0.0, deadline - time.monotonic()))[0]:
                break
            chunk = os.read(ready.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    if not text:
        return {"error": f"the detached supervisor reported nothing in {ready_timeout:.0f} s"}
    doc = json.loads(text)
    return doc if isinstance(doc, dict) else {"error": f"unexpected report {text!r}"}


def prepare_run_dir(module: AnsibleModule) -> tuple[bool, str | None]:
    """state=started, before anything runs: make the private run directory when it is missing
    (refusing one somebody else could control), write nccl.env from env_content.

    Returns (whether the directory was made now, the environment file to read or None).
    """
    params = module.params
    run_dir = params["run_dir"]
    dir_mode = parse_mode(params["run_dir_mode"])
    file_mode = parse_mode(params["env_file_mode"])
    for name, mode in (("run_dir_mode", dir_mode), ("env_file_mode", file_mode)):
        if mode is None:
            module.fail_json(
                msg=f"{name} {params[name]!r} is not an octal mode such as 0700", run_dir=run_dir
            )
    env_file = params["env_file"]
    content = params["env_content"]
    if content is not None:
        env_file = env_file or os.path.join(run_dir, "nccl.env")
        inside = os.path.dirname(os.path.normpath(env_file)) == os.path.normpath(run_dir)
        if not inside or bad_file_name(os.path.basename(os.path.normpath(env_file))):
            module.fail_json(
                msg=(
                    f"env_file {env_file} must be a file directly inside the run directory "
                    f"{run_dir} when env_content is given"
                ),
                run_dir=run_dir,
            )
    problem = private_dir_problem(run_dir)
    if problem:
        module.fail_json(msg=f"cannot use the run directory: {problem}", run_dir=run_dir)
    if os.path.exists(os.path.join(run_dir, PIDS_FILE)):
        module.fail_json(
            msg=(
                f"{run_dir} already holds a run ({PIDS_FILE} exists); every run needs its own "
                f"run directory (a new nccl_run_id)"
            ),
            run_dir=run_dir,
        )
    try:
        created = make_private_dir(run_dir, dir_mode)
    except FileExistsError as exc:
        module.fail_json(
            msg=f"cannot use the run directory: {exc} (it appeared while this module was making "
            "it); rerun with another run id",
            run_dir=run_dir,
        )
    if content is not None:
        write_atomically(env_file, content, file_mode)
    elif env_file is not None and not os.path.isfile(env_file):
        module.fail_json(
            msg=(
                f"environment file {env_file} does not exist on this host; pass its text as "
                f"env_content (roles/launch does), or write it there first"
            ),
            env_file=env_file,
        )
    return created, env_file


def run_started(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    missing = [
        k
        for k in (
            "python",
            "script",
            "nnodes",
            "node_rank",
            "nproc_per_node",
            "master_addr",
            "master_port",
            "local_addr",
        )
        if params[k] is None
    ]
    if missing:
        module.fail_json(msg=f"nccl_torchrun state=started needs {', '.join(missing)}")
    run_dir = Path(params["run_dir"])
    created, env_file = prepare_run_dir(module)
    env = dict(os.environ)
    if env_file is not None:
        text = Path(env_file).read_text(encoding="utf-8")
        try:
            env.update(parse_env_file(text, env_file))
        except ValueError as exc:
            module.fail_json(
                msg=f"cannot read the environment file: {exc}; re-render it with "
                f"ansible-playbook playbooks/validate.yml --tags launch",
                env_file=env_file,
            )
    env.update({str(k): str(v) for k, v in params["environment"].items()})
    env["NCCL_PREFLIGHT_RUN_DIR"] = str(run_dir)
    if params["script_content"] is not None:
        write_atomically(params["script"], params["script_content"], 0o600)
    master, port = params["master_addr"], params["master_port"]
    wait_s = params["port_wait_timeout"]
    if params["node_rank"] == 0 and wait_s > 0 and not wait_port_free(master, port, wait_s):
        module.fail_json(
            msg=(
                f"{socket.gethostname()}: MASTER_PORT {port} on {master} is still in use after "
                f"{wait_s} s, so the rendezvous store cannot start. Find the holder with "
                f"`ss -ltnp 'sport = :{port}'` on this host and stop it, or choose another port: "
                f"-e nccl_master_port=<port>"
            ),
            master_addr=master,
            master_port=port,
        )
    argv = build_argv(params)
    (run_dir / RESULTS_DIR).mkdir(exist_ok=True)

    def body(ready_fd: int) -> int:
        return supervise(
            argv,
            env,
            run_dir,
            params["timeout"],
            params["kill_grace"],
            params["rank_offset"],
            ready_fd,
        )

    ready = spawn_detached(run_dir / TORCHRUN_LOG, body, READY_TIMEOUT_S)
    if "error" in ready:
        module.fail_json(
            msg=(
                f"torchrun did not start on this host: {ready['error']} "
                f"(see {run_dir / TORCHRUN_LOG})"
            ),
            cmd=argv,
            run_dir=str(run_dir),
        )
    return {
        "changed": True,
        "run_dir_created": created,
        "env_file": env_file,
        "cmd": argv,
        "supervisor_pid": ready["supervisor_pid"],
        "torchrun_pid": ready["torchrun_pid"],
        "torchrun_rc": None,
        "timed_out": False,
        "stopped_by": None,
        "killed_pids": [],
        "launch_json": str(run_dir / LAUNCH_FILE),
    }


# ------------------------------------------------------------------------------------------------
# state=stopped and state=finished
# ------------------------------------------------------------------------------------------------


def read_pids(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / PIDS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


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
        sup_pid, sup_start = doc.get("supervisor_pid"), doc.get("supervisor_starttime")
        if sup_pid and sup_start is not None and is_alive(sup_pid, sup_start):
            # Ask the supervisor to end its tree and write launch.json itself.
            _signal(sup_pid, signal.SIGTERM)
            deadline = time.monotonic() + grace + 10
            while time.monotonic() < deadline and is_alive(sup_pid, sup_start):
                time.sleep(0.1)
            if is_alive(sup_pid, sup_start):
                killed += end_processes({sup_pid: sup_start}, 0)
        recorded = {int(p): int(s) for p, s in doc.get("processes", {}).items()}
        # Children started after the last record still hang below a recorded process.
        table = process_table()
        for pid, st in list(recorded.items()):
            if is_alive(pid, st):
                recorded.update(descendants(pid, table))
        killed += end_processes(recorded, grace)
    rank_logs = join_rank_logs(run_dir, rank_offset) if run_dir.is_dir() else []
    launch: dict[str, Any] | None = None
    if launch_path.is_file():
        launch = json.loads(launch_path.read_text(encoding="utf-8"))
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
        if changed:
            write_json(launch_path, launch)
    elif run_dir.is_dir():
        # The supervisor never wrote its record: the run did not start (or it was killed).
        launch = {
            "rc": None,
            "timed_out": False,
            "killed_pids": killed,
            "timeout_s": timeout,
            "stopped_by": "state=stopped",
            "error": reason,
            "started_at": None,
            "finished_at": _now(),
        }
        write_json(launch_path, launch)
    launch = launch or {}
    return {
        "changed": bool(killed),
        "torchrun_rc": launch.get("rc"),
        "timed_out": bool(launch.get("timed_out")),
        "stopped_by": launch.get("stopped_by"),
        # Ended by the supervisor at the timeout or by this call: the whole run's record.
        "killed_pids": sorted(set(launch.get("killed_pids") or []) | set(killed)),
        "ended_now": killed,
        "rank_exits": launch.get("rank_exits") or [],
        "rank_logs": rank_logs,
        "launch_json": str(launch_path),
    }


def reader_gone(fd: int) -> bool:
    """Whoever reads our output (sshd, Ansible's worker) closed its end of the pipe: Ctrl-C or a
    lost connection on the control machine. Never true for a file or a terminal."""
    watch = select.poll()
    watch.register(fd, 0)  # POLLERR and POLLHUP are reported whatever the mask
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in watch.poll(0))


def wait_supervisor(
    run_dir: Path, margin: float, every: float = FINISH_POLL_S, until: float | None = None
) -> str | None:
    """Wait until the run's supervisor exited, at most until its own bound plus `margin`.

    Returns why the run must be ended now (a signal that interrupted the wait: SIGTERM, SIGINT or
    SIGHUP; the bound passed; nobody reads our result any more), else None. With `until` (an
    epoch), returns STILL_RUNNING when the run is still alive then.
    """
    doc = read_pids(run_dir)
    if doc is None:
        return None
    sup_pid, sup_start = doc.get("supervisor_pid"), doc.get("supervisor_starttime")
    if not sup_pid or sup_start is None:
        return None
    bound = float(doc.get("timeout_s") or 0) + float(doc.get("kill_grace_s") or 0) + margin
    deadline = float(doc.get("started_epoch") or time.time()) + bound

    def on_signal(signum: int, _frame: Any) -> None:
        raise Stop(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        while is_alive(sup_pid, sup_start):
            if time.time() >= deadline:
                return f"the run outlived timeout + kill_grace + {margin:.0f} s"
            if reader_gone(sys.stdout.fileno()):
                return "the control machine went away (the session waiting for the run closed)"
            if until is not None and time.time() >= until:
                return STILL_RUNNING
            time.sleep(every)
    except Stop as exc:
        return str(exc)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    return None


def read_tail(path: Path, max_bytes: int) -> tuple[bytes, bool]:
    """The file's bytes, or its last max_bytes after a line saying how much was cut."""
    size = path.stat().st_size
    with open(path, "rb") as stream:
        if size <= max_bytes:
            return stream.read(), False
        stream.seek(size - max_bytes)
        kept = stream.read(max_bytes)
    marker = (
        f"[nccl-preflight: the first {size - len(kept)} of {size} bytes of {path.name} were cut; "
        f"the whole log stayed on the node]\n"
    )
    return marker.encode() + kept, True


def nccl_log_names(results: Path) -> dict[Path, str]:
    """results/nccl.<pid>.log -> nccl-rank-<R>.log (the rank whose rank-<R>.json has that pid),
    else nccl-pid-<pid>.log."""
    rank_of: dict[int, int] = {}
    for path in results.glob("rank-*.json"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            rank_of[int(doc["pid"])] = int(doc["global_rank"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    names = {}
    for path in sorted(results.glob("nccl.*.log")):
        match = NCCL_DEBUG_LOG.match(path.name)
        if match:
            pid = int(match.group(1))
            names[path] = (
                f"nccl-rank-{rank_of[pid]}.log" if pid in rank_of else f"nccl-pid-{pid}.log"
            )
    return names


def pack_results(run_dir: Path, log_max_bytes: int) -> tuple[bytes, list[str], list[str]]:
    """A gzip tar of results/rank-*.{json,log}, torchrun.log, launch.json and the ranks' NCCL
    logs (nccl-rank-<R>.log), flat."""
    results = run_dir / RESULTS_DIR
    paths = sorted(results.glob("rank-*.json")) + sorted(results.glob("rank-*.log"))
    paths += [p for p in (run_dir / TORCHRUN_LOG, run_dir / LAUNCH_FILE) if p.is_file()]
    arcnames = nccl_log_names(results) if results.is_dir() else {}
    paths += list(arcnames)
    names: list[str] = []
    truncated: list[str] = []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
        for path in paths:
            name = arcnames.get(path, path.name)
            if not path.is_file() or not COLLECTED_NAME.match(name):
                continue
            if path.suffix == ".log":
                data, cut = read_tail(path, log_max_bytes)
            else:
                data, cut = path.read_bytes(), False
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(path.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
            names.append(name)
            if cut:
                truncated.append(name)
    return buffer.getvalue(), names, truncated


def finish_call(module: AnsibleModule, result: dict[str, Any]) -> dict[str, Any]:
    """What state=finished and state=stopped share at the end: collect, then remove."""
    params = module.params
    run_dir = Path(params["run_dir"])
    if (params["collect"] or params["collect_to"]) and run_dir.is_dir():
        archive, names, truncated = pack_results(run_dir, params["collect_log_max_bytes"])
        result["collected_archive"] = base64.b64encode(archive).decode("ascii")
        result["collected"] = names
        result["truncated"] = truncated
    result["run_dir_removed"] = False
    if params["remove_run_dir"] and run_dir.is_dir():
        if run_dir.resolve() in (Path("/"), Path.home().resolve()):
            module.fail_json(msg=f"refusing to remove {run_dir}: not a private run directory")
        shutil.rmtree(run_dir)
        result["run_dir_removed"] = True
        result["changed"] = True
    return result


def run_finished(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    run_dir = Path(params["run_dir"])
    reason = params["stop_reason"] or None
    if params["diagnose"] is not None and reason is None:
        return diagnose_run(run_dir, params["diagnose"])
    if reason is None:
        watch_s = params["watch_s"]
        until = time.time() + watch_s if watch_s > 0 else None
        if until is not None:
            touch_watch(run_dir / WATCH_FILE, params["watch_stale_s"])
        reason = wait_supervisor(run_dir, FINISH_MARGIN_S, until=until)
        if reason == STILL_RUNNING:
            touch_watch(run_dir / WATCH_FILE, params["watch_stale_s"])
            look = {
                "changed": False,
                "running": True,
                "progress": read_progress(run_dir / RESULTS_DIR),
            }
            if params["watch_ifname"]:
                look["interface"] = interface_state(params["watch_ifname"])
            return look
    result = stop_run(
        run_dir,
        params["kill_grace"],
        params["timeout"],
        params["rank_offset"],
        reason,
        params["stop_details"],
    )
    result["running"] = False
    result["progress"] = read_progress(run_dir / RESULTS_DIR)
    return finish_call(module, result)


# ------------------------------------------------------------------------------------------------
# Watching: the controller's short looks (state=finished with watch_s), a stall's evidence
# ------------------------------------------------------------------------------------------------


def diagnose_run(run_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """A stall's evidence on this node: the fabric interface now and a TCP probe of each peer."""
    doc = read_pids(run_dir) or {}
    alive = bool(doc) and is_alive(doc.get("supervisor_pid") or 0, doc.get("supervisor_starttime"))
    probes = []
    for target in spec.get("probes") or []:
        probe = tcp_probe(
            str(target["address"]),
            int(target["port"]),
            float(spec.get("probe_timeout") or 2.0),
            spec.get("source") or None,
        )
        probes.append({"host": target.get("host"), **probe})
    ifname = spec.get("ifname")
    return {
        "changed": False,
        "running": alive,
        "progress": read_progress(run_dir / RESULTS_DIR),
        "diagnosis": {
            "interface": interface_state(str(ifname)) if ifname else {},
            "probes": probes,
        },
    }


def run_stopped(module: AnsibleModule) -> dict[str, Any]:
    params = module.params
    run_dir = Path(params["run_dir"])
    reason = params["stop_reason"] or None
    result = stop_run(
        run_dir, params["kill_grace"], params["timeout"], params["rank_offset"], reason
    )
    return finish_call(module, result)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {
                "type": "str",
                "choices": ["started", "finished", "stopped"],
                "default": "finished",
            },
            "run_dir": {"type": "path", "required": True},
            "python": {"type": "path"},
            "script": {"type": "path"},
            "script_content": {"type": "str", "no_log": True},
            "script_args": {"type": "list", "elements": "str", "default": []},
            "nnodes": {"type": "int"},
            "node_rank": {"type": "int"},
            "nproc_per_node": {"type": "int"},
            "rank_offset": {"type": "int", "default": 0},
            "master_addr": {"type": "str"},
            "master_port": {"type": "int"},
            "local_addr": {"type": "str"},
            "rdzv_id": {"type": "str", "default": "nccl-preflight"},
            "run_dir_mode": {"type": "str", "default": "0700"},
            "env_file": {"type": "path"},
            "env_content": {"type": "str"},
            "env_file_mode": {"type": "str", "default": "0600"},
            "environment": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 300},
            "kill_grace": {"type": "int", "default": 5},
            "port_wait_timeout": {"type": "int", "default": 30},
            "stop_reason": {"type": "str", "default": ""},
            "collect": {"type": "bool", "default": False},
            "collect_log_max_bytes": {"type": "int", "default": 4 * 1024 * 1024},
            "collect_to": {"type": "path"},
            "remove_run_dir": {"type": "bool", "default": False},
            "watch_s": {"type": "float", "default": 0.0},
            "watch_stale_s": {"type": "float", "default": 30.0},
            "watch_ifname": {"type": "str"},
            "diagnose": {"type": "dict"},
            "stop_details": {"type": "dict"},
        },
        supports_check_mode=False,
    )
    run = {"started": run_started, "finished": run_finished, "stopped": run_stopped}
    module.exit_json(**run[module.params["state"]](module))


if __name__ == "__main__":
    main()
