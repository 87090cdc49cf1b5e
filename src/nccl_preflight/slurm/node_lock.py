# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""One node-check at a time per node, and the last verdict for one that finds another running.

slurmd starts a HealthCheckProgram every HealthCheckInterval seconds whether or not the previous
one ended; at a short interval on a loaded node they piled up (issue 36: load 30, every torch
import killed at its timeout). So each node-check takes an exclusive ``flock`` on
``<state dir>/node-check-<node>.lock`` for its whole life (the kernel drops it with the last
process holding it, however they end: no stale lock). One that cannot take it at once does not
check: it says that another runs (its pid and for how long) and exits with the last verdict,
kept beside the lock in ``node-check-<node>.json`` with its time, when that verdict is at most
VERDICT_FRESH_S old, else 0. The node's last torch reading lies beside them too
(``node-check-<node>.torch.json``, slurm/node_torch.py).

The state directory is ``/run/nccl-preflight`` for root (slurmd runs both programs as root: a
tmpfs, gone at boot), ``<tmp>/nccl-preflight-<uid>`` for anyone else, or ``--state-dir``; it is
made 0700 and refused when it is a link, not a directory, not ours, or writable by others (the
error names ``--state-dir``). The files in it are small and few: one lock and one state per node
name. Standard library only (it runs in the node bundle).
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from typing import Any

from nccl_preflight.node.processes import read_json, write_json

ROOT_STATE_DIR = "/run/nccl-preflight"
VERDICT_FRESH_S = 600.0  # a busy node-check answers a verdict at most this old, else 0
SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


class StateDirError(ValueError):
    """The state directory cannot be used (a link, not a directory, not ours, open to others)."""


def default_state_dir() -> str:
    """/run/nccl-preflight for root, else <tmp>/nccl-preflight-<uid>."""
    if os.geteuid() == 0:
        return ROOT_STATE_DIR
    return os.path.join(tempfile.gettempdir(), f"nccl-preflight-{os.geteuid()}")


def prepare_state_dir(path: str) -> str:
    """``path`` made (0700) when missing, checked: a real directory of ours that only we may
    write; -> its path. StateDirError, naming --state-dir, otherwise."""
    where = f"--state-dir {path}"
    if not os.path.isabs(path):
        raise StateDirError(f"{where}: not an absolute path")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError as exc:
        raise StateDirError(f"{where}: its parent directory does not exist") from exc
    except OSError as exc:
        raise StateDirError(f"{where}: cannot be made: {exc.strerror or exc}") from exc
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise StateDirError(f"{where}: is a symbolic link")
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"{where}: not a directory")
    if info.st_uid != os.geteuid():
        raise StateDirError(f"{where}: owned by uid {info.st_uid}, not by this user")
    if info.st_mode & 0o022:
        raise StateDirError(
            f"{where}: writable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
            f"chmod go-w {path}"
        )
    return path


def file_stem(node: str) -> str:
    """``node-check-<node>`` with every character but [A-Za-z0-9._-] as '_' (a node name
    comes from the environment: it never names another directory)."""
    return "node-check-" + "".join(c if c in SAFE else "_" for c in node)


class NodeLock:
    """The node's lock and state files (module docstring)."""

    def __init__(self, state_dir: str, node: str) -> None:
        stem = os.path.join(state_dir, file_stem(node))
        self.lock_path, self.state_path = stem + ".lock", stem + ".json"
        self.torch_path = stem + ".torch.json"  # slurm/node_torch.py's kept reading
        self.fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock at once, or say that another node-check holds it (False);
        StateDirError when the lock file cannot be opened. The descriptor stays open (inherited
        by the forks of node_guard: the lock lasts until the last of them exits)."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.lock_path, flags, 0o600)
        except OSError as exc:
            where = f"--state-dir {os.path.dirname(self.lock_path)}"
            raise StateDirError(f"{where}: cannot open {self.lock_path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def state(self) -> dict[str, Any]:
        """The state file's content ({"running": {...}, "last": {...}}), {} when unreadable."""
        try:
            doc = read_json(self.state_path)
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def record_running(self, pid: int) -> str:
        """Note the running node-check (only the lock's holder writes); -> why it could not
        (the state is an aid: a full disk must not stop a check), else ''."""
        return self._write({**self.state(), "running": {"pid": pid, "since": time.time()}})

    def record_verdict(self, verdict: dict[str, Any]) -> str:
        """Keep the verdict that just ended ({exit, verdict, summary, seconds}) with its time;
        -> why it could not, else ''."""
        doc = {k: v for k, v in self.state().items() if k != "running"}
        doc["last"] = {**verdict, "ended": time.time()}
        return self._write(doc)

    def _write(self, doc: dict[str, Any]) -> str:
        try:
            write_json(self.state_path, doc)
        except OSError as exc:
            return f"cannot write {self.state_path}: {exc.strerror or exc}"
        return ""


def fresh_verdict(state: dict[str, Any], now: float | None = None) -> dict[str, Any] | None:
    """The last verdict when it ended at most VERDICT_FRESH_S ago, else None."""
    last = state.get("last")
    if not isinstance(last, dict) or not isinstance(last.get("ended"), (int, float)):
        return None
    age = (time.time() if now is None else now) - float(last["ended"])
    return {**last, "age": age} if 0 <= age <= VERDICT_FRESH_S else None


def running_for(state: dict[str, Any], now: float | None = None) -> tuple[int | None, float | None]:
    """(pid, seconds) of the node-check that holds the lock, as it noted them."""
    running = state.get("running")
    if not isinstance(running, dict) or not isinstance(running.get("since"), (int, float)):
        return None, None
    pid = running.get("pid")
    since = (time.time() if now is None else now) - float(running["since"])
    return (pid if isinstance(pid, int) else None), max(0.0, since)
