# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""A run's warden on a node: nothing of the run outlives the control machine that started it.

The Ansible path leaves things running on a node between two of its calls: the pre-flight's
listener process and its torch probe (held warm until the launch), the run lock's keeper, the
torchrun supervisor and its tree, and the run directory. Each ends by itself once the run
directory is removed (every path that ends a run removes it), but when the control machine goes
away (Ctrl-C, SIGTERM, SIGKILL, a lost connection) nobody comes to remove it. A lease renewed by
the Ansible calls themselves cannot tell that within seconds: the gap between two calls of a run
grows with the hosts and ``forks`` (minutes at a thousand hosts; BENCHMARKS.md, "Warden").

So the start call on a node (its action plugin, before it starts anything) opens one SSH session
that lasts the whole ansible-playbook run: the control machine's *tether*
(src/nccl_preflight/core/tether.py) runs this program there through BOOT (core/stdin_ship.py)
and writes a heartbeat line on its stdin every ``HEARTBEAT_S``
(src/nccl_preflight/node/run_lease.py, the lease's home). The warden answers one JSON line
(``{"ready": true, "pid"}`` or ``{"error"}``) and then watches that stdin. The controller is gone
when the stdin ends (the tether, its ssh, ansible-playbook or the connection's other end was
killed: the session closed), when no line came for ``LEASE_S`` (a connection cut silently, a
control machine that lost power), or on SIGTERM/SIGINT/SIGHUP (BOOT passes SIGHUP on when
whoever read its output is gone). The warden then ends the run (:func:`end_run`): it reads
every process the run recorded in its directory (the listener's ``listener.pid`` and
``warm.json``, the supervisor's ``torchrun.pids``) with what hangs below them, removes the run
directory (so whatever polls it ends, and the supervisor ends its tree at once, without logs),
sends SIGTERM to all of them and SIGKILL to what is left after :data:`GONE_GRACE_S`. A
``release`` line (the tether's, at the end of a playbook that ran to its end) ends the recorded
processes too but leaves the run directory as the run left it (``launch_keep_run_dir``).

Calls that start something (the pre-flight's start, torchrun's start) hold a *pass*
(:func:`warden_pass`) while they do: a connection to the warden's socket in the abstract
namespace (no file on the node), answered only while the controller is there. A warden whose
controller is gone first closes its socket, then waits (at most :data:`STARTER_WAIT_S`) for the
passes it gave to be handed back, and only then ends the run: a start that was under way when
the controller went cannot start anything after the run was ended, and a start that comes after
is refused. Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

from .listener import PID_FILE as LISTENER_PID_FILE
from .processes import descendants, is_alive, process_table, read_json, signal_quietly
from .run_dir import directory_problem
from .run_lease import LEASE_S, Lease
from .supervisor import GONE_GRACE_S, PIDS_FILE
from .warm_launch import WARM_FILE

# How long a gone controller's warden waits for the starts that hold a pass.
STARTER_WAIT_S = 3.0
# How long a start waits for the warden's answer to its pass.
PASS_WAIT_S = 10.0
# The warden's answer to a pass.
PASS_OK = b"+"
# Record files of a run's processes, looked for in the run directory and one level below it.
RECORDS = (LISTENER_PID_FILE, WARM_FILE, PIDS_FILE)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class WardenGone(Exception):
    """A start found no warden for its run: the controller went away, the run is over."""


class Signalled(Exception):
    """A stop signal came to the warden."""


def warden_address(run_dir: str) -> str:
    """The warden's socket in the abstract namespace: one per run directory and user."""
    digest = hashlib.sha256(os.path.normpath(run_dir).encode()).hexdigest()[:32]
    return f"\0nccl-preflight-warden-{os.geteuid()}-{digest}"


# ------------------------------------------------------------------------------------------------
# Ending a run: its recorded processes and its directory
# ------------------------------------------------------------------------------------------------


def _record_pids(doc: Any) -> dict[int, int | None]:
    """{pid: start time} of one record file: listener.pid/warm.json's {pid, start_time},
    torchrun.pids' supervisor and its recorded processes."""
    if not isinstance(doc, dict):
        return {}
    found: dict[int, int | None] = {}
    if isinstance(doc.get("pid"), int):
        found[doc["pid"]] = doc.get("start_time")
    if isinstance(doc.get("supervisor_pid"), int):
        found[doc["supervisor_pid"]] = doc.get("supervisor_starttime")
    for pid, start in (doc.get("processes") or {}).items():
        if str(pid).isdigit():
            found[int(pid)] = start
    return found


def recorded_processes(run_dir: str) -> dict[int, int]:
    """{pid: start time} of every live process the run recorded in ``run_dir`` (or one level
    below it), with every process below them now."""
    found: dict[int, int | None] = {}
    with contextlib.suppress(OSError):
        below = [e.path for e in os.scandir(run_dir) if e.is_dir(follow_symlinks=False)]
        places = [run_dir, *below]
        for place in places:
            for name in RECORDS:
                with contextlib.suppress(OSError, ValueError):
                    found.update(_record_pids(read_json(os.path.join(place, name))))
    alive = {pid: int(start) for pid, start in found.items() if is_alive(pid, start)}
    return with_descendants(alive)


def with_descendants(recorded: dict[int, int]) -> dict[int, int]:
    """``recorded`` and every process below a live one of them."""
    table = process_table()
    everything = dict(recorded)
    for pid, start in recorded.items():
        if is_alive(pid, start):
            everything.update(descendants(pid, table))
    return everything


def end_processes_now(recorded: dict[int, int], grace: float) -> list[int]:
    """SIGTERM every live one of ``recorded``, SIGKILL what is left after ``grace`` s, and what
    hangs below it then (a child started meanwhile); -> the pids that were signalled."""
    alive = {pid: st for pid, st in recorded.items() if is_alive(pid, st)}
    for pid in alive:
        signal_quietly(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_alive(p, s) for p, s in alive.items()):
        time.sleep(0.05)
    left = with_descendants({p: s for p, s in alive.items() if is_alive(p, s)})
    for pid, start in left.items():
        if is_alive(pid, start):
            signal_quietly(pid, signal.SIGKILL)
    return sorted(set(alive) | set(left))


def remove_run_dir(run_dir: str, tries: int = 20) -> str:
    """Remove the run directory (only this user's own, never through a link), again while
    something writes into it as it goes; -> '' or why it is still there."""
    for _ in range(tries):
        if not os.path.lexists(run_dir):
            return ""
        problem = directory_problem(run_dir, os.geteuid())
        if problem:
            return f"{run_dir} {problem}: left in place"
        shutil.rmtree(run_dir, ignore_errors=True)
        if os.path.lexists(run_dir):
            time.sleep(0.05)
    return f"cannot remove {run_dir}: something kept writing into it"


def end_run(run_dir: str, grace: float = GONE_GRACE_S, keep_dir: bool = False) -> dict[str, Any]:
    """End every process the run recorded and remove its directory (``keep_dir``: leave it);
    -> what was done."""
    recorded = recorded_processes(run_dir)
    problem = "" if keep_dir else remove_run_dir(run_dir)
    ended = end_processes_now(recorded, grace)
    if not keep_dir and not problem:
        problem = remove_run_dir(run_dir)  # a process that wrote into it as it ended
    return {"ended": ended, "run_dir_removed": not keep_dir and not problem, "problem": problem}


# ------------------------------------------------------------------------------------------------
# Passes: a start holds one while it starts something
# ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def warden_pass(run_dir: str, required: bool, wait: float = PASS_WAIT_S) -> Iterator[None]:
    """While a start starts something: hold a pass of ``run_dir``'s warden. WardenGone when
    ``required`` and none answers (the controller went away; nothing may start). Without
    ``required`` (no warden was started for this run) it does nothing."""
    if not required:
        yield
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        sock.settimeout(wait)
        try:
            sock.connect(warden_address(run_dir))
            answer = sock.recv(1)
        except OSError as exc:
            answer, why = b"", exc.strerror or str(exc)
        else:
            why = "it ended the run"
        if answer != PASS_OK:
            raise WardenGone(
                f"the run's warden on this node is gone ({why}): its control machine went away "
                "or the connection to it was lost, and the run was ended here; start a new run"
            )
        yield
    finally:
        sock.close()


# ------------------------------------------------------------------------------------------------
# The warden
# ------------------------------------------------------------------------------------------------


class Warden:
    """The warden's state: its socket, the passes it gave, the lease."""

    def __init__(self, run_dir: str, lease_s: float, stdin_fd: int) -> None:
        self.run_dir = run_dir
        self.stdin_fd = stdin_fd
        self.lease = Lease(lease_s, time.monotonic())
        self.gate: socket.socket | None = socket.socket(
            socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC
        )
        self.gate.bind(warden_address(run_dir))
        self.gate.listen(64)
        self.passes: dict[int, socket.socket] = {}
        self.watching = False  # a stop signal ends watch(); later ones are ignored

    def on_signal(self, signum: int, _frame: Any) -> None:
        """SIGTERM, SIGINT or SIGHUP: the controller is gone (BOOT sends SIGHUP when whoever
        read its output went away, at the same moment as the end of stdin)."""
        if self.watching:
            self.watching = False
            raise Signalled(signal.Signals(signum).name)

    def _poll(self) -> select.poll:
        watch = select.poll()
        watch.register(self.stdin_fd, select.POLLIN)
        if self.gate is not None:
            watch.register(self.gate, select.POLLIN)
        for fd in self.passes:
            watch.register(fd, select.POLLIN)
        return watch

    def _accept(self) -> None:
        assert self.gate is not None
        with contextlib.suppress(OSError):
            conn, _ = self.gate.accept()
            conn.sendall(PASS_OK)
            self.passes[conn.fileno()] = conn

    def _handed_back(self, fd: int) -> None:
        conn = self.passes.pop(fd, None)
        if conn is not None:
            conn.close()

    def watch(self) -> str:
        """Until the controller is gone: give passes, take heartbeats; -> why it is gone ("" for
        a release). Signalled: a stop signal came."""
        self.watching = True
        try:
            return self._watch()
        finally:
            self.watching = False

    def _watch(self) -> str:
        while True:
            ended = None
            woke = self._poll().poll(self.lease.left(time.monotonic()) * 1000 + 1)
            for fd, _event in woke:
                if fd == self.stdin_fd:
                    ended = ended or self.lease.feed(os.read(fd, 4096), time.monotonic())
                elif self.gate is not None and fd == self.gate.fileno():
                    self._accept()
                else:
                    self._handed_back(fd)
            why = self.lease.why_gone(ended, time.monotonic())
            if why is not None:
                return why

    def close_gate(self) -> None:
        """Answer no new pass; wait (at most STARTER_WAIT_S) for the given ones to come back."""
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        deadline = time.monotonic() + STARTER_WAIT_S
        while self.passes and time.monotonic() < deadline:
            watch = select.poll()
            for fd in self.passes:
                watch.register(fd, select.POLLIN)
            for fd, _event in watch.poll(max(0.0, deadline - time.monotonic()) * 1000 + 1):
                self._handed_back(fd)
        for fd in list(self.passes):
            self._handed_back(fd)


def answer(doc: dict[str, Any]) -> None:
    """One JSON line on stdout (a closed stdout is no error: nobody reads any more)."""
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def serve(request: dict[str, Any], stdin_fd: int = 0) -> int:
    """The warden of ``request["run_dir"]``: answer, watch, end the run; -> exit status."""
    run_dir = str(request["run_dir"])
    try:
        warden = Warden(run_dir, float(request.get("lease_s") or LEASE_S), stdin_fd)
    except OSError as exc:
        answer({"error": f"cannot open the warden's socket for {run_dir}: {exc}"})
        return 1
    warden.watching = True  # a stop signal from here on ends the watch
    for sig in STOP_SIGNALS:
        signal.signal(sig, warden.on_signal)
    try:
        answer({"ready": True, "pid": os.getpid()})
        why = warden.watch()
    except Signalled as exc:
        why = f"the warden was sent {exc}"
    warden.close_gate()
    done = end_run(run_dir, keep_dir=why == "")
    answer({**done, "why": why or "released", "longest_gap_s": round(warden.lease.longest_gap, 3)})
    return 0


def read_request(fd: int) -> dict[str, Any]:
    """The request line on ``fd``, read unbuffered: what follows it is the heartbeats'."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise SystemExit("nccl-preflight warden: no request on stdin")
        line += byte
    return json.loads(line)


def main(argv: list[str]) -> int:
    """The program (BOOT's, from the control machine's tether): the request on stdin, then its
    heartbeats. ``argv`` is unused (BOOT's arguments end with the run id)."""
    del argv
    return serve(read_request(0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
