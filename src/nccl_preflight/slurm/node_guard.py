# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""Every process node-check starts ends with it, whichever way it ends.

slurmd runs a HealthCheckProgram (and a Prolog) as the leader of a process group of its own and,
after 60 s, ends it with ``killpg(SIGTERM)`` and ``killpg(SIGKILL)`` 10 ms later
(src/common/run_command.c); a person ends it with Ctrl-C (SIGINT to the terminal's group), or
kills its pid. The commands node-check runs have sessions of their own (node/runner.py: its
timeout ends a command's whole tree), so none of these reaches them, and a torch probe or a
``dcgmi`` killed with nothing left to wait for it went on alone for minutes.

So ``run_guarded`` runs the work two forks down, under a guard that none of those signals
reaches:

    node-check (slurmd's child, the caller)   waits for the guard's answer on a pipe
      guard     its own process group, a child subreaper (node/processes.py become_subreaper):
                whatever the work starts, and whatever that leaves behind, stays below it
        work    back in the caller's process group (Slurm's killpg and Ctrl-C reach it), does
                the check and prints it

The guard waits for the work's end or the caller's: a signal to the caller (it tells the guard,
which ends the work at once) or the caller's death (the pipe from it reaches its end: SIGKILL,
Slurm's killpg). Either way it then ends every process still below it, found through /proc
(node/processes.py descendants, end_processes: SIGTERM, SIGKILL after GRACE_S), answers the
caller and exits. Only what was started below this node-check is ever signalled. Standard
library only (it runs in the node bundle).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

from nccl_preflight.node.processes import (
    become_subreaper,
    descendants,
    end_processes,
    process_table,
    reap_children,
)

GRACE_S = 1.0  # SIGTERM to what is left, SIGKILL after this
POLL_S = 0.2  # how often the guard looks at the work while the caller is there
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
EXIT_SOFTWARE = 70  # the work raised


@dataclass
class Ending:
    """How the guarded work ended. ``code``: its exit status (None: it did not exit by itself);
    ``signal``: the signal that ended it, or that the caller received (then ``stopped``);
    ``ended``: how many processes left below the guard it had to end."""

    code: int | None = None
    signal: int | None = None
    stopped: bool = False
    ended: int = 0

    def why(self) -> str:
        """Why the work did not finish, in words; empty when it did."""
        if self.code is not None:
            return ""
        name = signal.Signals(self.signal).name if self.signal else "an unknown cause"
        if self.stopped:
            return f"node-check was stopped by {name}"
        if self.signal is None:
            return "node-check's process was killed"
        return f"node-check's work was ended by {name}"


def _work(work: Callable[[], int], pgid: int, keep: tuple[int, ...]) -> NoReturn:
    """The work's process: back in the caller's group, default signal handling, and out with
    os._exit (never through the caller's code, nor waiting for threads left running)."""
    for fd in keep:
        os.close(fd)
    with contextlib.suppress(OSError):  # the caller's group is gone: the guard ends this soon
        os.setpgid(0, pgid)
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    code = EXIT_SOFTWARE
    try:
        code = work()
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(code)


def _end_below(worker: int | None) -> int:
    """End every process below this one (the guard); -> how many were alive. The work's own
    zombie stays for our waitpid."""
    below = descendants(os.getpid(), process_table())
    end_processes(below, GRACE_S, reap=True, keep=worker)
    reap_children(worker)
    return len(below)


def _caller_said(ctl: int) -> tuple[bool, int | None]:
    """(whether the caller is gone or asked to stop, the signal it received)."""
    try:
        data = os.read(ctl, 64)
    except OSError:
        return True, None
    if not data:
        return True, None  # the caller's end of the pipe closed: it died
    text = data.decode("ascii", "replace").split()
    return True, int(text[0]) if text and text[0].isdigit() else None


class _GuardStopped(Exception):
    """SIGTERM to the guard itself: end everything below, as when the caller stops."""


def _guard_stopped(_signum: int, _frame: object) -> None:
    raise _GuardStopped


def _wait(worker: int, ctl: int) -> tuple[Ending, bool]:
    """Until the work exits or the caller is gone or stops; -> (how the work ended, whether
    its exit was collected)."""
    poller = select.poll()
    poller.register(ctl, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        done, status = os.waitpid(worker, os.WNOHANG)
        if done and not os.WIFSIGNALED(status):
            return Ending(code=os.waitstatus_to_exitcode(status)), True
        if done:  # a signal to the caller's group (Ctrl-C, Slurm's killpg) ended it: the caller's?
            stop, sig = _caller_said(ctl) if poller.poll(50) else (False, None)
            if stop and sig is not None:
                return Ending(signal=sig, stopped=True), True
            return Ending(signal=os.WTERMSIG(status)), True
        if poller.poll(POLL_S * 1000):
            stop, sig = _caller_said(ctl)
            if stop:
                return Ending(signal=sig, stopped=sig is not None), False


def _guard(
    work: Callable[[], int],
    on_unfinished: Callable[[Ending], None],
    ctl: int,
    answer: int,
    pgid: int,
) -> NoReturn:
    """The guard's process; see the module docstring."""
    os.setpgid(0, 0)  # out of the caller's group: Slurm's killpg and Ctrl-C spare it
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _guard_stopped)
    become_subreaper()
    worker = os.fork()
    if worker == 0:
        _work(work, pgid, (ctl, answer))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the caller's output closes when the caller and the work are done
        os.dup2(devnull, fd)
    ending, collected = Ending(), False
    try:
        try:
            ending, collected = _wait(worker, ctl)
        except _GuardStopped:
            ending = Ending(signal=signal.SIGTERM, stopped=True)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # now nothing stops the clean-up
        ending.ended = _end_below(None if collected else worker)
        if not collected:
            _, status = os.waitpid(worker, 0)
            if os.WIFEXITED(status) and ending.signal is None and not ending.stopped:
                ending.code = os.WEXITSTATUS(status)
        if ending.code is None:
            on_unfinished(ending)
    except BaseException:
        ending.ended += _end_below(None)
    with contextlib.suppress(OSError):  # the caller is gone
        os.write(answer, (json.dumps(ending.__dict__) + "\n").encode())
    os._exit(0)


def _read_answer(answer: int) -> Ending:
    data = b""
    while True:
        chunk = os.read(answer, 4096)
        if not chunk:
            break
        data += chunk
    try:
        return Ending(**json.loads(data.decode()))
    except (ValueError, TypeError):
        return Ending()


def run_guarded(work: Callable[[], int], on_unfinished: Callable[[Ending], None]) -> Ending:
    """Run ``work()`` (-> an exit status) under the guard (module docstring); -> how it ended.
    ``on_unfinished(ending)`` runs in the guard when the work did not exit by itself (stopped,
    killed, or its caller died), after everything below was ended. On SIGTERM, SIGINT or SIGHUP
    this process asks the guard to end the work and waits for its answer. Call it with no other
    thread running (it forks)."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    ctl_read, ctl_write = os.pipe()
    answer_read, answer_write = os.pipe()
    pgid = os.getpgrp()
    guard = os.fork()
    if guard == 0:
        os.close(ctl_write)
        os.close(answer_read)
        _guard(work, on_unfinished, ctl_read, answer_write, pgid)
    os.close(ctl_read)
    os.close(answer_write)
    received: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if not received:
            received.append(signum)
            with contextlib.suppress(OSError):
                os.write(ctl_write, f"{signum}\n".encode())

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        ending = _read_answer(answer_read)
        os.waitpid(guard, 0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(answer_read)
        os.close(ctl_write)
    if received and ending.code is None:
        ending.signal, ending.stopped = received[0], True
    return ending
