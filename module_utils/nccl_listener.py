# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's TCP listeners and torch probe, held by a detached process on the node.

Moved out of library/nccl_preflight_listen.py unchanged, so that the first and second calls of
the pre-flight (module_utils/nccl_preflight_calls.py, used by nccl_facts and nccl_tcp_probe) start
and collect them as that module does; the module is a thin wrapper over :func:`start` and
:func:`stop` (module_utils/nccl_preflight_calls.py).
"""

from __future__ import annotations

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

from ansible.module_utils.nccl_files import write_atomically
from ansible.module_utils.nccl_parse import (
    PYTHON_PROBE,
    empty_python_facts,
    python_facts_from_run,
)
from ansible.module_utils.nccl_preflight_proc import process_alive, process_identity

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
