# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Process control on a node: the one home of every module's detached processes.

The contract (docs/design.md points here):

- **Detach** (``detach``): a double fork and ``setsid``, as Ansible's ``async_wrapper``. The first
  child makes a new session and forks again; the grandchild (never a session leader, so it can
  never get a terminal) changes to ``/``, ignores SIGHUP, takes ``/dev/null`` as stdin and a log
  file (or ``/dev/null``) as stdout and stderr, and closes every other open descriptor but the
  ones the caller keeps (an inherited end of the SSH session's pipes would hold the session, and
  so the task, open until the process ends). It then runs ``body(ready_fd)``, which says it is
  running with ``report(ready_fd, {...})``; ``detach`` returns that object once the first child
  exited and the report came (the module's answer waits for nothing else). Both forked processes
  leave with ``os._exit``, never unwinding into the module's (or AnsiballZ's) code; an exception
  in ``body`` ends up, with its traceback, in the log.
- **Identity** (``parse_stat``, ``proc_stat``, ``start_time``, ``is_alive``): a process is its pid
  *and* its start time (field 22 of ``/proc/<pid>/stat``, clock ticks after boot), so a pid the
  kernel reused for another process is never taken for the one recorded. A zombie has exited.
- **Ending a tree** (``process_table``, ``descendants``, ``end_processes``): only ever by recorded
  ``{pid: start time}``, never by name: SIGTERM to every live one, SIGKILL to what is left after
  the grace. A supervisor that is a child subreaper (``become_subreaper``) keeps orphaned workers
  in its tree and collects them (``reap_children``).
- **Files others read** (``write_json``, ``read_json``): replaced atomically (mode 0600, through
  ``src/nccl_preflight/node/files.py.write_atomically``): a reader sees the old file or all of the
  new one.
- **Log tails** (``read_tail`` for the collect, ``text_tail`` for error messages).

Standard library only: shipped to the nodes inside every module that imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from .files import write_atomically

PROC = "/proc"
PR_SET_CHILD_SUBREAPER = 36
# The exit status of a detached process whose body raised.
EXIT_SOFTWARE = 70

# ------------------------------------------------------------------------------------------------
# Detach
# ------------------------------------------------------------------------------------------------


def close_fds_except(keep: set[int]) -> None:
    """Close every open file descriptor but ``keep``."""
    # The open ones, not range(SC_OPEN_MAX): that limit may be in the millions.
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            os.closerange(int(name), int(name) + 1)  # no error for listdir's own, closed fd


