# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/run_progress.py: how a rank died (torchrun's report, the OOM killer),
the ranks' progress from their rank-<R>.json, the fabric interface and the ring probe on a node."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from nccl_preflight.node.run_progress import (
    describe_exit,
    describe_rank_exits,
    find_oom_line,
    interface_state,
    parse_torchrun_failures,
    process_state,
    rank_progress,
    read_progress,
    stall_evidence,
    tcp_probe,
    touch_watch,
    watcher_gone,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runfaults"


def test_torchrun_report_of_a_sigkilled_rank_names_it_as_the_root_cause() -> None:
    text = (FIXTURES / "torchrun-sigkill.log").read_text()
    failures = parse_torchrun_failures(text)
    assert [f["rank"] for f in failures] == [1, 0]
    root = failures[0]
    assert root["root_cause"] is True
    assert (root["exitcode"], root["signal"], root["pid"], root["local_rank"]) == (
        -9,
        "SIGKILL",
        26566,
        1,
    )
    assert root["text"] == "killed by SIGKILL (signal 9)"
    assert failures[1]["signal"] == "SIGTERM" and failures[1]["root_cause"] is False


def test_no_failure_report_means_no_rank_exits() -> None:
    assert parse_torchrun_failures("W... Sending process 1 closing signal SIGTERM\n") == []


def test_exit_codes_read_as_signals_or_as_the_checks_own_codes() -> None:
    assert describe_exit(-11)["text"] == "killed by SIGSEGV (signal 11)"
    assert describe_exit(143) == {
        "exitcode": 143,
        "signal": "SIGTERM",
        "text": "exited 143 after SIGTERM",
    }
    assert describe_exit(124)["signal"] is None
    assert "watchdog" in describe_exit(124)["text"]
    assert describe_exit(1)["text"] == "exited 1 (a check failed)"
    assert describe_exit(7)["text"] == "exited 7"


def test_oom_line_is_found_by_pid_in_both_kernel_formats() -> None:
    iso = (FIXTURES / "dmesg-oom-iso.txt").read_text()
    line = find_oom_line(iso, 1440763)
    assert line is not None and "Out of memory: Killed process 1440763 (perl)" in line
    assert find_oom_line(iso, 144076) is None  # a prefix of the pid is not the pid
    old = (FIXTURES / "dmesg-oom-old.txt").read_text()
    assert find_oom_line(old, 935) == old.splitlines()[0]
    # Only the summary line (the Killed line scrolled away): still found.
    summary = [x for x in iso.splitlines() if "oom-kill:" in x]
    assert find_oom_line("\n".join(summary), 1440763) == summary[0]


def test_a_sigkill_says_oom_when_the_kernel_log_has_it_and_how_to_look_when_unreadable() -> None:
    text = (FIXTURES / "torchrun-sigkill.log").read_text()
    oom = "[ 1.0] Out of memory: Killed process 26566 (python) total-vm:1kB, anon-rss:1kB"
    root = describe_rank_exits(text, (oom, "/dev/kmsg"))[0]
    assert root["oom"] == oom
    assert "the kernel's OOM killer ended it (/dev/kmsg:" in root["text"]
    clean = describe_rank_exits(text, ("[ 1.0] eth0: link up", "dmesg"))[0]
    assert clean["oom"] is None and "not by the OOM killer" in clean["text"]
    blind = describe_rank_exits(text, ("", "/dev/kmsg: Operation not permitted"))[0]
    assert blind["oom"] is None
    assert "dmesg -T | grep -E 'Killed process 26566 |pid=26566,'" in blind["text"]
    assert "Operation not permitted" in blind["text"]


