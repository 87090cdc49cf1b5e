#!/usr/bin/python
# Copyright: (c) 2025, nccl-preflight contributors
# MIT License (see LICENSE)
"""Ansible module: run torchrun for one node, bounded in time, and end its whole process tree."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_torchrun
short_description: Run torchrun on one node with a time bound, and end its whole process tree
description:
  - O(state=finished) starts C(python -m torch.distributed.run) with static rendezvous in its own
    session, records every process of its tree (pid and start time) in
    C(<run_dir>/torchrun.pids), waits up to O(timeout) seconds, and then ends every recorded
    process that is still alive (SIGTERM, then SIGKILL after O(kill_grace) seconds). It does the
    same when it receives SIGTERM, SIGINT or SIGHUP. Meant to run with C(async) and C(poll=0) so
    all nodes start together whatever C(forks) is.
  - torchrun starts each worker in a new session, so killing torchrun's process group is not
    enough; the module makes itself a child subreaper so orphaned workers stay in its tree.
  - Processes are only ever ended by their recorded pid (checked against the recorded start
    time, so a reused pid is never hit), never by name.
  - When torchrun is done, the per-rank stdout and stderr logs that torchrun wrote under
    C(<run_dir>/logs) are joined into C(<run_dir>/results/rank-<R>.log) (R = O(rank_offset) +
    local rank) and C(<run_dir>/launch.json) is written (C(rc), C(timed_out), C(killed_pids)).
  - O(state=stopped) ends whatever a previous O(state=finished) of the same O(run_dir) left
    running (first asking the waiting module to stop, then every recorded process), joins the
    logs and writes C(launch.json) if the waiting module could not. Safe to run at any time.
  - The node's environment is C(nccl.env) (O(env_file), shell-quoted C(KEY=value) lines) plus
    O(environment); nothing passes through a shell.
options:
  state:
    description: C(finished) runs torchrun until it ends; C(stopped) ends a run.
    type: str
    choices: [finished, stopped]
    default: finished
  run_dir:
    description: The private run directory of this host (holds the script and nccl.env).
    type: path
    required: true
  python:
    description: The node's Python that has torch.
    type: path
  script:
    description: The script torchrun runs in every worker.
    type: path
  script_args:
    description: Arguments for the script.
    type: list
    elements: str
    default: []
  nnodes:
    description: Number of nodes.
    type: int
  node_rank:
    description: Rank of this node.
    type: int
  nproc_per_node:
    description: Workers on this node.
    type: int
  rank_offset:
    description: Global rank of this node's local rank 0 (to name the rank logs).
    type: int
    default: 0
  master_addr:
    description: The master's address on the fabric.
    type: str
  master_port:
    description: MASTER_PORT.
    type: int
  local_addr:
    description: This node's address on the fabric (torchrun C(--local-addr)).
    type: str
  rdzv_id:
    description: Rendezvous id; names torchrun's log sub-directory.
    type: str
    default: nccl-preflight
  env_file:
    description: File of shell-quoted C(KEY=value) lines added to the environment.
    type: path
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
attributes:
  check_mode:
    support: none
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Run the collectives on every node at once
  nccl_torchrun:
    run_dir: "{{ nccl_env_run_dir }}"
    python: "{{ nccl_env_python }}"
    script: "{{ nccl_env_run_dir }}/nccl_check.py"
    script_args: ["--out-dir", "{{ nccl_env_run_dir }}/results"]
    nnodes: "{{ nccl_env_nnodes }}"
    node_rank: "{{ nccl_env_node_rank }}"
    nproc_per_node: "{{ nccl_env_nproc_per_node }}"
    rank_offset: "{{ nccl_env_rank_offset }}"
    master_addr: "{{ nccl_env_master_addr }}"
    master_port: "{{ nccl_env_master_port }}"
    local_addr: "{{ nccl_env_address }}"
    env_file: "{{ nccl_env_file }}"
    timeout: 300
  async: 360
  poll: 0
  register: launch_job

- name: End everything the run left behind
  nccl_torchrun:
    run_dir: "{{ nccl_env_run_dir }}"
    state: stopped
"""

RETURN = r"""
torchrun_rc:
  description:
    - torchrun's exit status (negative = killed by that signal); null when unknown.
    - Not named C(rc), so that a failed check does not fail the task; the report judges.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the run hit O(timeout).
  returned: always
  type: bool
killed_pids:
  description: Recorded processes that were still alive and were ended.
  returned: always
  type: list
  elements: int
cmd:
  description: The torchrun command line.
  returned: when O(state=finished)
  type: list
  elements: str
rank_logs:
  description: The rank logs written under C(<run_dir>/results).
  returned: always
  type: list
  elements: str
launch_json:
  description: Path of launch.json.
  returned: always
  type: str
"""

import contextlib
import ctypes
import json
import os
import shlex
import signal
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

PIDS_FILE = "torchrun.pids"
LAUNCH_FILE = "launch.json"
TORCHRUN_LOG = "torchrun.log"
RESULTS_DIR = "results"
LOGS_DIR = "logs"
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.25


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
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------------
# state=finished
# ------------------------------------------------------------------------------------------------


