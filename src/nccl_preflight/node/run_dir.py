# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A run's private directory on a node: make it, or refuse one somebody else could control.

Standard library only: shipped to the nodes inside every module that imports it. Used by the
pre-flight's start (src/nccl_preflight/node/preflight_calls.py, the start call) and by the
launch's start (library/nccl_torchrun.py), so whichever reaches a node first makes the directory
with the same checks.
"""

from __future__ import annotations

import os
import shutil
import stat


def parse_mode(text: str) -> int | None:
    """'0700' or '700' -> 0o700; None when it is not an octal permission mode."""
    try:
        mode = int(text, 8)
    except ValueError:
        return None
    return mode if 0 <= mode <= 0o7777 else None


def bad_file_name(name: str) -> bool:
    return not name or name in (".", "..") or "/" in name or "\0" in name


def directory_problem(path: str, euid: int) -> str:
    """Why an existing path cannot be this run's private directory; '' when it can."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "exists and is not a directory"
    if info.st_uid != euid:
        return f"is owned by uid {info.st_uid}, not by the user running the check (uid {euid})"
    return ""


def private_dir_problem(path: str) -> str:
    """Why ``path`` can be neither found nor made as this run's private directory; '' when it can.

    The message names the path and the fix.
    """
    if not os.path.isabs(path):
        return f"path {path!r} must be absolute"
    if os.path.lexists(path):
        problem = directory_problem(path, os.geteuid())
        if problem:
            return (
                f"{path} {problem}: it cannot be this run's private directory. Remove it, "
                "or set nccl_run_root to a directory only you can write"
            )
        return ""
    parent = os.path.dirname(path.rstrip("/")) or "/"
    if not os.path.isdir(parent):
        return f"{parent} does not exist, so {path} cannot be made in it; check nccl_run_root"
    return ""


def make_private_dir(path: str, mode: int) -> bool:
    """Make ``path`` with exactly ``mode``, or take the directory already there; -> created.

    Call private_dir_problem() first, for its message. What is at ``path`` is checked again here,
    through a descriptor opened without following links (a shared /tmp leaves a window between
    the two): a symbolic link, a non-directory or another user's directory raises
    FileExistsError, and the mode is set on the directory that was checked.
    """
    try:
        os.mkdir(path, mode)
        created = True
    except FileExistsError:
        created = False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:  # ELOOP: a symbolic link; ENOTDIR: not a directory
        raise FileExistsError(f"{path} {directory_problem(path, os.geteuid())}") from exc
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise FileExistsError(
                f"{path} is owned by uid {owner}, not by the user running the check "
                f"(uid {os.geteuid()})"
            )
        os.fchmod(fd, mode)  # mkdir applies the umask; fchmod gives exactly the mode asked for
    finally:
        os.close(fd)
    return created


def remove_private_dir(path: str) -> str:
    """Remove the run's private directory and everything in it; -> '' or why it is still there.

    Only this user's own directory is removed (never through a symbolic link); a missing one is
    already gone.
    """
    if not os.path.lexists(path):
        return ""
    problem = directory_problem(path, os.geteuid())
    if problem:
        return f"{path} {problem}: left in place"
    try:
        shutil.rmtree(path)
    except OSError as exc:
        return f"cannot remove {path}: {exc}"
    return ""