def test_progress_of_a_rank_follows_the_contract(tmp_path: Path) -> None:
    doc = {
        "status": "running",
        "current_test": "bandwidth_all_reduce",
        "current_size": 4194304,
        "test_index": 12,
        "test_count": 21,
    }
    assert rank_progress(3, doc, 1.5) == {
        "rank": 3,
        "status": "running",
        "test": "bandwidth_all_reduce",
        "size": 4194304,
        "index": 12,
        "count": 21,
        "age_s": 1.5,
    }
    # An older check (no size, no index) still gives its test.
    assert rank_progress(0, {"current_test": "init"}, 0)["size"] is None
    (tmp_path / "rank-3.json").write_text(json.dumps(doc))
    (tmp_path / "rank-1.json").write_text("{half a fi")  # caught mid-write: skipped
    (tmp_path / "rank-1.log").write_text("not a record")
    past = time.time() - 10
    os.utime(tmp_path / "rank-3.json", (past, past))
    found = read_progress(tmp_path)
    assert [p["rank"] for p in found] == [3]
    assert 9 <= found[0]["age_s"] <= 30
    assert read_progress(tmp_path / "missing") == []


def test_interface_state_reads_operstate_and_carrier(tmp_path: Path) -> None:
    up = tmp_path / "fab0"
    up.mkdir()
    (up / "operstate").write_text("up\n")
    (up / "carrier").write_text("1\n")
    assert interface_state("fab0", str(tmp_path)) == {
        "ifname": "fab0",
        "state": "up",
        "carrier": True,
        "reason": "",
    }
    down = tmp_path / "fab1"
    down.mkdir()
    (down / "operstate").write_text("down\n")  # no readable carrier while down
    assert interface_state("fab1", str(tmp_path))["carrier"] is None
    assert interface_state("fab9", str(tmp_path))["state"] == "absent"


def test_tcp_probe_counts_refused_as_reachable() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert tcp_probe("127.0.0.1", port, 2.0)["answer"] == "connected"
    closed = tcp_probe("127.0.0.1", port, 2.0)
    assert closed["ok"] is True and closed["answer"].startswith("refused")


def test_the_watch_file_goes_stale_after_its_own_limit(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    assert watcher_gone(path) is None  # never watched: the run is not ended for it
    touch_watch(path, 15.0)
    assert watcher_gone(path) is None
    reason = watcher_gone(path, now=time.time() + 16)
    assert reason is not None and "stopped watching" in reason
    touch_watch(tmp_path / "gone" / "watch.json", 15.0)  # the run directory was removed
    assert not (tmp_path / "gone").exists()


def test_stall_evidence_is_the_interface_and_a_probe_of_each_target() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        spec = {
            "ifname": "lo",
            "probes": [{"host": "peer", "address": "127.0.0.1", "port": port}],
            "probe_timeout": 2.0,
            "source": "127.0.0.1",
        }
        evidence = stall_evidence(spec)
    assert evidence["interface"]["ifname"] == "lo" and evidence["interface"]["state"] != "absent"
    [probe] = evidence["probes"]
    assert probe["host"] == "peer" and probe["ok"] and probe["answer"] == "connected"
    assert stall_evidence({}) == {"interface": {}, "probes": []}


def test_a_running_rank_whose_process_is_stopped_says_so_with_its_pid(tmp_path: Path) -> None:
    """A real process stopped with SIGSTOP: its state is T and the rank file naming its pid reads
    as ``stopped``; continued, it is no longer; a finished rank or a gone pid never is."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        doc = {"status": "running", "current_test": "barrier", "test_index": 3, "pid": child.pid}
        assert process_state(child.pid) in ("S", "R")
        assert "stopped" not in rank_progress(1, doc, 0)
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 30
        while process_state(child.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rank_progress(1, doc, 0)["stopped"] == {"pid": child.pid, "state": "T"}
        (tmp_path / "rank-1.json").write_text(json.dumps(doc))
        assert read_progress(tmp_path)[0]["stopped"] == {"pid": child.pid, "state": "T"}
        assert "stopped" not in rank_progress(1, {**doc, "status": "passed"}, 0)
        os.kill(child.pid, signal.SIGCONT)
        while process_state(child.pid) == "T" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stopped" not in rank_progress(1, doc, 0)
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) is None
    assert "stopped" not in rank_progress(1, doc, 0)
    assert process_state("12") is None and process_state(True) is None
    # comm with spaces and parentheses: the state follows the last ')'
    fake = tmp_path / "proc" / "77"
    fake.mkdir(parents=True)
    (fake / "stat").write_text("77 (a (b) c) t 1 77 77 0 -1\n")
    assert process_state(77, str(tmp_path / "proc")) == "t"
