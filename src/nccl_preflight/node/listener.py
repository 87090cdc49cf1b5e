# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's listener process: bind, serve, stop.

The pre-flight's start (src/nccl_preflight/node/preflight_calls.py, the start call) binds
the listeners, hands them to a detached process (``processes.detach``) that
accepts connections until each listener got its expected ones, the stop file appears, the
directory is removed or the deadline passes, runs the torch probe meanwhile, and leaves what it
saw in ``listener.json``; the stop (inside the probe call) collects it. Every file lives in the
listener's directory. Standard library only: shipped to the nodes inside the modules that import
src/nccl_preflight/node/preflight_calls.py.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import time

from .parse import (
    PYTHON_PROBE,
    empty_python_facts,
    python_facts_from_run,
)
from .processes import (
    detach,
    is_alive,
    read_json,
    report,
    signal_recorded,
    start_time,
    text_tail,
    write_json,
)
from .warm_launch import hold
from .warm_torchrun import READY_NAME, held, wait_ready, warm_argv

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


def bind_all(specs: list[dict]) -> tuple[list[dict], dict[str, socket.socket]]:
    """Bind every listener of ``specs``; -> (the entries the result lists, the bound sockets by
    name). A listener that cannot bind has its error in its entry and no socket."""
    entries, socks = [], {}
    for spec in specs:
        sock, port, error = bind_listener(spec["address"], spec["port"])
        entries.append(
            {
                "name": spec["name"],
                "address": spec["address"],
                "port": port,
                "connections": spec["connections"],
                "error": error,
                "accepted": [],
                "complete": False,
            }
        )
        if sock is not None:
            socks[spec["name"]] = sock
    return entries, socks


def _accept(sel: selectors.BaseSelector, key: selectors.SelectorKey, entry: dict) -> bool:
    """Accept one connection waiting on ``key``'s socket and count it in ``entry``; stop
    listening there once it has its expected ones. -> False when none was waiting."""
    try:
        conn, peer = key.fileobj.accept()
    except BlockingIOError:
        return False
    conn.close()
    entry["accepted"].append(peer[0])
    if len(entry["accepted"]) >= entry["connections"]:
        entry["complete"] = True
        sel.unregister(key.fileobj)
    return True


def _drain(sel: selectors.BaseSelector, by_name: dict[str, dict]) -> None:
    """Count the connections the kernel already completed (in the backlog) but this process
    was not scheduled to accept yet: their peers saw connect() succeed. Does not wait."""
    for key in list(sel.get_map().values()):
        entry = by_name[key.data]
        while not entry["complete"] and _accept(sel, key, entry):
            pass


def _why_end(deadline: float, stop_file: str | None, run_dir: str) -> str:
    """Why serving ends now, or "" to go on."""
    if deadline - time.monotonic() <= 0:
        return "timeout"
    if stop_file and os.path.exists(stop_file):
        return "stop file"
    if run_dir and not os.path.isdir(run_dir):
        return "run directory removed"
    return ""


def serve(
    entries: list[dict], socks: dict[str, socket.socket], deadline: float, stop_file: str | None
) -> str:
    """Accept until every listener has its expected connections, the deadline passes, the stop
    file appears or its directory is removed; close every socket. A connection already waiting
    when it ends still counts.

    -> why it ended: "complete", "timeout", "stop file" or "run directory removed".
    """
    sel = selectors.DefaultSelector()
    by_name = {e["name"]: e for e in entries}
    for name, sock in socks.items():
        sel.register(sock, selectors.EVENT_READ, name)
    run_dir = os.path.dirname(stop_file) if stop_file else ""
    try:
        while sel.get_map():
            ended = _why_end(deadline, stop_file, run_dir)
            if ended:
                _drain(sel, by_name)
                return ended if sel.get_map() else "complete"
            left = deadline - time.monotonic()
            for key, _ in sel.select(timeout=max(0.0, min(left, POLL_S))):
                _accept(sel, key, by_name[key.data])
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


