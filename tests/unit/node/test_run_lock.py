# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The run lock on the master (src/nccl_preflight/node/run_lock.py): one validation per master and
port.

Real flocks, a real detached keeper process and real /proc, in a temporary directory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import pytest
from ansible.module_utils.nccl_preflight.node.processes import is_alive
from ansible.module_utils.nccl_preflight.node.run_lock import (
    describe_holder,
    lock_file_name,
    look,
    take,
)
from nccl_run_owner import nccl_run_owner, started_at

from tests.polling import wait_for
from tests.ports import free_port
from tests.preflight_calls import start_call, stop_call

OWNER = {
    "run_id": "20261123T013002-abc123",
    "started_at": "2026-11-23T01:30:02Z",
    "control_host": "ctl",
    "control_user": "alice",
}


@pytest.fixture
def run_dir(tmp_path: Path):
    path = tmp_path / "nccl-preflight-RUN-node1"
    path.mkdir()
    lock = tmp_path / lock_file_name("10.0.0.11", 29500)
    yield path, lock
    if lock.is_file() and not lock.is_symlink():  # end a keeper a failed test left behind
        with contextlib.suppress(ValueError, OSError):
            os.kill(json.loads(lock.read_text())["keeper_pid"], signal.SIGKILL)


def test_a_second_run_is_refused_naming_the_first_and_the_end_of_the_run_frees_it(
    run_dir,
) -> None:
    path, lock = run_dir
    first = take(str(lock), str(path), 60, OWNER)
    assert first["acquired"] and not first["refused"] and not first["took_over"]
    keeper = first["holder"]["keeper_pid"]
    assert is_alive(keeper, first["holder"]["keeper_start_time"])
    assert json.loads(lock.read_text())["run_id"] == OWNER["run_id"]
    assert lock.stat().st_mode & 0o777 == 0o600

    second = take(str(lock), str(path), 60, {**OWNER, "run_id": "second"})
    assert second["refused"] and not second["acquired"]
    for part in ("20261123T013002-abc123", "2026-11-23T01:30:02Z", "alice", "ctl", str(keeper)):
        assert part in second["message"]
    assert json.loads(lock.read_text())["run_id"] == OWNER["run_id"]  # untouched

    path.rmdir()  # the run's directory on the master goes: the run is over
    assert wait_for(lambda: not lock.exists())
    assert wait_for(lambda: not is_alive(keeper, first["holder"]["keeper_start_time"]))
    path.mkdir()
    third = take(str(lock), str(path), 60, {**OWNER, "run_id": "third"})
    assert third["acquired"] and not third["took_over"]
    path.rmdir()
    assert wait_for(lambda: not lock.exists())


def test_a_lock_whose_keeper_is_gone_is_taken_over_and_named(run_dir) -> None:
    path, lock = run_dir
    first = take(str(lock), str(path), 60, OWNER)
    keeper = first["holder"]
    os.kill(keeper["keeper_pid"], signal.SIGKILL)  # the file stays, its flock goes
    assert wait_for(lambda: not is_alive(keeper["keeper_pid"], keeper["keeper_start_time"]))
    assert lock.exists()
    second = take(str(lock), str(path), 60, {**OWNER, "run_id": "second"})
    assert second["acquired"] and second["took_over"]
    assert "stale" in second["message"] and OWNER["run_id"] in second["message"]
    assert str(first["holder"]["keeper_pid"]) in second["message"]
    assert json.loads(lock.read_text())["run_id"] == "second"
    path.rmdir()
    assert wait_for(lambda: not lock.exists())


def test_the_keeper_gives_the_lock_up_at_its_lifetime_and_when_the_file_is_removed(
    run_dir,
) -> None:
    path, lock = run_dir
    take(str(lock), str(path), 0.5, OWNER)
    assert wait_for(lambda: not lock.exists(), 5)
    first = take(str(lock), str(path), 60, OWNER)
    lock.unlink()
    keeper = first["holder"]
    assert wait_for(lambda: not is_alive(keeper["keeper_pid"], keeper["keeper_start_time"]))


def test_a_link_at_the_lock_path_is_refused_and_left_alone(run_dir, tmp_path: Path) -> None:
    path, lock = run_dir
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    lock.symlink_to(target)
    result = take(str(lock), str(path), 60, OWNER)
    assert result["refused"] and "symbolic link" in result["message"]
    assert target.read_text() == "keep" and lock.is_symlink()


