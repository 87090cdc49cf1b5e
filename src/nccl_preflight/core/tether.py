# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The control machine's tether of a node: the SSH session that holds the run's warden there.

The node's side is src/nccl_preflight/node/run_warden.py (its docstring tells why it exists). The
facts call's action plugin (plugins/action/nccl_facts.py), the first call of a run on a node,
builds the command that reaches the node as its connection would (ssh with the inventory's
options, or a local shell) and calls :func:`start_tether`: a small process of its own, in a
session of its own on the control machine (``python -m nccl_preflight.core.tether <run id>``),
that runs the warden there through BOOT (core/stdin_ship.py), reads its answer and passes it
back, then holds the session for the whole ansible-playbook run:

- every :data:`HEARTBEAT_S` it writes a line on the warden's stdin (the warden's lease);
- when ansible-playbook's process is gone, whichever way it ended, or the tether is sent
  SIGTERM, SIGINT or SIGHUP, it closes that stdin: the warden ends the run on the node at once;
- on SIGUSR1 (:func:`release`, the nccl_tether callback plugin, when the playbook ran to its end)
  it writes ``release``: the warden ends whatever the run left running but keeps its directory
  as the run left it (``launch_keep_run_dir``);
- it exits when the session ends (the warden ended, or the connection was lost). The warden's
  last answer (why it ended the run, the longest gap between two heartbeats) is kept in the
  *note* on the control machine (:func:`write_note`, ``reports/<run-id>/<host>/warden.json``):
  a run the warden ended while the control machine was still there (a heartbeat held up past
  the lease) is then reported as lost with the warden's words (:func:`warden_ended`), never as
  a run that ended with nothing to say.