def start_python_probe(
    path: str, python: str, ready: str | None = None
) -> tuple[subprocess.Popen | None, str]:
    """Start ``python -c PYTHON_PROBE``, its streams to files in ``path``; -> (process, error).
    With ``ready``, warm (node/warm_torchrun.py): it holds on after its answer, in its own
    session, its stdin a pipe for its go."""
    argv = warm_argv(python, PYTHON_PROBE, ready) if ready else [python, "-c", PYTHON_PROBE]
    try:
        with (
            open(os.path.join(path, PROBE_OUT), "wb") as out,
            open(os.path.join(path, PROBE_ERR), "wb") as err,
        ):
            process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if ready else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=bool(ready),
            )
    except OSError as exc:
        return None, f"cannot run {python}: {exc.strerror or exc}"
    return process, ""


def finish_python_probe(
    path: str,
    python: str,
    process: subprocess.Popen | None,
    error: str,
    deadline: float,
    ready: str | None = None,
) -> dict:
    """Wait for the probe until ``deadline`` (monotonic; killed then) and read what it printed;
    a warm probe (node/warm_torchrun.py) only until it marked ``ready``: it holds on.

    -> {"executable", "rc", "stdout", "stderr", "error"}; error is set when it could not start
    or was killed.
    """
    rc = None
    if process is not None:
        if ready:
            rc = wait_ready(process, ready, deadline)
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rc = process.wait(timeout=max(0.0, deadline - time.monotonic()))
        if rc is None:
            process.kill()
            process.wait()
            error = f"{python} -c <probe> (import torch) did not finish in time; it was killed"
    return {
        "executable": python,
        "rc": rc,
        "stdout": text_tail(os.path.join(path, PROBE_OUT)),
        "stderr": text_tail(os.path.join(path, PROBE_ERR), 2000),
        "error": error,
    }


def run_python_probe(python: str, timeout: float) -> dict:
    """Run ``python -c PYTHON_PROBE`` here and now, at most ``timeout`` s; -> {rc, stdout, stderr,
    error} as :func:`finish_python_probe` gives them (the facts call, which needs torch.xpu
    before the listeners start, runs the probe itself and hands the run to the listener)."""
    return probe_python(python, timeout)[0]


