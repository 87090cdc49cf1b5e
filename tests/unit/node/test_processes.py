# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/processes.py: detach, identity through /proc, ending a tree, atomic JSON,
tails.

Real processes throughout: a detached process that must let go of our descriptors, a tree with a
worker that ignores SIGTERM, a pid recorded with another start time that must never be signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_preflight.node import files as nccl_files
from nccl_preflight.node.processes import (
    descendants,
    detach,
    end_processes,
    is_alive,
    parse_stat,
    proc_stat,
    process_table,
    read_json,
    read_tail,
    report,
    signal_recorded,
    start_time,
    text_tail,
    write_json,
)
from tests.polling import wait_for

# A parent that starts a child in its own session (as torchrun starts its workers); the child
# ignores SIGTERM and prints its pid. The parent says "started" once Popen has returned: until
# then it may hold every signal blocked (CPython's vfork path), so a SIGTERM sent earlier waits.
TREE = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print(os.getpid(), flush=True); time.sleep(600)'], start_new_session=True)\n"
    "print('started', flush=True)\n"
    "time.sleep(600)\n"
)


def test_parse_stat_takes_the_fields_after_the_last_parenthesis() -> None:
    line = "77 (x) (y) z) T 5 6 7 0 -1 4194560 " + " ".join(["0"] * 12) + " 4242 0 0"
    assert parse_stat(line) == {"state": "T", "ppid": 5, "pgid": 6, "sid": 7, "starttime": 4242}
    assert proc_stat(os.getpid())["ppid"] == os.getppid()
    assert proc_stat(2**22 + 3) is None and start_time(2**22 + 3) is None


def test_a_reused_pid_is_never_taken_for_the_recorded_process() -> None:
    """The same pid with another start time is another process: not alive, never signalled."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        real = start_time(sleeper.pid)
        assert real is not None and is_alive(sleeper.pid, real)
        other = real + 1
        assert not is_alive(sleeper.pid, other) and not is_alive(sleeper.pid, None)
        assert signal_recorded(sleeper.pid, other, signal.SIGKILL) is False
        assert end_processes({sleeper.pid: other}, 0) == []
        time.sleep(0.2)
        assert sleeper.poll() is None  # untouched
        assert signal_recorded(sleeper.pid, real, signal.SIGKILL) is True
        assert sleeper.wait(5) == -signal.SIGKILL
        assert not is_alive(sleeper.pid, real)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_tree_is_ended_term_first_then_kill_after_the_grace() -> None:
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    lines = {parent.stdout.readline().strip() for _ in range(2)}  # type: ignore[union-attr]
    child_pid = int((lines - {"started"}).pop())
    try:
        table = process_table()
        tree = {parent.pid: table[parent.pid]["starttime"], **descendants(parent.pid, table)}
        assert child_pid in tree  # it left the session, not the tree
        assert tree[child_pid] == start_time(child_pid)
        begun = time.monotonic()
        ended = end_processes(tree, 1.0)
        took = time.monotonic() - begun
        assert ended == sorted([parent.pid, child_pid])
        assert parent.wait(5) == -signal.SIGTERM  # went at the SIGTERM
        # The child ignores SIGTERM: only the SIGKILL after the grace ended it.
        assert took >= 1.0
        assert wait_for(lambda: not is_alive(child_pid, tree[child_pid]))
        assert end_processes(tree, 1.0) == []  # nothing left: nothing signalled
    finally:
        for pid in (parent.pid, child_pid):
            signal_recorded(pid, start_time(pid), signal.SIGKILL)
        parent.wait()


def test_detach_leaves_our_session_and_descriptors_and_keeps_only_what_it_is_told(
    tmp_path: Path,
) -> None:
    held_r, held_w = os.pipe()  # not kept: the detached process must close its copy
    kept_r, kept_w = os.pipe()  # kept: it writes its answer there
    log = tmp_path / "detached.log"

    def body(ready_fd: int) -> int:
        stat = proc_stat(os.getpid())
        report(ready_fd, {"pid": os.getpid(), "sid": stat["sid"], "cwd": os.getcwd()})
        print("the body ran", flush=True)
        os.write(kept_w, b"kept works")
        os.close(kept_w)
        time.sleep(3)
        return 0

    ready = detach(body, log, keep={kept_w}, ready_timeout=10)
    os.close(held_w)
    os.close(kept_w)
    assert ready is not None and ready["cwd"] == "/"
    pid = ready["pid"]
    assert ready["sid"] != os.getsid(0) and ready["sid"] != pid  # new session, not its leader
    assert proc_stat(pid)["ppid"] != os.getpid()  # not our child: nothing of ours waits for it
    assert os.read(kept_r, 100) == b"kept works"
    # Its copy of the write end was closed: the pipe is at its end while the process still runs.
    assert os.read(held_r, 100) == b"" and proc_stat(pid) is not None
    assert wait_for(lambda: "the body ran" in log.read_text())
    assert log.stat().st_mode & 0o777 == 0o600
    os.close(held_r)
    os.close(kept_r)


def test_a_detached_body_that_raises_reports_nothing_and_logs_its_traceback(
    tmp_path: Path,
) -> None:
    log = tmp_path / "detached.log"

    def body(ready_fd: int) -> int:
        raise RuntimeError("the body failed")

    assert detach(body, log, ready_timeout=10) is None
    assert wait_for(lambda: "RuntimeError: the body failed" in log.read_text())


def test_detach_waits_no_longer_than_its_timeout_for_the_report(tmp_path: Path) -> None:
    def body(ready_fd: int) -> int:
        time.sleep(5)
        return 0

    begun = time.monotonic()
    assert detach(body, tmp_path / "slow.log", ready_timeout=0.5) is None
    assert time.monotonic() - begun < 4


def test_write_json_replaces_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "launch.json"
    write_json(target, {"rc": 0})
    assert read_json(target) == {"rc": 0} and target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(TypeError):
        write_json(target, {"rc": object()})  # cannot be encoded: nothing is written

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(nccl_files.os, "replace", refuse)
    with pytest.raises(OSError):
        write_json(target, {"rc": 1, "big": "x" * 100000})
    assert json.loads(target.read_text()) == {"rc": 0}  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch.json"]  # no temporary left
    assert read_json(tmp_path / "missing.json") is None


def test_tails_keep_the_end(tmp_path: Path) -> None:
    log = tmp_path / "rank-1.log"
    log.write_text("x" * 50 + "Traceback: the end\n")
    data, cut = read_tail(log, 19)
    assert cut and data.endswith(b"Traceback: the end\n") and b"the first 50 of 69" in data
    assert text_tail(log, 19) == "Traceback: the end\n"
    assert text_tail(tmp_path / "none.log") == ""