def _become_daemon(log_path: str | None, keep: set[int]) -> None:
    """In the grandchild: leave the caller's directory, terminal signals and descriptors."""
    null = os.open(os.devnull, os.O_RDWR)
    out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) if log_path else null
    os.chdir("/")
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    close_fds_except({0, 1, 2} | keep)
    # Python's streams may have been replaced (a test's capture): make them the new 1 and 2.
    sys.stdout, sys.stderr = (
        open(fd, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        for fd in (1, 2)
    )


def _detached_child(
    read_fd: int, write_fd: int, log_path: str | None, keep: set[int], body: Callable[[int], int]
) -> NoReturn:
    """In the first child of fork(): new session, second fork, run ``body`` in the grandchild.

    Never returns: both processes leave with os._exit, so neither runs the caller's cleanup
    (AnsiballZ removes its payload directory, AnsibleModule prints its result: the module's job).
    """
    code = EXIT_SOFTWARE
    try:
        os.close(read_fd)
        os.setsid()
        if os.fork() > 0:
            code = 0
            return
        _become_daemon(log_path, keep | {write_fd})
        code = body(write_fd)
    except BaseException:  # the last word of a detached process: log it, then _exit
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _read_report(read_fd: int, timeout: float | None) -> str:
    """Everything written to the pipe until its last writer closed it, or ``timeout`` passed."""
    chunks = []
    deadline = None if timeout is None else time.monotonic() + timeout
    with os.fdopen(read_fd, "rb") as ready:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([ready], [], [], left)[0]:
                break
            chunk = os.read(ready.fileno(), 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def detach(
    body: Callable[[int], int],
    log_path: str | os.PathLike[str] | None = None,
    keep: Iterable[int] = (),
    ready_timeout: float | None = None,
) -> dict[str, Any] | None:
    """Run ``body(ready_fd)`` in a detached process; -> the object it reported with ``report``.

    None when it reported nothing (it died first, or nothing came in ``ready_timeout`` seconds);
    ``{"error": ...}`` when it reported something that is not a JSON object. ``keep``: descriptors
    the detached process still needs (a listening socket, a locked file). Its stdout and stderr go
    to ``log_path`` (appended, created 0600), else to /dev/null.
    """
    log = os.fspath(log_path) if log_path is not None else None
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _detached_child(read_fd, write_fd, log, set(keep), body)
    os.close(write_fd)
    os.waitpid(pid, 0)
    text = _read_report(read_fd, ready_timeout)
    if not text:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    return doc if isinstance(doc, dict) else {"error": f"unexpected report {text!r}"}


def report(ready_fd: int, doc: dict[str, Any]) -> None:
    """From the detached process: say it runs (or why not); ``detach`` returns ``doc``."""
    os.write(ready_fd, json.dumps(doc).encode())
    os.close(ready_fd)


# ------------------------------------------------------------------------------------------------
# Identity through /proc
# ------------------------------------------------------------------------------------------------


def parse_stat(text: str) -> dict[str, Any]:
    """The fields of a /proc/<pid>/stat line that matter here: state, ppid, pgid, sid, starttime.

    The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    """
    rest = text[text.rindex(")") + 2 :].split()
    return {
        "state": rest[0],
        "ppid": int(rest[1]),
        "pgid": int(rest[2]),
        "sid": int(rest[3]),
        "starttime": int(rest[19]),
    }


def proc_stat(pid: int, proc: str = PROC) -> dict[str, Any] | None:
    """parse_stat of ``pid``; None when there is no such process (or it is not readable)."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), encoding="utf-8") as fh:
            return parse_stat(fh.read())
    except (OSError, ValueError, IndexError):
        return None


def start_time(pid: int, proc: str = PROC) -> int | None:
    """The start time to record with ``pid`` (None when it is gone)."""
    stat = proc_stat(pid, proc)
    return stat["starttime"] if stat else None


def is_alive(pid: int, starttime: int | None, proc: str = PROC) -> bool:
    """True while ``pid`` is the process that started at ``starttime`` and has not exited
    (a zombie, waiting for its parent to reap it, has exited)."""
    stat = proc_stat(pid, proc)
    return (
        stat is not None
        and starttime is not None
        and stat["starttime"] == starttime
        and stat["state"] not in ("Z", "X")
    )


# ------------------------------------------------------------------------------------------------
# Process trees: record, end, reap
# ------------------------------------------------------------------------------------------------


def process_table(proc: str = PROC) -> dict[int, dict[str, Any]]:
    """{pid: parse_stat} of every process now."""
    table = {}
    for entry in os.listdir(proc):
        if entry.isdigit():
            stat = proc_stat(int(entry), proc)
            if stat is not None:
                table[int(entry)] = stat
    return table


def descendants(root: int, table: dict[int, dict[str, Any]]) -> dict[int, int]:
    """{pid: starttime} of every descendant of ``root`` in ``table``."""
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


def signal_quietly(pid: int, sig: int) -> None:
    """Send ``sig``; a process that is gone (or not ours) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def signal_recorded(pid: int, starttime: int | None, sig: int) -> bool:
    """Send ``sig`` to ``pid`` only while it is the recorded process; -> whether it was sent."""
    if not is_alive(pid, starttime):
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def end_processes(
    recorded: dict[int, int], grace: float, reap: bool = False, keep: int | None = None
) -> list[int]:
    """SIGTERM every live recorded process, then SIGKILL what is left after ``grace`` seconds.

    With ``reap``, zombies reparented to us are collected meanwhile (but never ``keep``, the child
    whose exit status Popen still has to read). Returns the pids that were alive and signalled.
    """
    alive = {pid: st for pid, st in recorded.items() if is_alive(pid, st)}
    for pid in alive:
        signal_quietly(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if reap:
            reap_children(keep)
        if not any(is_alive(pid, st) for pid, st in alive.items()):
            break
        time.sleep(0.1)
    for pid, st in alive.items():
        if is_alive(pid, st):
            signal_quietly(pid, signal.SIGKILL)
    if reap:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(is_alive(p, s) for p, s in alive.items()):
            reap_children(keep)
            time.sleep(0.05)
        reap_children(keep)
    return sorted(alive)


def reap_children(keep: int | None = None) -> None:
    """Collect zombies reparented to us (we are a subreaper), but never ``keep``."""
    me = os.getpid()
    for pid, stat in process_table().items():
        if stat["ppid"] == me and stat["state"] == "Z" and pid != keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def become_subreaper() -> bool:
    """Orphans of our tree are reparented to us instead of init (Linux prctl); -> whether it
    worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# ------------------------------------------------------------------------------------------------
# JSON files others read, log tails
# ------------------------------------------------------------------------------------------------


def write_json(path: str | os.PathLike[str], doc: Any, mode: int = 0o600) -> None:
    """Replace ``path`` with ``doc`` as JSON, atomically: readers see all of it or nothing."""
    write_atomically(path, json.dumps(doc, indent=2, sort_keys=True) + "\n", mode)


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON in ``path``; None when there is no such file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
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


def text_tail(path: str | os.PathLike[str], limit: int = 20000) -> str:
    """The last ``limit`` characters of a text file; empty when there is no such file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-limit:]
    except FileNotFoundError:
        return ""
