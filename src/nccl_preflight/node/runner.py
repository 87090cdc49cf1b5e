# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A CommandRunner (node/commands.py) without Ansible: what the node's readers call to find and
run a command, for the Slurm front-end's node check.

``get_bin_path`` looks on PATH, then in the extra directories (``/usr/sbin``, ``/sbin``: not on
a job's PATH on some distributions); ``run_command`` runs an argv list (never a shell) with
``LC_ALL=C`` (the parsers read English output), stdin from /dev/null, and kills the command
(and what it started: its own session) after ``timeout`` seconds, or at ``deadline`` (a
time.monotonic() value: the whole check's end) when that comes first. A killed command answers
rc 124 (coreutils' timeout's) and a reason on stderr, and its argv is kept in ``killed`` (node-check
tells its own slowness from a finding about the node by it); a command that cannot start answers
rc 127 or 126, as a shell would. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")
TIMED_OUT = 124


class SubprocessRunner:
    """Finds and runs commands like AnsibleModule's get_bin_path and run_command, bounded."""

    def __init__(self, timeout: float = 30.0, deadline: float | None = None) -> None:
        self.timeout = timeout
        self.deadline = deadline
        self.calls: list[list[str]] = []
        self.killed: list[list[str]] = []  # the commands killed at the timeout or the deadline

    def get_bin_path(
        self, arg: str, required: bool = False, opt_dirs: Sequence[str] | None = None
    ) -> str | None:
        extra = [d for d in [*(opt_dirs or ()), *SBIN_DIRS] if d]
        path = os.pathsep.join([os.environ.get("PATH", os.defpath), *extra])
        found = shutil.which(arg, path=path)
        if found is None and required:
            raise FileNotFoundError(f"{arg} not found on PATH or in {', '.join(extra)}")
        return found

    def seconds_left(self) -> float:
        """How long a command started now may run."""
        if self.deadline is None:
            return self.timeout
        return max(0.0, min(self.timeout, self.deadline - time.monotonic()))

    def run_command(
        self,
        args: Sequence[str],
        environ_update: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> tuple[int, str, str]:
        argv = [str(a) for a in args]
        self.calls.append(argv)
        env = {**os.environ, **(environ_update or {}), "LC_ALL": "C"}
        seconds = self.seconds_left()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            return 127, "", f"cannot run {argv[0]}: {exc.strerror or exc}"
        except OSError as exc:
            return 126, "", f"cannot run {argv[0]}: {exc.strerror or exc}"
        try:
            out, err = proc.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.killed.append(argv)
            _kill_session(proc)
            out, err = proc.communicate()
            why = f"{' '.join(argv)} did not finish within {seconds:.0f} s; it was killed"
            return TIMED_OUT, _text(out), (_text(err) + "\n" + why).strip()
        return proc.returncode, _text(out), _text(err)


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command and every process of its session (it was started in its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
