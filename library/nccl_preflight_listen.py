#!/usr/bin/python
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold short-lived TCP listeners for the pre-flight reachability probes, in a detached process."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_preflight_listen
short_description: Start and stop the short-lived TCP listeners that peers probe in the pre-flight
description:
  - With O(state=started), makes O(path) (mode 0700) when missing, optionally looks for a process
    already listening on O(check_port), binds one TCP listener per entry of O(listeners)
    (MASTER_PORT on the master, a port the kernel picks from C(net.ipv4.ip_local_port_range) on
    every host) and hands them to a detached listener process (double fork, new session, standard
    streams to C(/dev/null) and C(<path>/listener.log)), so the module, and the SSH session that
    runs it, ends at once. It returns the bound ports; the peers can connect as soon as it returns.
  - The listener process accepts connections until each listener got its
    O(listeners[].expect) connections, C(<path>/listener.stop) appears, O(path) is removed, or
    O(timeout) seconds passed, whichever comes first. It then writes what it saw to
    C(<path>/listener.json) and exits; it never outlives O(timeout).
  - With O(state=stopped), writes C(<path>/listener.stop), waits up to O(stop_timeout) seconds for
    the listener process to exit (kills it after that) and returns what it saw, and this host's
    clock.
  - A listener that cannot bind (address not local, port in use) is reported in the result with
    its error; it does not fail the module, so the other checks still run.
  - Every file lives in O(path) - C(listener.pid), C(listener.stop), C(listener.json),
    C(listener.log).
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
    type: float
    default: 60
  stop_timeout:
    description:
      - Seconds O(state=stopped) waits for the listener process to exit after writing the stop
        file; after that the process is killed and the module fails.
    type: float
    default: 10
attributes:
  check_mode:
    support: partial
    details:
      - In check mode O(state=started) only looks at O(check_port) (read only); no directory is
        made, no listener is held.
      - In check mode O(state=stopped) only reads the clock; no stop file is written.
author:
  - nccl-preflight contributors
"""

EXAMPLES = r"""
- name: Start the listeners (MASTER_PORT on the master, an ephemeral port)
  nccl_preflight_listen:
    state: started
    path: /tmp/nccl-preflight-RUN-node1/preflight
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
    - What listens on O(check_port) (C(free), and C(listeners) as C(nccl_port_owner) returns
      them); empty when O(check_port) is not given.
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
import time
import traceback
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_preflight_proc import (
    port_owner,
    process_alive,
    process_identity,
)

PID_FILE = "listener.pid"
STOP_FILE = "listener.stop"
RESULT_FILE = "listener.json"
LOG_FILE = "listener.log"
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


def result_of(entries: list[dict], ended: str, pid: int | None) -> dict:
    """What the listener process leaves in listener.json."""
    return {
        "pid": pid,
        "listeners": entries,
        "ended": ended,
        "timed_out": ended not in ("complete", "nothing bound"),
    }


def _close_fds_except(keep: set[int]) -> None:
    """Close every file descriptor but ``keep``: an inherited end of the SSH session's pipes
    would keep the session, and so the module's task, open until the listener exits."""
    # The open ones, not range(SC_OPEN_MAX): that limit may be in the millions.
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            os.closerange(int(name), int(name) + 1)  # no error for listdir's own, closed fd


def _listener_process(
    path: str, entries: list[dict], socks: dict[str, socket.socket], deadline: float, notify: int
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
        ended = serve(entries, socks, deadline, os.path.join(path, STOP_FILE))
        # When the run directory is gone the run is over: nobody waits for the result.
        with contextlib.suppress(FileNotFoundError):
            write_json(os.path.join(path, RESULT_FILE), result_of(entries, ended, pid))
        code = 0
    # Catch everything: this forked process must end here, with its traceback in the log, and
    # never unwind into the module's (or AnsiballZ's) code, which would answer a second time.
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def spawn_listener(
    path: str, entries: list[dict], socks: dict[str, socket.socket], deadline: float
) -> int:
    """Serve the bound ``socks`` in a detached process; -> its pid, once it wrote its pid file
    and let go of this process's standard streams (0 when it died before that)."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        _listener_process(path, entries, socks, deadline, write_end)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode("ascii")
    for sock in socks.values():  # the listener process holds its own copies
        sock.close()
    return int(text) if text else 0


def log_tail(path: str, limit: int = 2000) -> str:
    """The end of the listener's log, for error messages."""
    try:
        with open(os.path.join(path, LOG_FILE), encoding="utf-8", errors="replace") as fh:
            return fh.read()[-limit:].strip()
    except FileNotFoundError:
        return ""


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


def start(module: AnsibleModule) -> None:
    p = module.params
    path = p["path"]
    owner = port_owner(p["check_port"]) if p["check_port"] is not None else {}
    specs = p["listeners"]
    if owner and not owner["free"]:
        specs = [s for s in specs if s["port"] != p["check_port"]]
    if module.check_mode:
        module.exit_json(
            changed=False, listeners=[], ports={}, port_owner=owner, pid=None, msg="check mode"
        )
    deadline = time.monotonic() + p["timeout"]
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as exc:
        module.fail_json(msg=f"cannot make the listener directory {path}: {exc}", port_owner=owner)
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
    if socks:
        pid = spawn_listener(path, entries, socks, deadline)
        if not pid:
            module.fail_json(
                msg=f"the listener process died while starting; its log: {log_tail(path)}",
                listeners=entries,
                ports=ports,
                port_owner=owner,
            )
    else:
        write_json(os.path.join(path, RESULT_FILE), result_of(entries, "nothing bound", None))
    module.exit_json(changed=True, listeners=entries, ports=ports, port_owner=owner, pid=pid)


def stop(module: AnsibleModule) -> None:
    clock = time.time()
    path = module.params["path"]
    if module.check_mode:
        module.exit_json(changed=False, clock=clock, listeners=[], pid=None, msg="check mode")
    if not os.path.isdir(path):
        module.fail_json(
            msg=f"no listener directory {path}: the listeners were not started",
            clock=clock,
            listeners=[],
            pid=None,
        )
    outcome = stop_listener(path, module.params["stop_timeout"])
    result = outcome["result"]
    if result is None:
        module.fail_json(
            msg=outcome["error"],
            clock=clock,
            listeners=[],
            pid=outcome["pid"],
            killed=outcome["killed"],
        )
    module.exit_json(
        changed=True,
        clock=clock,
        listeners=result["listeners"],
        pid=result["pid"],
        ended=result["ended"],
        timed_out=result["timed_out"],
        killed=outcome["killed"],
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