def run_finished(module: AnsibleModule) -> dict[str, Any]:
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
        module.fail_json(msg=f"nccl_torchrun state=finished needs {', '.join(missing)}")
    run_dir = Path(params["run_dir"])
    if not run_dir.is_dir():
        module.fail_json(
            msg=(
                f"run directory {run_dir} does not exist on this host; run the environment "
                f"stage first: ansible-playbook playbooks/validate.yml --tags env,launch"
            ),
            run_dir=str(run_dir),
        )
    if (run_dir / PIDS_FILE).exists():
        module.fail_json(
            msg=(
                f"{run_dir} already holds a run ({PIDS_FILE} exists); every run needs its own "
                f"run directory (a new nccl_run_id)"
            ),
            run_dir=str(run_dir),
        )
    env = dict(os.environ)
    if params["env_file"]:
        text = Path(params["env_file"]).read_text(encoding="utf-8")
        try:
            env.update(parse_env_file(text, params["env_file"]))
        except ValueError as exc:
            module.fail_json(
                msg=f"cannot read the environment file: {exc}; re-render it with "
                f"ansible-playbook playbooks/validate.yml --tags env"
            )
    env.update({str(k): str(v) for k, v in params["environment"].items()})
    env["NCCL_PREFLIGHT_RUN_DIR"] = str(run_dir)
    argv = build_argv(params)
    (run_dir / RESULTS_DIR).mkdir(exist_ok=True)
    subreaper = become_subreaper()

    def on_signal(signum: int, _frame: Any) -> None:
        raise Stop(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    started_at = _now()
    me = os.getpid()
    recorded: dict[int, int] = {}
    timed_out = False
    stopped_by: str | None = None
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
    own = proc_stat(me)
    pids_doc = {
        "module_pid": me,
        "module_starttime": own["starttime"] if own else None,
        "torchrun_pid": proc.pid,
        "pgid": proc.pid,
        "processes": {},
    }
    deadline = time.monotonic() + params["timeout"]
    try:
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
            reap_children(keep=proc.pid)
            time.sleep(POLL_S)
    except Stop as exc:
        stopped_by = str(exc)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        recorded.update(descendants(me, process_table()))
        recorded.pop(me, None)
        killed = end_processes(recorded, params["kill_grace"], reap=True, keep=proc.pid)
        rc = proc.wait()
    rank_logs = join_rank_logs(run_dir, params["rank_offset"])
    doc = {
        "rc": rc,
        "timed_out": timed_out,
        "killed_pids": killed,
        "timeout_s": params["timeout"],
        "stopped_by": stopped_by,
        "subreaper": subreaper,
        "started_at": started_at,
        "finished_at": _now(),
        "cmd": argv,
    }
    write_json(run_dir / LAUNCH_FILE, doc)
    return {
        "changed": True,
        "torchrun_rc": rc,
        "timed_out": timed_out,
        "killed_pids": killed,
        "cmd": argv,
        "rank_logs": rank_logs,
        "launch_json": str(run_dir / LAUNCH_FILE),
        "stopped_by": stopped_by,
    }


# ------------------------------------------------------------------------------------------------
# state=stopped
# ------------------------------------------------------------------------------------------------


def run_stopped(module: AnsibleModule) -> dict[str, Any]:
    run_dir = Path(module.params["run_dir"])
    grace = module.params["kill_grace"]
    pids_path = run_dir / PIDS_FILE
    launch_path = run_dir / LAUNCH_FILE
    killed: list[int] = []
    if pids_path.is_file():
        doc = json.loads(pids_path.read_text(encoding="utf-8"))
        module_pid, module_start = doc.get("module_pid"), doc.get("module_starttime")
        if module_pid and module_start is not None and is_alive(module_pid, module_start):
            # Ask the waiting module to end its tree and write launch.json itself.
            _signal(module_pid, signal.SIGTERM)
            deadline = time.monotonic() + grace + 10
            while time.monotonic() < deadline and is_alive(module_pid, module_start):
                time.sleep(0.1)
            if is_alive(module_pid, module_start):
                killed += end_processes({module_pid: module_start}, 0)
        recorded = {int(p): int(s) for p, s in doc.get("processes", {}).items()}
        # Children started after the last record still hang below a recorded process.
        table = process_table()
        for pid, st in list(recorded.items()):
            if is_alive(pid, st):
                recorded.update(descendants(pid, table))
        killed += end_processes(recorded, grace)
    rank_logs = (
        [] if not run_dir.is_dir() else join_rank_logs(run_dir, module.params["rank_offset"])
    )
    rc = None
    timed_out = False
    if launch_path.is_file():
        launch = json.loads(launch_path.read_text(encoding="utf-8"))
        rc, timed_out = launch.get("rc"), bool(launch.get("timed_out"))
        if killed:
            launch["killed_pids"] = sorted(set(launch.get("killed_pids") or []) | set(killed))
            write_json(launch_path, launch)
    elif run_dir.is_dir():
        write_json(
            launch_path,
            {
                "rc": None,
                "timed_out": False,
                "killed_pids": killed,
                "timeout_s": module.params["timeout"],
                "stopped_by": "state=stopped",
                "started_at": None,
                "finished_at": _now(),
            },
        )
    return {
        "changed": bool(killed),
        "torchrun_rc": rc,
        "timed_out": timed_out,
        "killed_pids": killed,
        "rank_logs": rank_logs,
        "launch_json": str(launch_path),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["finished", "stopped"], "default": "finished"},
            "run_dir": {"type": "path", "required": True},
            "python": {"type": "path"},
            "script": {"type": "path"},
            "script_args": {"type": "list", "elements": "str", "default": []},
            "nnodes": {"type": "int"},
            "node_rank": {"type": "int"},
            "nproc_per_node": {"type": "int"},
            "rank_offset": {"type": "int", "default": 0},
            "master_addr": {"type": "str"},
            "master_port": {"type": "int"},
            "local_addr": {"type": "str"},
            "rdzv_id": {"type": "str", "default": "nccl-preflight"},
            "env_file": {"type": "path"},
            "environment": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 300},
            "kill_grace": {"type": "int", "default": 5},
        },
        supports_check_mode=False,
    )
    run = run_finished if module.params["state"] == "finished" else run_stopped
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