def test_check_mode_looks_without_taking_or_writing(run_dir) -> None:
    path, lock = run_dir
    free = look(str(lock))
    assert not free["refused"] and free["would_take"] and not lock.exists()
    take(str(lock), str(path), 60, OWNER)
    held = look(str(lock))
    assert held["refused"] and OWNER["run_id"] in held["message"]
    path.rmdir()
    assert wait_for(lambda: not lock.exists())


def test_names_and_descriptions() -> None:
    assert lock_file_name("fe80::1%eth0", 29500) == "nccl-preflight-lock-fe80__1_eth0-29500.json"
    assert describe_holder(None) == "a run whose lock record cannot be read"
    assert started_at("20261123T013002-abc123") == "2026-11-23T01:30:02Z"
    assert started_at("my-run", now=0) == "1970-01-01T00:00:00Z"
    owner = nccl_run_owner("my-run")
    assert owner["run_id"] == "my-run" and owner["control_host"] and owner["control_user"]


def test_the_master_port_check_names_the_run_holding_the_lock_or_the_stale_one_taken_over() -> None:
    from nccl_preflight.core.preflight.host_checks import check_master_port_free

    base = {
        "host": "node1",
        "master_port": 29500,
        "port_owner": {"free": True, "listeners": []},
        "listeners": {"listeners": [{"name": "master", "error": ""}]},
    }
    refused = {
        "refused": True,
        "path": "/tmp/l.json",
        "message": "another validation ... alice",
        "holder": {"keeper_pid": 4242},
    }
    got = check_master_port_free({"node1": {**base, "run_lock": refused}}, "node1", "node1")
    assert got["status"] == "failed" and "alice" in got["message"] and "29500" in got["message"]
    assert "/tmp/l.json" in got["hint"] and "kill 4242" in got["hint"]
    stale = {"refused": False, "took_over": True, "message": "took over the stale run lock X"}
    got = check_master_port_free({"node1": {**base, "run_lock": stale}}, "node1", "node1")
    assert got["status"] == "passed" and "took over the stale run lock X" in got["message"]
    got = check_master_port_free({"node1": base}, "node1", "node1")
    assert got["status"] == "passed" and got["message"] == "node1: MASTER_PORT 29500 is free"


def test_the_listeners_start_leaves_master_port_to_the_run_holding_the_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The facts call's pre-flight start with lock: the first run takes it and binds
    MASTER_PORT; a second run (another run directory) is refused and binds no master listener,
    so none of its probes can reach the first run's port; check mode only looks."""
    port = free_port()
    lock = tmp_path / lock_file_name("127.0.0.1", port)

    def start(run: str, check_mode: bool = False):
        args = {
            "path": str(tmp_path / run / "preflight"),
            "run_dir": str(tmp_path / run),
            "check_port": port,
            "listeners": [
                {"name": "master", "address": "127.0.0.1", "port": port, "connections": 1},
                {"name": "ring", "address": "127.0.0.1", "port": 0, "connections": 1},
            ],
            "timeout": 30,
            "lock": {"path": str(lock), "run_id": run, "control_user": "alice"},
        }
        return start_call(monkeypatch, args, check_mode).result

    def stop(run: str) -> None:
        args = {
            "path": str(tmp_path / run / "preflight"),
            "remove_run_dir": str(tmp_path / run),
        }
        stop_call(monkeypatch, args)

    looked = start("first", check_mode=True)
    assert looked["lock"]["would_take"] and not lock.exists()
    assert looked["msg"].startswith("check mode: would make the run directory")
    first = start("first")
    assert first["lock"]["acquired"] and set(first["ports"]) == {"master", "ring"}
    try:
        second = start("second")
        assert second["lock"]["refused"] and "run first" in second["lock"]["message"]
        assert "alice" in second["lock"]["message"]
        assert set(second["ports"]) == {"ring"}  # no listener on the first run's MASTER_PORT
        stop("second")
        assert json.loads(lock.read_text())["run_id"] == "first"  # untouched
    finally:
        stop("first")
    assert wait_for(lambda: not lock.exists())  # the first run's end freed the lock