def probe_python(python: str, timeout: float) -> tuple[dict, bool]:
    """One run of ``python -c PYTHON_PROBE``, at most ``timeout`` s; -> ({rc, stdout, stderr,
    error}, whether it was killed at the bound)."""
    try:
        done = subprocess.run(
            [python, "-c", PYTHON_PROBE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=max(0.0, timeout),
            check=False,
        )
    except subprocess.TimeoutExpired:
        error = (
            f"{python} -c <probe> (import torch) did not finish in time; it was killed after "
            f"{timeout:.0f} s"
        )
        return {"rc": None, "stdout": "", "stderr": "", "error": error}, True
    except OSError as exc:
        error = f"cannot run {python}: {exc.strerror or exc}"
        return {"rc": None, "stdout": "", "stderr": "", "error": error}, False
    run = {"rc": done.returncode, "stdout": done.stdout[-20000:], "stderr": done.stderr[-2000:]}
    return {**run, "error": ""}, False


def python_facts(python_run: dict) -> dict:
    """The python fact (as nccl_facts returns it) from the probe run in listener.json."""
    executable = python_run["executable"]
    if python_run["error"] or python_run["rc"] is None:
        return empty_python_facts(python_run["error"] or "the probe did not run", executable)
    return python_facts_from_run(
        executable, python_run["rc"], python_run["stdout"], python_run["stderr"]
    )


def _listener_body(
    path: str,
    entries: list[dict],
    socks: dict[str, socket.socket],
    deadline: float,
    python: dict | None,
    notify: int,
) -> int:
    """The detached listener process: record itself, serve, run the probe, leave the result."""
    os.umask(0o077)
    pid = os.getpid()
    write_json(os.path.join(path, PID_FILE), {"pid": pid, "start_time": start_time(pid)})
    report(notify, {"pid": pid})
    probe, probe_error = None, ""
    # "done": the facts call already ran the probe (it needed torch.xpu too): its run, as is.
    done = (python or {}).get("done")
    # "warm": a launch follows; the probe holds on to become torchrun (node/warm_launch.py).
    ready = os.path.join(path, READY_NAME) if python and python.get("warm") and not done else None
    if python and not done:
        probe, probe_error = start_python_probe(path, python["executable"], ready)
        probe_deadline = min(deadline, time.monotonic() + python["timeout"])
    stop_file = os.path.join(path, STOP_FILE)
    ended = serve(entries, socks, deadline, stop_file) if socks else "nothing bound"
    python_run = None
    if done:
        python_run = {"executable": python["executable"], "error": "", **done}
    elif python:
        if ended == "run directory removed":
            probe_deadline = time.monotonic()  # nobody waits for it any more
        python_run = finish_python_probe(
            path, python["executable"], probe, probe_error, probe_deadline, ready
        )
    holds = probe is not None and ready is not None and held(probe, ready)
    # When the run directory is gone the run is over: nobody waits for the result.
    with contextlib.suppress(FileNotFoundError):
        result = {**result_of(entries, ended, pid, python_run), "holds": holds}
        write_json(os.path.join(path, RESULT_FILE), result)
    if holds:  # this process stays, to become the run's supervisor (or to let the probe go)
        assert probe is not None and python is not None
        return hold(path, probe, python["executable"], deadline)
    return 0


def spawn_listener(
    path: str,
    entries: list[dict],
    socks: dict[str, socket.socket],
    deadline: float,
    python: dict | None = None,
) -> int:
    """Serve the bound ``socks`` (and run the ``python`` probe, {executable, timeout}, unless it
    holds the run already done: {done: {rc, stdout, stderr, error}}) in a detached process; -> its
    pid, once it wrote its pid file and let go of this process's standard streams (0 when it died
    before that)."""

    def body(notify: int) -> int:
        return _listener_body(path, entries, socks, deadline, python, notify)

    ready = detach(body, os.path.join(path, LOG_FILE), keep={s.fileno() for s in socks.values()})
    for sock in socks.values():  # the listener process holds its own copies
        sock.close()
    return int((ready or {}).get("pid") or 0)


def log_tail(path: str, limit: int = 2000) -> str:
    """The end of the listener's log, for error messages."""
    return text_tail(os.path.join(path, LOG_FILE), limit).strip()


def clear_previous(path: str, stop_timeout: float) -> None:
    """Stop a listener of an earlier start in ``path`` (it would overwrite this one's result)
    and remove its files."""
    if os.path.exists(os.path.join(path, PID_FILE)):
        stop_listener(path, stop_timeout)
    for name in (STOP_FILE, RESULT_FILE, PID_FILE):
        if os.path.exists(os.path.join(path, name)):
            os.unlink(os.path.join(path, name))


def holds_probe(path: str) -> bool:
    """The listener process ended its listening and holds the warm probe for the launch
    (node/warm_launch.py): its result is written, it goes on."""
    return bool((read_json(os.path.join(path, RESULT_FILE)) or {}).get("holds"))


def stop_listener(path: str, wait: float) -> dict:
    """Write the stop file and wait up to ``wait`` s for the listener process to exit (killed
    after that) and for its result, listener.json.

    -> {"result": dict | None, "pid": int | None, "killed": bool, "error": str}.
    """
    fd = os.open(os.path.join(path, STOP_FILE), os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    pid_info = read_json(os.path.join(path, PID_FILE)) or {}
    pid, started = pid_info.get("pid"), pid_info.get("start_time")
    deadline = time.monotonic() + wait
    killed = False
    while True:
        result = read_json(os.path.join(path, RESULT_FILE))
        if (result or {}).get("holds"):
            break  # it goes on holding the warm probe for the launch (holds_probe)
        if pid is None or not is_alive(pid, started):
            # It may have written its result between the two looks.
            result = result or read_json(os.path.join(path, RESULT_FILE))
            break
        if time.monotonic() >= deadline:
            if not signal_recorded(pid, started, signal.SIGKILL):  # it has just exited: look again
                continue
            killed = True
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