If the tether itself is killed, its stdin pipe to ssh closes and the warden sees the same end.
Nothing of Ansible here: the command to run comes from the action plugin.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The tether process, one per node on the control machine, imports the lease alone (with the
# standard library): the functions that build the warden's command and stream import the rest.
from nccl_preflight.node.run_lease import HEARTBEAT_S, RELEASE, WARDEN_ENTRY

# How long start_tether waits for the warden's answer: an SSH connection (Ansible's timeout,
# 20 s in the shipped ansible.cfg) and a Python start on a loaded node.
READY_TIMEOUT_S = 60.0
# After the warden's stdin was closed or released: how long the tether waits for the session.
END_WAIT_S = 30.0
# What the tether process runs (python -m).
TETHER_MODULE = "nccl_preflight.core.tether"
# How long release() waits for the tethers to be gone.
RELEASE_WAIT_S = 10.0
# How much of the warden's output the tether keeps (its last answer is one short JSON line).
KEEP_BYTES = 8192
# How long a wait that found the run directory gone waits for the tether's note: the warden
# removes the directory first, then ends the processes (GONE_GRACE_S), then answers, and the
# tether on a loaded control machine takes its time to read it.
NOTE_WAIT_S = 30.0


def warden_command(python: str, run_id: str) -> list[str]:
    """The argv that runs the warden on the node (BOOT, with the node's ``python``)."""
    from nccl_preflight.core.stdin_ship import program_command

    return program_command(python, run_id, "run_warden")


def warden_stream(run_dir: str, cache_dir: str | None) -> bytes:
    """What goes on the warden's stdin before the heartbeats: its zipapp, its request."""
    from nccl_preflight.core.stdin_ship import program_stream, program_zipapp

    return program_stream(program_zipapp(WARDEN_ENTRY, cache_dir), {"run_dir": run_dir})


def read_line(fd: int, deadline: float) -> bytes:
    """One line from ``fd`` (without its newline) by ``deadline`` (monotonic); b"" at its end
    or at the deadline."""
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b""
        byte = os.read(fd, 1)
        if not byte:
            return b""
        line += byte
    return line.rstrip(b"\n")


def first_answer(fd: int, deadline: float) -> dict[str, Any] | None:
    """The warden's answer: the first line that is a JSON object (a shell or a ``become``
    plugin may print before it); None at the output's end or the deadline."""
    while True:
        line = read_line(fd, deadline)
        if not line:
            return None
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                return doc


# ------------------------------------------------------------------------------------------------
# In the action plugin's worker: start a tether and read its answer
# ------------------------------------------------------------------------------------------------


def start_tether(
    argv: list[str],
    run_dir: str,
    run_id: str,
    main_pid: int,
    cache_dir: str | None,
    timeout: float = READY_TIMEOUT_S,
    note: str | None = None,
) -> dict[str, Any]:
    """Start a tether running ``argv`` (the command that reaches the node, ending with the
    warden's own: :func:`warden_command`) to watch ``run_dir`` for as long as ``main_pid``
    (ansible-playbook) lives; -> ``{"ready": true, "pid", "warden_pid", "note"}`` or
    ``{"error"}``.
    ``cache_dir``: where the warden's zipapp is kept between runs (core/zipapp.py); ``note``:
    where on this machine the tether keeps the warden's last answer (:func:`write_note`)."""
    spec = {"argv": argv, "main_pid": main_pid, "timeout": timeout, "note": note}
    stream = warden_stream(run_dir, cache_dir)
    try:
        tether = subprocess.Popen(
            [sys.executable, "-m", TETHER_MODULE, run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not in the worker's process group: it outlives the task
        )
    except OSError as exc:
        return {"error": f"cannot start the tether: {exc}"}
    assert tether.stdin is not None and tether.stdout is not None
    with contextlib.suppress(OSError):
        tether.stdin.write(json.dumps(spec).encode() + b"\n" + stream)
        tether.stdin.close()
    answer = first_answer(tether.stdout.fileno(), time.monotonic() + timeout + 5)
    tether.stdout.close()
    if not answer or not answer.get("ready"):
        with contextlib.suppress(OSError):
            tether.kill()
        tether.wait()
        return {"error": (answer or {}).get("error") or "the warden did not answer"}
    return {"ready": True, "pid": tether.pid, "warden_pid": answer.get("pid"), "note": note}


def release(pids: list[int], wait: float = RELEASE_WAIT_S) -> list[int]:
    """The playbook ran to its end: tell every tether of ``pids`` to release its warden (SIGUSR1)
    and wait until they are gone; -> the ones still there after ``wait`` s."""
    for pid in pids:
        if is_tether(pid):  # a tether that already ended: its pid may be another process's now
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + wait
    left = list(pids)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


def is_tether(pid: int) -> bool:
    """``pid`` runs this module (/proc's command line; where there is no /proc, it is taken to)."""
    if not Path("/proc/self").is_dir():
        return alive(pid)
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return TETHER_MODULE.encode() in argv


def alive(pid: int) -> bool:
    """The process exists and has not exited (a tether is reparented when its worker ends; its
    new parent reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): it exists


# ------------------------------------------------------------------------------------------------
# The tether process
# ------------------------------------------------------------------------------------------------


class Ended(Exception):
    """A stop signal came: close the warden's stdin (the run ends on the node)."""


class Tether:
    """The held session: the ssh (or shell) process, its stdin, and what ends it."""

    def __init__(self, session: subprocess.Popen, main_pid: int) -> None:
        self.session = session
        self.main_pid = main_pid
        self.released = False
        self.said = b""  # the end of the warden's output (its last answer comes last)
        try:
            self.main_fd: int | None = os.pidfd_open(main_pid)
        except (AttributeError, OSError):
            self.main_fd = None  # no pidfd (not Linux, or an old kernel): looked at every beat

    def release(self, _signum: int, _frame: Any) -> None:
        self.released = True

    def main_gone(self) -> bool:
        return not alive(self.main_pid)

    def beat(self, line: bytes) -> bool:
        """Write ``line`` to the warden; -> False when the session is gone."""
        assert self.session.stdin is not None
        try:
            self.session.stdin.write(line + b"\n")
            self.session.stdin.flush()
        except OSError:
            return False
        return True

    def hold(self) -> str:
        """Until the session ends or must end; -> why."""
        assert self.session.stdout is not None and self.session.stderr is not None
        watch = select.poll()
        outputs = {self.session.stdout.fileno(), self.session.stderr.fileno()}
        for fd in outputs:
            watch.register(fd, select.POLLIN)
        if self.main_fd is not None:
            watch.register(self.main_fd, select.POLLIN)
        next_beat = time.monotonic()
        while True:
            if self.released:
                self.beat(RELEASE)
                return "released"
            if self.main_gone():
                return "ansible-playbook ended"
            now = time.monotonic()
            if now >= next_beat:
                if not self.beat(b""):
                    return "the session ended"
                next_beat = now + HEARTBEAT_S
            for fd, _event in watch.poll(max(0.0, next_beat - time.monotonic()) * 1000 + 1):
                if fd not in outputs:
                    continue
                data = os.read(fd, 65536)
                if not data:
                    watch.unregister(fd)
                    outputs.discard(fd)
                elif fd == self.session.stdout.fileno():
                    self.keep(data)
            if not outputs:
                return "the session ended"

    def keep(self, data: bytes) -> None:
        self.said = (self.said + data)[-KEEP_BYTES:]

    def close(self) -> None:
        """Close the warden's stdin, wait (bounded) for the session to end and read what the
        warden said last."""
        with contextlib.suppress(OSError):
            assert self.session.stdin is not None
            self.session.stdin.close()
        try:
            self.session.wait(END_WAIT_S)
        except subprocess.TimeoutExpired:
            self.session.kill()
            self.session.wait()
        assert self.session.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            os.set_blocking(self.session.stdout.fileno(), False)
            while data := os.read(self.session.stdout.fileno(), 65536):
                self.keep(data)

    def last_word(self) -> dict[str, Any] | None:
        """The warden's last answer, ``{ended, run_dir_removed, problem, why, longest_gap_s}``,
        or None when it said none (killed, or the connection was lost)."""
        for line in reversed(self.said.splitlines()):
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict) and "why" in doc:
                    return doc
        return None


def write_note(path: str, word: dict[str, Any]) -> None:
    """Keep the warden's last answer ``word`` at ``path`` on the control machine (JSON, written
    whole or not at all), with when it came."""
    folder = os.path.dirname(path) or "."
    with contextlib.suppress(OSError):
        os.makedirs(folder, exist_ok=True)
        partial = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}")
        with open(partial, "w", encoding="utf-8") as out:
            json.dump({**word, "at": time.time()}, out)
        os.replace(partial, path)


