# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One validation per master and MASTER_PORT at a time: a lock file on the master node.

The lock is a small JSON file in ``nccl_run_root`` beside the run directories,
``nccl-preflight-lock-<MASTER_ADDR>-<MASTER_PORT>.json``, saying which run holds it (run id, start
time, control host and user, the keeper's pid and start time). It is held by an exclusive
``flock`` of a *keeper*: a small detached process started by the pre-flight's first call on the
master, which owns nothing else and lives until the master's run directory of its run is removed
(the end of the run), the lock file is removed or replaced, or its lifetime ends - then it removes
the file and exits. A lock whose keeper is gone (killed, the node rebooted) has no flock any more:
the next run takes it over and says whose it was.

The decisions are pure functions (``describe_holder``, ``lock_file_name``); the I/O is in
``acquire``, ``peek`` and ``spawn_keeper``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from typing import Any

from .processes import detach, report, start_time

LOCK_PREFIX = "nccl-preflight-lock-"
# How often the keeper looks at its run directory and at the lock file.
KEEPER_POLL_S = 0.2
# A holder that has its flock but has not written its record yet: how long to wait for it.
RECORD_WAIT_S = 2.0


def lock_file_name(master_addr: str, port: int) -> str:
    """The lock's file name for a master address and port (characters a path may not hold in
    an IPv6 address or a hostname become '_')."""
    return f"{LOCK_PREFIX}{re.sub(r'[^0-9A-Za-z.-]', '_', master_addr)}-{int(port)}.json"


def describe_holder(holder: dict[str, Any] | None) -> str:
    """'run <id>, started <time> by <user> on <control host>' from a lock record."""
    if not holder:
        return "a run whose lock record cannot be read"
    who = holder.get("control_user") or "an unknown user"
    where = holder.get("control_host") or "an unknown control host"
    started = holder.get("started_at") or holder.get("locked_at") or "at an unknown time"
    return f"run {holder.get('run_id') or '?'}, started {started} by {who} on {where}"


def _read_record(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _open_lock(path: str, create: bool) -> int:
    """Open the lock file without following a link; refuse anything but a regular file."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file")
    return fd


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` is still the file open on ``fd`` (not removed or replaced)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _holder_of_busy(fd: int) -> dict[str, Any] | None:
    """The record of a lock someone holds; it may be a moment before its holder writes it."""
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        record = _read_record(fd)
        if record is not None or time.monotonic() >= deadline:
            return record
        time.sleep(0.05)


def acquire(path: str) -> dict[str, Any]:
    """Take the lock at ``path`` (an exclusive flock, kept on the returned descriptor).

    -> {"acquired": bool, "fd": int|None, "holder": record of the run holding it (acquired
    false), "stale": record of a run whose keeper was gone (acquired true, taken over) or None,
    "error": why it could not even be looked at}.
    """
    for _ in range(5):
        try:
            fd = _open_lock(path, create=True)
        except OSError as exc:
            why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            return {"acquired": False, "fd": None, "holder": None, "stale": None, "error": why}
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_of_busy(fd)
            os.close(fd)
            return {"acquired": False, "fd": None, "holder": holder, "stale": None, "error": ""}
        if not _same_file(fd, path):  # its keeper removed it between our open and our flock
            os.close(fd)
            continue
        stale = _read_record(fd)
        return {"acquired": True, "fd": fd, "holder": None, "stale": stale, "error": ""}
    return {
        "acquired": False,
        "fd": None,
        "holder": None,
        "stale": None,
        "error": "it was removed and made again while it was being taken (5 tries)",
    }


def peek(path: str) -> dict[str, Any]:
    """Who holds the lock, without taking it or writing anything (check mode).

    -> {"held": bool, "holder": record or None, "stale": record of a lock nobody holds or None}.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {"held": False, "holder": None, "stale": None}
    except OSError as exc:
        return {"held": False, "holder": None, "stale": None, "error": exc.strerror or str(exc)}
    try:
        record = _read_record(fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return {"held": True, "holder": record, "stale": None}
        return {"held": False, "holder": None, "stale": record}
    finally:
        os.close(fd)


def write_record(fd: int, record: dict[str, Any]) -> None:
    """Replace the lock file's content (under its flock) with ``record``."""
    data = json.dumps(record, sort_keys=True).encode("utf-8")
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)


def keeper_should_end(fd: int, path: str, run_dir: str, deadline: float) -> str:
    """Why the keeper ends now ("" while it keeps the lock)."""
    if time.monotonic() >= deadline:
        return "lifetime"
    if not os.path.isdir(run_dir):
        return "run directory removed"
    if not _same_file(fd, path):
        return "lock file removed"
    return ""


def _keeper(fd: int, path: str, run_dir: str, deadline: float, notify: int) -> int:
    """The keeper's life, in the detached process: hold the flock until the run is over."""
    report(notify, {"pid": os.getpid()})
    while not keeper_should_end(fd, path, run_dir, deadline):
        time.sleep(KEEPER_POLL_S)
    if _same_file(fd, path):
        with contextlib.suppress(OSError):
            os.unlink(path)  # still under our flock: nobody else holds this file
    return 0


def spawn_keeper(fd: int, path: str, run_dir: str, lifetime: float) -> int:
    """Start the detached keeper holding the flock on ``fd``; -> its pid (0 when it died)."""
    deadline = time.monotonic() + lifetime

    def body(notify: int) -> int:
        return _keeper(fd, path, run_dir, deadline, notify)

    ready = detach(body, keep={fd})
    return int((ready or {}).get("pid") or 0)


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def lock_result(path: str, outcome: dict[str, Any], record: dict[str, Any] | None) -> dict:
    """The module's ``lock`` result: {path, acquired, refused (held by another run, or it could
    not be taken), took_over, holder, stale, message}."""
    holder, stale = outcome.get("holder"), outcome.get("stale")
    if outcome.get("error"):
        message = f"cannot take the run lock {path}: {outcome['error']}"
    elif not outcome["acquired"]:
        keeper = (holder or {}).get("keeper_pid")
        message = (
            f"another validation of this master and port is running: {describe_holder(holder)}"
            f" (lock {path}" + (f", kept by pid {keeper}" if keeper else "") + ")"
        )
    elif stale:
        message = (
            f"took over the stale run lock {path} of {describe_holder(stale)}: its keeper "
            f"(pid {stale.get('keeper_pid') or '?'}) is gone"
        )
    else:
        message = f"took the run lock {path}"
    return {
        "path": path,
        "acquired": bool(outcome["acquired"]),
        "refused": not outcome["acquired"],
        "took_over": bool(outcome["acquired"] and stale),
        "holder": record if outcome["acquired"] else holder,
        "stale": stale,
        "message": message,
    }


def take(path: str, run_dir: str, lifetime: float, owner: dict[str, Any]) -> dict[str, Any]:
    """Take the lock for this run and hand it to a keeper; -> lock_result()."""
    outcome = acquire(path)
    if not outcome["acquired"]:
        return lock_result(path, outcome, None)
    fd = outcome["fd"]
    try:
        pid = spawn_keeper(fd, path, run_dir, lifetime)
        if not pid:
            with contextlib.suppress(OSError):
                os.unlink(path)
            return lock_result(path, {**outcome, "error": "its keeper died while starting"}, None)
        record = {
            **owner,
            "keeper_pid": pid,
            "keeper_start_time": start_time(pid),
            "locked_at": _iso_now(),
            "run_dir": run_dir,
        }
        write_record(fd, record)
    finally:
        os.close(fd)
    return lock_result(path, outcome, record)


def look(path: str) -> dict[str, Any]:
    """Check mode: what taking the lock would do, without writing anything; -> lock_result()."""
    seen = peek(path)
    outcome = {
        "acquired": not seen["held"] and not seen.get("error"),
        "holder": seen["holder"],
        "stale": seen["stale"],
        "error": seen.get("error", ""),
    }
    result = lock_result(path, outcome, None)
    if result["acquired"]:
        result["acquired"] = False  # nothing was taken: check mode
        result["refused"] = False
        result["message"] = (
            "check mode: would take the run lock "
            + path
            + (f" (a stale lock of {describe_holder(seen['stale'])})" if seen["stale"] else "")
        )
        result["would_take"] = True
    return result
