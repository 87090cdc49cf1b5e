#!/usr/bin/python
# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Hold short-lived TCP listeners for the pre-flight reachability probes, in a detached process.

The pre-flight's first and last call on a node: it also makes the run's private directory and runs
the torch probe beside the listeners, so importing torch (seconds) overlaps the probes."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_listen
short_description: Start and stop the short-lived TCP listeners that peers probe in the pre-flight
description:
  - With O(state=started), makes O(run_dir) when given (with the checks of
    C(module_utils/nccl_run_dir) - a private directory of this user, never a symbolic link) and
    O(path) inside it (mode 0700) when missing, optionally looks for a process
    already listening on O(check_port), binds one TCP listener per entry of O(listeners)
    (MASTER_PORT on the master, a port the kernel picks from C(net.ipv4.ip_local_port_range) on
    every host) and hands them to a detached listener process (double fork, new session, standard
    streams to C(/dev/null) and C(<path>/listener.log)), so the module, and the SSH session that
    runs it, ends at once. It returns the bound ports; the peers can connect as soon as it returns.
  - With O(python), the listener process also runs that interpreter with a short script that
    imports torch and prints the torch, CUDA, NCCL and torch_npu versions (what M(nccl_facts) does
    with O(nccl_facts#module:query_python)); O(state=stopped) returns them in RV(python). Importing
    torch takes seconds; here it overlaps the probes instead of adding to them.
  - The listener process accepts connections until each listener got its
    O(listeners[].expect) connections, C(<path>/listener.stop) appears, O(path) is removed, or
    O(timeout) seconds passed, whichever comes first. It then writes what it saw to
    C(<path>/listener.json) and exits; it never outlives O(timeout).
  - With O(state=stopped), writes C(<path>/listener.stop), waits up to O(stop_timeout) seconds for
    the listener process to exit (kills it after that; it first waits for the O(python) script,
    up to O(python_timeout)) and returns what it saw, and this host's clock.
  - A listener that cannot bind (address not local, port in use) is reported in the result with
    its error; it does not fail the module, so the other checks still run.
  - Every file lives in O(path) - C(listener.pid), C(listener.stop), C(listener.json),
    C(listener.log), C(python-probe.out), C(python-probe.err).
version_added: "0.1.0"
options:
  state:
    description: Start the listeners, or stop them and collect what they saw.
    type: str
    choices: [started, stopped]
    default: started
  path:
    description:
      - The listener's private directory, inside the run directory. O(state=started) makes it
        (mode 0700) when missing.
    type: path
    required: true
  run_dir:
    description:
      - The run's private directory on this node, made with O(run_dir_mode) when missing
        (O(state=started)). Refused, and the module fails, when it is a symbolic link, not a
        directory, or owned by another user. Its parent must exist.
      - Not given - only O(path) is made.
    type: path
  run_dir_mode:
    description: Octal mode of O(run_dir), as a string.
    type: str
    default: "0700"
  python:
    description:
      - Python interpreter (absolute path or a name on PATH) to run the torch probe with, beside
        the listeners (O(state=started)); its result comes back with O(state=stopped).
      - Not given - no probe; RV(python) is not returned.
    type: str
  python_timeout:
    description: Seconds the O(python) probe may take; it is killed after that.
    type: float
    default: 60
  listeners:
    description: The listeners to hold (O(state=started)).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: A label for the listener (C(master), C(ring)).
        type: str
        required: true
      address:
        description: The literal local address to bind.
        type: str
        required: true
      port:
        description: The port; C(0) lets the kernel pick one from the ephemeral range.
        type: int
        default: 0
      expect:
        description: Stop this listener after this many accepted connections.
        type: int
        default: 1
  check_port:
    description:
      - Before binding, look in C(/proc) for processes already listening on this TCP port
        (O(state=started)); they are returned in RV(port_owner).
      - A listener of O(listeners) on this port is not started when the port is held, so nobody
        probes a foreign listener.
    type: int
  timeout:
    description:
      - Seconds the listener process lives at most (O(state=started)), whatever it received.
      - Keep it well above the time between starting the listeners and the end of the probes.
      - Also bounds the O(python) probe.
    type: float
    default: 60
  lock:
    description:
      - With O(state=started), take the run lock C(lock.path) before binding (on the master; see
        C(module_utils/nccl_run_lock)) and hand it to a detached keeper that holds it until
        O(run_dir) is removed or C(lock.lifetime) seconds passed. Held by another run - the
        listener on O(check_port) is not started and RV(lock) names that run. A lock whose keeper
        is gone is taken over. Needs O(run_dir). In check mode the lock is only looked at.
    type: dict
    suboptions:
      path: {description: The lock file., type: path, required: true}
      lifetime: {description: Seconds the keeper holds it at most., type: float, default: 3600}
      run_id: {description: This run's id, recorded in the lock., type: str, required: true}
      started_at: {description: When this run started, recorded., type: str, default: ""}
      control_host: {description: The control machine, recorded., type: str, default: ""}
      control_user: {description: Who runs the validation, recorded., type: str, default: ""}
  remove_run_dir:
    description:
      - With O(state=stopped), remove this directory (the run's private directory, which holds
        O(path)) and everything in it once the listener's result is read, also when the module
        fails. Only this user's own directory is removed, never through a symbolic link.
      - For a pre-flight that no launch follows - the stop is then the last call on the host.
    type: path
  stop_timeout:
    description:
      - Seconds O(state=stopped) waits for the listener process to exit after writing the stop
        file; after that the process is killed and the module fails.
      - With O(python), keep it above O(python_timeout): the listener process waits for the probe.
    type: float
    default: 10
attributes:
  check_mode:
    support: partial
    details:
      - In check mode O(state=started) only reads - O(check_port), O(lock), and the O(python)
        probe run in the foreground (C(python -B)) - and says in C(msg) what it would change; no
        directory is made, no lock taken, no listener held.
      - In check mode O(state=stopped) only reads the clock; no stop file is written.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the listeners (MASTER_PORT on the master, an ephemeral port)
  nccl_preflight_listen:
    state: started
    run_dir: /tmp/nccl-preflight-RUN-node1
    path: /tmp/nccl-preflight-RUN-node1/preflight
    python: /usr/bin/python3
    check_port: 29500
    listeners:
      - {name: master, address: 10.0.0.11, port: 29500, expect: 4}
      - {name: ring, address: 10.0.0.11, port: 0, expect: 1}
    timeout: 100
  register: listen

- name: Stop them once every peer has probed, and collect who connected
  nccl_preflight_listen:
    state: stopped
    path: /tmp/nccl-preflight-RUN-node1/preflight
    stop_timeout: 70
  register: listened
"""

RETURN = r"""
listeners:
  description:
    - One entry per listener. With O(state=started), C(accepted) is empty; with
      O(state=stopped) it lists the peer address of each accepted connection.
    - Empty when nothing was started (check mode), or with O(state=stopped) when the listener
      process could not be collected (the module then fails).
  returned: always
  type: list
  elements: dict
  sample:
    - name: master
      address: 10.0.0.11
      port: 29500
      expect: 2
      error: ""
      accepted: ["10.0.0.12", "10.0.0.11"]
      complete: true
ports:
  description: The bound port and the bind error of each listener, by name.
  returned: O(state=started)
  type: dict
  sample: {master: {port: 29500, error: ""}, ring: {port: 41234, error: ""}}
port_owner:
  description:
    - What listens on O(check_port) (C(free), and C(listeners) with their owning processes);
      empty when O(check_port) is not given.
  returned: O(state=started)
  type: dict
  sample:
    free: false
    listeners:
      - {address: 0.0.0.0, port: 29500, inode: 33531, uid: 0, pid: 4242, comm: python3,
         cmdline: python3 -m http.server 29500}
pid:
  description: The listener process; null when no listener could bind (no process started).
  returned: always
  type: int
ended:
  description:
    - Why the listener process ended - C(complete) (every listener got its connections),
      C(stop file), C(timeout), C(run directory removed), or C(nothing bound) (no process was
      started).
  returned: O(state=stopped), when the listener's result was read
  type: str
  sample: complete
timed_out:
  description: True when the timeout or the stop file closed a listener before its expected
    connections came.
  returned: O(state=stopped), when the listener's result was read
  type: bool
killed:
  description: True when the listener process did not exit within O(stop_timeout) and was killed.
  returned: O(state=stopped), when a listener process was found
  type: bool
python:
  description:
    - What the O(python) probe reported, as RV(nccl_facts#module:ansible_facts.nccl.python) -
      C(executable), C(version), C(torch_version), C(cuda_available), C(cuda_version),
      C(nccl_version), C(device_count), C(npu_available), C(npu_version) and C(reason) (why a value
      is empty - torch missing, the probe failed or ran out of time).
  returned: O(state=stopped), when the listener was started with O(python) and its result was
    read; O(state=started) with O(python) in check mode
  type: dict
  sample:
    executable: /usr/bin/python3
    version: "3.12.3"
    torch_version: "2.13.0+cu130"
    cuda_available: true
    cuda_version: "13.0"
    nccl_version: "2.28.3"
    device_count: 8
    npu_available: false
    npu_version: null
    reason: ""
lock:
  description:
    - With O(lock), C(path), C(acquired), C(refused) (another run holds it, or it could not be
      taken), C(took_over) (a stale lock), C(holder) (the record of the run holding it - this
      one when acquired - run_id, started_at, control_host, control_user, keeper_pid,
      keeper_start_time, locked_at, run_dir), C(stale) and C(message).
  returned: O(state=started) with O(lock)
  type: dict
run_dir_removed:
  description: Whether O(remove_run_dir) is gone (C(remove_error) says why not).
  returned: O(state=stopped) with O(remove_run_dir), outside check mode
  type: bool
clock:
  description:
    - This host's clock (seconds since the epoch, C(time.time())) when the module started.
    - Returned also when the module fails, so the clock check does not depend on the listeners.
  returned: O(state=stopped)
  type: float
  sample: 1763776800.123456
"""

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import time
import traceback
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_check_mode import probe_python_read_only, would_start
from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_parse import (
    PYTHON_PROBE,
    empty_python_facts,
    python_facts_from_run,
)
from ansible.module_utils.nccl_preflight_proc import (
    port_owner,
    process_alive,
    process_identity,
)
from ansible.module_utils.nccl_run_dir import (
    make_private_dir,
    parse_mode,
    private_dir_problem,
    remove_private_dir,
)
from ansible.module_utils.nccl_run_lock import look as look_at_lock
from ansible.module_utils.nccl_run_lock import take as take_lock

PID_FILE = "listener.pid"
STOP_FILE = "listener.stop"
RESULT_FILE = "listener.json"
LOG_FILE = "listener.log"
PROBE_OUT = "python-probe.out"
PROBE_ERR = "python-probe.err"
# How often the listener process looks for the stop file and for its directory.
POLL_S = 0.2


def bind_listener(address: str, port: int) -> tuple[socket.socket | None, int, str]:
    """-> (socket or None, bound port, error text)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # As torch's TCPStore does: a port left in TIME_WAIT by an earlier run is free for the job.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        return None, port, f"{exc.strerror or exc} (binding {address}:{port})"
    sock.setblocking(False)
    return sock, sock.getsockname()[1], ""


def write_json(path: str, payload: Any) -> None:
    """Write ``payload`` to ``path`` (mode 0600) atomically: readers see all of it or nothing."""
    write_atomically(path, json.dumps(payload), 0o600)


def read_json(path: str) -> Any:
    """The JSON in ``path``; None when there is no such file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def serve(
    entries: list[dict], socks: dict[str, socket.socket], deadline: float, stop_file: str | None
) -> str:
    """Accept until every listener has its expected connections, the deadline passes, the stop
    file appears or its directory is removed; close every socket.

    -> why it ended: "complete", "timeout", "stop file" or "run directory removed".
    """
    sel = selectors.DefaultSelector()
    by_name = {e["name"]: e for e in entries}
    for name, sock in socks.items():
        sel.register(sock, selectors.EVENT_READ, name)
    run_dir = os.path.dirname(stop_file) if stop_file else ""
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            if stop_file and os.path.exists(stop_file):
                return "stop file"
            if run_dir and not os.path.isdir(run_dir):
                return "run directory removed"
            for key, _ in sel.select(timeout=min(left, POLL_S)):
                entry = by_name[key.data]
                try:
                    conn, peer = key.fileobj.accept()
                except BlockingIOError:
                    continue
                conn.close()
                entry["accepted"].append(peer[0])
                if len(entry["accepted"]) >= entry["expect"]:
                    entry["complete"] = True
                    sel.unregister(key.fileobj)
        return "complete"
    finally:
        sel.close()
        for sock in socks.values():
            sock.close()


def result_of(
    entries: list[dict], ended: str, pid: int | None, python_run: dict | None = None
) -> dict:
    """What the listener process leaves in listener.json."""
    return {
        "pid": pid,
        "listeners": entries,
        "ended": ended,
        "timed_out": ended not in ("complete", "nothing bound"),
        "python_run": python_run,
    }


def start_python_probe(path: str, python: str) -> tuple[subprocess.Popen | None, str]:
    """Start ``python -c PYTHON_PROBE``, its streams to files in ``path``; -> (process, error)."""
    try:
        with (
            open(os.path.join(path, PROBE_OUT), "wb") as out,
            open(os.path.join(path, PROBE_ERR), "wb") as err,
        ):
            process = subprocess.Popen(
                [python, "-c", PYTHON_PROBE], stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
    except OSError as exc:
        return None, f"cannot run {python}: {exc.strerror or exc}"
    return process, ""


def _read_text(path: str, limit: int = 20000) -> str:
    """The last ``limit`` characters of a text file; empty when there is no such file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-limit:]
    except FileNotFoundError:
        return ""


def finish_python_probe(
    path: str, python: str, process: subprocess.Popen | None, error: str, deadline: float
) -> dict:
    """Wait for the probe until ``deadline`` (monotonic; killed then) and read what it printed.

    -> {"executable", "rc", "stdout", "stderr", "error"}; error is set when it could not start
    or was killed.
    """
    rc = None
    if process is not None:
        try:
            rc = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            error = f"{python} -c <probe> (import torch) did not finish in time; it was killed"
    return {
        "executable": python,
        "rc": rc,
        "stdout": _read_text(os.path.join(path, PROBE_OUT)),
        "stderr": _read_text(os.path.join(path, PROBE_ERR), 2000),
        "error": error,
    }


def python_facts(python_run: dict) -> dict:
    """The python fact (as nccl_facts returns it) from the probe run in listener.json."""
    executable = python_run["executable"]
    if python_run["error"] or python_run["rc"] is None:
        return empty_python_facts(python_run["error"] or "the probe did not run", executable)
    return python_facts_from_run(
        executable, python_run["rc"], python_run["stdout"], python_run["stderr"]
    )


def _close_fds_except(keep: set[int]) -> None:
    """Close every file descriptor but ``keep``: an inherited end of the SSH session's pipes
    would keep the session, and so the module's task, open until the listener exits."""
    # The open ones, not range(SC_OPEN_MAX): that limit may be in the millions.
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            os.closerange(int(name), int(name) + 1)  # no error for listdir's own, closed fd


def _listener_process(
    path: str,
    entries: list[dict],
    socks: dict[str, socket.socket],
    deadline: float,
    python: dict | None,
    notify: int,
) -> NoReturn:
    """The first child: detach (new session, second fork) and serve in the grandchild.

    Never returns: a forked process must not go back into the module's code, whatever happens.
    """
    code = 1
    try:
        os.setsid()
        if os.fork() > 0:
            os._exit(0)  # the session leader goes; the grandchild can never get a terminal
        os.chdir("/")
        os.umask(0o077)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(os.path.join(path, LOG_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        _close_fds_except({0, 1, 2, notify} | {s.fileno() for s in socks.values()})
        pid = os.getpid()
        identity = process_identity(pid)
        write_json(
            os.path.join(path, PID_FILE),
            {"pid": pid, "start_time": identity[1] if identity else None},
        )
        os.write(notify, str(pid).encode())
        os.close(notify)
        probe, probe_error = None, ""
        if python:
            probe, probe_error = start_python_probe(path, python["executable"])
            probe_deadline = min(deadline, time.monotonic() + python["timeout"])
        stop_file = os.path.join(path, STOP_FILE)
        ended = serve(entries, socks, deadline, stop_file) if socks else "nothing bound"
        python_run = None
        if python:
            if ended == "run directory removed":
                probe_deadline = time.monotonic()  # nobody waits for it any more
            python_run = finish_python_probe(
                path, python["executable"], probe, probe_error, probe_deadline
            )
        # When the run directory is gone the run is over: nobody waits for the result.
        with contextlib.suppress(FileNotFoundError):
            write_json(os.path.join(path, RESULT_FILE), result_of(entries, ended, pid, python_run))
        code = 0
    # Catch everything: this forked process must end here, with its traceback in the log, and
    # never unwind into the module's (or AnsiballZ's) code, which would answer a second time.
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def spawn_listener(
    path: str,
    entries: list[dict],
    socks: dict[str, socket.socket],
    deadline: float,
    python: dict | None = None,
) -> int:
    """Serve the bound ``socks`` (and run the ``python`` probe, {executable, timeout}) in a
    detached process; -> its pid, once it wrote its pid file and let go of this process's standard
    streams (0 when it died before that)."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        _listener_process(path, entries, socks, deadline, python, write_end)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode("ascii")
    for sock in socks.values():  # the listener process holds its own copies
        sock.close()
    return int(text) if text else 0


def log_tail(path: str, limit: int = 2000) -> str:
    """The end of the listener's log, for error messages."""
    return _read_text(os.path.join(path, LOG_FILE), limit).strip()


def stop_listener(path: str, wait: float) -> dict:
    """Write the stop file and wait up to ``wait`` s for the listener process to exit (killed
    after that) and for its result, listener.json.

    -> {"result": dict | None, "pid": int | None, "killed": bool, "error": str}.
    """
    fd = os.open(os.path.join(path, STOP_FILE), os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    pid_info = read_json(os.path.join(path, PID_FILE)) or {}
    pid, start_time = pid_info.get("pid"), pid_info.get("start_time")
    deadline = time.monotonic() + wait
    killed = False
    while True:
        result = read_json(os.path.join(path, RESULT_FILE))
        if pid is None or not process_alive(pid, start_time):
            # It may have written its result between the two looks.
            result = result or read_json(os.path.join(path, RESULT_FILE))
            break
        if time.monotonic() >= deadline:
            try:
                os.kill(pid, signal.SIGKILL)
                killed = True
            except ProcessLookupError:  # it has just exited: look once more
                continue
            break
        time.sleep(0.05)
    if result is not None:
        return {"result": result, "pid": pid, "killed": killed, "error": ""}
    if killed:
        error = (
            f"the listener process (pid {pid}) did not exit within {wait:g} s of the stop file; "
            "it was killed"
        )
    elif pid is not None:
        error = f"the listener process (pid {pid}) ended without leaving its result in {path}"
    else:
        error = f"no listener process was started in {path}"
    tail = log_tail(path)
    return {
        "result": None,
        "pid": pid,
        "killed": killed,
        "error": error + (f"; its log ends with: {tail}" if tail else ""),
    }


def make_dirs(module: AnsibleModule, run_dir: str | None, mode: int, owner: dict) -> None:
    """Make the run directory (when given) and the listener directory in it, or fail."""
    path = module.params["path"]
    try:
        if run_dir:
            make_private_dir(run_dir, mode)
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        module.fail_json(
            msg=f"cannot make the listener directory {path}"
            + (f" in the run directory {run_dir}" if run_dir else "")
            + f": {exc}; rerun with another run id",
            port_owner=owner,
        )


def start(module: AnsibleModule) -> None:
    p = module.params
    path = p["path"]
    owner = port_owner(p["check_port"]) if p["check_port"] is not None else {}
    specs = p["listeners"]
    if owner and not owner["free"]:
        specs = [s for s in specs if s["port"] != p["check_port"]]
    run_dir, run_dir_mode = p["run_dir"], parse_mode(p["run_dir_mode"])
    if run_dir_mode is None:
        module.fail_json(
            msg=f"run_dir_mode {p['run_dir_mode']!r} is not an octal mode such as 0700",
            port_owner=owner,
        )
    problem = private_dir_problem(run_dir) if run_dir else ""
    if problem:
        module.fail_json(msg=problem, port_owner=owner, listeners=[], ports={})
    lock_spec, extra = p["lock"], {}
    if module.check_mode:
        if lock_spec:
            extra["lock"] = look_at_lock(lock_spec["path"])
        if p["python"]:
            extra["python"] = probe_python_read_only(p["python"], p["python_timeout"])
        msg = would_start(p)
        module.exit_json(
            changed=False, listeners=[], ports={}, port_owner=owner, pid=None, msg=msg, **extra
        )
    deadline = time.monotonic() + p["timeout"]
    make_dirs(module, run_dir, run_dir_mode, owner)
    if lock_spec and run_dir:
        owner_record = {k: lock_spec[k] for k in lock_spec if k not in ("path", "lifetime")}
        extra["lock"] = take_lock(lock_spec["path"], run_dir, lock_spec["lifetime"], owner_record)
        if extra["lock"]["refused"]:  # MASTER_PORT is the other run's: nobody probes it
            specs = [s for s in specs if s["port"] != p["check_port"]]
    # A listener of an earlier start in this directory would overwrite this one's result.
    if os.path.exists(os.path.join(path, PID_FILE)):
        stop_listener(path, p["stop_timeout"])
    for name in (STOP_FILE, RESULT_FILE, PID_FILE):
        if os.path.exists(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))
    entries, socks = [], {}
    for spec in specs:
        sock, port, error = bind_listener(spec["address"], spec["port"])
        entries.append(
            {
                "name": spec["name"],
                "address": spec["address"],
                "port": port,
                "expect": spec["expect"],
                "error": error,
                "accepted": [],
                "complete": False,
            }
        )
        if sock is not None:
            socks[spec["name"]] = sock
    ports = {e["name"]: {"port": e["port"], "error": e["error"]} for e in entries}
    pid = None
    python = {"executable": p["python"], "timeout": p["python_timeout"]} if p["python"] else None
    if socks or python:
        pid = spawn_listener(path, entries, socks, deadline, python)
        if not pid:
            module.fail_json(
                msg=f"the listener process died while starting; its log: {log_tail(path)}",
                listeners=entries,
                ports=ports,
                port_owner=owner,
            )
    else:
        write_json(os.path.join(path, RESULT_FILE), result_of(entries, "nothing bound", None))
    module.exit_json(
        changed=True, listeners=entries, ports=ports, port_owner=owner, pid=pid, **extra
    )


def end_run(module: AnsibleModule, failed: bool, **result: Any) -> NoReturn:
    """Exit (or fail) after removing O(remove_run_dir) when asked: the listeners' stop is then
    the pre-flight's last call on the host, and no clean-up call has to follow."""
    run_dir = module.params["remove_run_dir"]
    if run_dir and not module.check_mode:
        problem = remove_private_dir(run_dir)
        result["run_dir_removed"] = not problem
        if problem:
            result["remove_error"] = problem
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def stop(module: AnsibleModule) -> None:
    clock = time.time()
    path = module.params["path"]
    run_dir = module.params["remove_run_dir"]
    if run_dir and os.path.commonpath([run_dir, path]) != run_dir:
        module.fail_json(
            msg=f"remove_run_dir {run_dir} does not hold the listener directory {path}",
            clock=clock,
        )
    if module.check_mode:
        module.exit_json(changed=False, clock=clock, listeners=[], pid=None, msg="check mode")
    if not os.path.isdir(path):
        end_run(
            module,
            True,
            msg=f"no listener directory {path}: the listeners were not started",
            clock=clock,
            listeners=[],
            pid=None,
        )
    outcome = stop_listener(path, module.params["stop_timeout"])
    result = outcome["result"]
    if result is None:
        end_run(
            module,
            True,
            msg=outcome["error"],
            clock=clock,
            listeners=[],
            pid=outcome["pid"],
            killed=outcome["killed"],
        )
    extra = {}
    if result.get("python_run"):
        extra["python"] = python_facts(result["python_run"])
    end_run(
        module,
        False,
        changed=True,
        clock=clock,
        listeners=result["listeners"],
        pid=result["pid"],
        ended=result["ended"],
        timed_out=result["timed_out"],
        killed=outcome["killed"],
        **extra,
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["started", "stopped"], "default": "started"},
            "path": {"type": "path", "required": True},
            "listeners": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "address": {"type": "str", "required": True},
                    "port": {"type": "int", "default": 0},
                    "expect": {"type": "int", "default": 1},
                },
            },
            "check_port": {"type": "int"},
            "run_dir": {"type": "path"},
            "run_dir_mode": {"type": "str", "default": "0700"},
            "python": {"type": "str"},
            "python_timeout": {"type": "float", "default": 60.0},
            "remove_run_dir": {"type": "path"},
            "lock": {
                "type": "dict",
                "options": {
                    "path": {"type": "path", "required": True},
                    "lifetime": {"type": "float", "default": 3600.0},
                    "run_id": {"type": "str", "required": True},
                    "started_at": {"type": "str", "default": ""},
                    "control_host": {"type": "str", "default": ""},
                    "control_user": {"type": "str", "default": ""},
                },
            },
            "timeout": {"type": "float", "default": 60.0},
            "stop_timeout": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )
    if module.params["state"] == "started":
        start(module)
    else:
        stop(module)


if __name__ == "__main__":
    main()