def read_note(path: str | os.PathLike, wait: float = 0.0) -> dict[str, Any] | None:
    """The warden's last answer kept at ``path`` (write_note), waiting at most ``wait`` s for it
    to come; None when none came."""
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(Path(path).read_text(encoding="utf-8"))
            if isinstance(doc, dict):
                return doc
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def warden_ended(host: str, word: dict[str, Any] | None) -> str | None:
    """Why the run on ``host`` ended without its results, in its warden's words (its note), or
    None when the warden said nothing of it (or only that it was released)."""
    why = str((word or {}).get("why") or "")
    if not why or why == "released":
        return None
    gap = (word or {}).get("longest_gap_s")
    longest = f" (the longest gap between two heartbeats was {gap:g} s)" if gap else ""
    return f"the run's warden on {host} ended the run: {why}{longest}"


def _raise_ended(signum: int, _frame: Any) -> None:
    raise Ended(signal.Signals(signum).name)


def run(spec: dict[str, Any], stream: bytes, out: Any) -> int:
    """The tether: start the session, send ``stream``, pass the warden's answer on to ``out``,
    hold the session."""
    try:
        session = subprocess.Popen(
            spec["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    except OSError as exc:
        out.write(json.dumps({"error": f"cannot run {spec['argv'][0]}: {exc}"}) + "\n")
        return 1
    tether = Tether(session, int(spec["main_pid"]))
    signal.signal(signal.SIGUSR1, tether.release)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _raise_ended)
    answer: dict[str, Any] = {}
    try:
        tether.beat(stream.rstrip(b"\n"))
        assert session.stdout is not None
        deadline = time.monotonic() + float(spec.get("timeout") or READY_TIMEOUT_S)
        answer = first_answer(session.stdout.fileno(), deadline)
        if answer is None:
            tail = b""
            with contextlib.suppress(OSError, ValueError):
                assert session.stderr is not None
                os.set_blocking(session.stderr.fileno(), False)
                tail = session.stderr.read(2000) or b""
            why = tail.decode("utf-8", "replace").strip() or "no answer"
            answer = {"error": f"the warden did not start: {why}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
        out.close()
        if answer.get("ready"):
            tether.hold()
    except Ended:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(sig, signal.SIG_IGN)
        if answer.get("ready"):
            tether.close()
            word = tether.last_word()
            if word is not None and spec.get("note"):
                write_note(str(spec["note"]), word)
        else:  # no answer in time: give the session up at once
            session.kill()
            session.wait()
    return 0


def main(argv: list[str]) -> int:
    """``python -m nccl_preflight.core.tether <run id>``: the spec as one JSON line on stdin and
    the warden's stream after it, the warden's answer as one JSON line on stdout (then stdout is
    closed). The run id is only there for ``ps``."""
    del argv
    spec = json.loads(sys.stdin.buffer.readline())
    stream = sys.stdin.buffer.read()
    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)  # the worker that started us goes away: hold none of its pipes
    return run(spec, stream, out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
