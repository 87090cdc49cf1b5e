# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The pre-flight's listeners as the playbook runs them: a real detached listener process on
loopback, started as the start call starts it (src/nccl_preflight/node/preflight_calls.py ``start``,
nccl_preflight_start's ``preflight`` option) and stopped through nccl_preflight_observe's
``collect`` option (tests/preflight_calls.py); once through nccl_preflight_start itself with the
real interpreter's torch, and once through ansible to prove the start call's session ends while
the listener lives on."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nccl_preflight_start
import pytest
from ansible.module_utils.nccl_preflight.node import listener as nccl_listener
from ansible.module_utils.nccl_preflight.node.processes import (
    is_alive,
    parse_stat,
    proc_stat,
    start_time,
)
from ansible.module_utils.nccl_preflight.node.tcp_connect import tcp_connect

from tests.module_exit import ModuleExit, run_module_main
from tests.polling import wait_for as wait_until
from tests.preflight_calls import start_call, stop_call

ROOT = Path(__file__).resolve().parents[3]


def pid_record(path: Path) -> tuple[int, int]:
    data = json.loads((path / "listener.pid").read_text())
    return data["pid"], data["start_time"]


def alive(path: Path) -> bool:
    return is_alive(*pid_record(path))


@pytest.fixture
def listen_dir(tmp_path: Path) -> Iterator[Path]:
    """The listener's directory; whatever listener a test leaves behind is stopped at the end."""
    path = tmp_path / "run" / "preflight"
    yield path
    if (path / "listener.pid").exists() and alive(path):
        nccl_listener.stop_listener(str(path), 5)


def ring(expect: int) -> list[dict]:
    return [{"name": "ring", "address": "127.0.0.1", "port": 0, "connections": expect}]


def test_started_returns_the_ports_and_leaves_a_detached_listener(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    started = start_call(
        monkeypatch, {"path": str(listen_dir), "listeners": ring(2), "timeout": 60}
    )
    assert not started.failed, started.result
    result = started.result
    port = result["ports"]["ring"]["port"]
    assert result["ports"] == {"ring": {"port": port, "error": ""}} and port > 0
    assert result["changed"] is True and result["port_owner"] == {}
    assert listen_dir.stat().st_mode & 0o777 == 0o700
    pid = result["pid"]
    assert pid_record(listen_dir)[0] == pid and alive(listen_dir)
    # Detached: its own session, standard streams on /dev/null and the log, nothing else
    # inherited but its listening socket (and the selector it polls with).
    assert os.getsid(pid) not in (os.getsid(0), pid)
    fds = {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert fds[0] == "/dev/null"
    assert fds[1] == fds[2] == str(listen_dir / "listener.log")
    others = [t for fd, t in fds.items() if fd > 2]
    assert sorted(t.split(":")[0] for t in others) in (["socket"], ["anon_inode", "socket"])

    probe = tcp_connect("127.0.0.1", port, "127.0.0.1", 2.0, 0.0)
    assert probe["ok"], probe

    before = time.time()
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    assert not stopped.failed, stopped.result
    result = stopped.result
    assert before <= result["clock"] <= time.time()
    assert (result["pid"], result["ended"], result["timed_out"]) == (pid, "stop file", True)
    [entry] = result["listeners"]
    assert (entry["port"], entry["accepted"], entry["complete"]) == (port, ["127.0.0.1"], False)
    assert not alive(listen_dir)
    refused = tcp_connect("127.0.0.1", port, "", 2.0, 0.0)
    assert refused["error_kind"] == "refused"


def test_listener_closes_as_soon_as_every_connection_came(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    started = start_call(monkeypatch, {"path": str(listen_dir), "listeners": ring(1)})
    port = started.result["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    assert wait_until(lambda: (listen_dir / "listener.json").exists(), 5)
    assert wait_until(lambda: not alive(listen_dir), 5)
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    assert (stopped.result["ended"], stopped.result["timed_out"]) == ("complete", False)
    assert stopped.result["listeners"][0]["complete"] is True


def test_listener_without_a_stop_exits_at_its_timeout(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    start = time.monotonic()
    start_call(monkeypatch, {"path": str(listen_dir), "listeners": ring(1), "timeout": 1})
    assert alive(listen_dir)
    assert wait_until(lambda: not alive(listen_dir), 10)
    assert 0.9 <= time.monotonic() - start < 10
    saw = json.loads((listen_dir / "listener.json").read_text())
    assert (saw["ended"], saw["timed_out"], saw["listeners"][0]["accepted"]) == (
        "timeout",
        True,
        [],
    )


def test_listener_exits_when_the_run_directory_is_removed(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    started = start_call(monkeypatch, {"path": str(listen_dir), "listeners": ring(1)})
    pid, start_time = pid_record(listen_dir)
    shutil.rmtree(listen_dir.parent)
    assert wait_until(lambda: not is_alive(pid, start_time), 5)
    assert not listen_dir.parent.exists()  # and it wrote nothing back
    port = started.result["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["error_kind"] == "refused"


def start_on_master_port(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path, port: int, expect: int, *others: dict
) -> ModuleExit:
    """A start that looks at ``port`` (check_port) and listens there on loopback, as the
    master's MASTER_PORT listener, beside ``others``."""
    master = {"name": "master", "address": "127.0.0.1", "port": port, "connections": expect}
    args = {"path": str(listen_dir), "check_port": port, "listeners": [master, *others]}
    return start_call(monkeypatch, args)


def test_a_held_port_is_named_and_not_listened_on(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    holder, port, _ = nccl_listener.bind_listener("127.0.0.1", 0)
    try:
        started = start_on_master_port(monkeypatch, listen_dir, port, 2, *ring(1))
    finally:
        holder.close()
    result = started.result
    assert result["port_owner"]["free"] is False
    assert [h["pid"] for h in result["port_owner"]["listeners"]] == [os.getpid()]
    assert list(result["ports"]) == ["ring"]  # nobody probes the foreign listener
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    assert [e["name"] for e in stopped.result["listeners"]] == ["ring"]


def test_a_free_port_is_listened_on_and_bind_errors_are_reported(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    probe_sock = socket.socket()
    probe_sock.bind(("127.0.0.1", 0))
    free_port = probe_sock.getsockname()[1]
    probe_sock.close()
    not_local = {"name": "ring", "address": "192.0.2.77", "port": 0, "connections": 1}
    started = start_on_master_port(monkeypatch, listen_dir, free_port, 1, not_local)
    result = started.result
    assert result["port_owner"] == {"free": True, "listeners": []}
    assert result["ports"]["master"] == {"port": free_port, "error": ""}
    assert "192.0.2.77" in result["ports"]["ring"]["error"]
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    errors = {e["name"]: e["error"] for e in stopped.result["listeners"]}
    assert errors["master"] == "" and "Cannot assign requested address" in errors["ring"]


def test_nothing_to_bind_starts_no_process_and_stops_cleanly(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    started = start_call(monkeypatch, {"path": str(listen_dir), "listeners": []})
    assert (started.result["pid"], started.result["ports"]) == (None, {})
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    assert not stopped.failed
    assert (stopped.result["ended"], stopped.result["listeners"]) == ("nothing bound", [])


def test_a_second_start_stops_the_first_listener(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    start_call(monkeypatch, {"path": str(listen_dir), "listeners": ring(1)})
    first = pid_record(listen_dir)
    second = start_call(monkeypatch, {"path": str(listen_dir), "listeners": ring(1)})
    assert not is_alive(*first)
    assert second.result["pid"] != first[0] and alive(listen_dir)
    assert not (listen_dir / "listener.json").exists()  # the first one's result is gone


def test_stop_kills_a_listener_that_does_not_exit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A process that never looks at the stop file stands in for a wedged listener."""
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        started = start_time(sleeper.pid)
        assert started is not None
        (tmp_path / "listener.pid").write_text(
            json.dumps({"pid": sleeper.pid, "start_time": started})
        )
        stopped = stop_call(monkeypatch, {"path": str(tmp_path), "stop_timeout": 0.3})
        assert stopped.failed and stopped.result["killed"] is True
        assert "did not exit within 0.3 s" in stopped.result["msg"]
        assert isinstance(stopped.result["clock"], float)
        assert sleeper.wait(5) == -9
        assert (tmp_path / "listener.stop").exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_stop_of_a_listener_that_died_says_so_with_its_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "listener.pid").write_text(json.dumps({"pid": 2**22 + 1, "start_time": 1}))
    (tmp_path / "listener.log").write_text("Traceback: boom\n")
    stopped = stop_call(monkeypatch, {"path": str(tmp_path)})
    assert stopped.failed and stopped.result["killed"] is False
    assert "ended without leaving its result" in stopped.result["msg"]
    assert "Traceback: boom" in stopped.result["msg"]


def test_stopped_before_any_start_fails_and_still_reads_the_clock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stopped = stop_call(monkeypatch, {"path": str(tmp_path / "nope")})
    assert stopped.failed and "were not started" in stopped.result["msg"]
    assert abs(stopped.result["clock"] - time.time()) < 5
    assert not (tmp_path / "nope").exists()


def test_check_mode_holds_nothing_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    started = start_call(
        monkeypatch,
        {"path": str(listen_dir), "listeners": ring(1), "check_port": 9},
        check_mode=True,
    )
    assert started.result["changed"] is False and started.result["pid"] is None
    assert started.result["port_owner"]["free"] is True
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)}, True)
    assert not stopped.failed and isinstance(stopped.result["clock"], float)
    assert not listen_dir.exists()


def fake_python(tmp_path: Path, body: str) -> str:
    """An executable standing in for the node's Python: ignores `-c <probe>`, runs ``body``."""
    path = tmp_path / "fake-python"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_the_run_directory_is_made_private_and_a_foreign_one_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    listen = run_dir / "preflight"
    args = {"path": str(listen), "run_dir": str(run_dir), "run_dir_mode": "0750"}
    assert not start_call(monkeypatch, {**args, "listeners": []}).failed
    assert run_dir.stat().st_mode & 0o7777 == 0o750 and listen.is_dir()
    stop_call(monkeypatch, {"path": str(listen)})

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    trap = tmp_path / "trap"
    trap.symlink_to(elsewhere)
    refused = start_call(monkeypatch, {"path": str(trap / "preflight"), "run_dir": str(trap)})
    assert refused.failed and "is a symbolic link" in refused.result["msg"]
    assert list(elsewhere.iterdir()) == []  # nothing was made through the link


def test_the_python_probe_runs_beside_the_listeners_and_comes_back_with_the_stop(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path, tmp_path: Path
) -> None:
    """A slow probe (as importing torch) does not hold up the start; the stop waits for it.

    The fake probe waits until the test opens its gate (60 s at most), then says it is done: a
    start that waited for it would return only after its "done" mark.
    """
    facts = {
        "executable": "/opt/py/bin/python3", "version": "3.12.3", "torch_version": "2.13.0",
        "cuda_available": False, "cuda_version": None, "nccl_version": None, "device_count": 0,
        "npu_available": False, "npu_version": None, "reason": "",
    }  # fmt: skip
    gate, done = tmp_path / "gate", tmp_path / "done"
    python = fake_python(
        tmp_path,
        f"for i in $(seq 600); do [ -e {gate} ] && break; sleep 0.1; done; : > {done}; "
        f"echo 'import noise'; echo '{json.dumps(facts)}'",
    )
    started = start_call(
        monkeypatch, {"path": str(listen_dir), "listeners": ring(1), "python": python}
    )
    assert not started.failed and not done.exists()  # the start did not wait for the probe
    gate.touch()
    stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
    assert not stopped.failed, stopped.result
    assert stopped.result["python"] == facts
    assert done.exists()  # the stop waited for it


def test_a_failing_missing_or_hanging_python_probe_says_why(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path, tmp_path: Path
) -> None:
    def probe(python: str, timeout: float = 60) -> dict:
        args = {"path": str(listen_dir), "python": python, "python_timeout": timeout}
        assert not start_call(monkeypatch, args).failed
        stopped = stop_call(monkeypatch, {"path": str(listen_dir)})
        assert not stopped.failed, stopped.result
        return stopped.result["python"]

    failing = probe(fake_python(tmp_path, "echo 'ModuleNotFoundError: torch' >&2; exit 3"))
    assert failing["torch_version"] is None
    assert "failed (rc=3): ModuleNotFoundError: torch" in failing["reason"]
    missing = probe(str(tmp_path / "no-such-python"))
    assert missing["executable"].endswith("no-such-python")
    assert "cannot run" in missing["reason"] and "No such file" in missing["reason"]
    hanging = probe(fake_python(tmp_path, "sleep 30"), timeout=0.3)
    assert "did not finish in time; it was killed" in hanging["reason"]


def test_the_start_call_probes_the_torch_of_its_own_interpreter(
    monkeypatch: pytest.MonkeyPatch, listen_dir: Path
) -> None:
    """nccl_preflight_start's preflight option without ``python``: the torch probe runs with the
    interpreter that runs the module (what nccl_env_python will be), beside the listeners."""
    torch = pytest.importorskip("torch")
    preflight = {"path": str(listen_dir), "listeners": ring(1), "fabric_address": "127.0.0.1"}
    started = run_module_main(monkeypatch, nccl_preflight_start.main, {"preflight": preflight})
    assert not started.failed and "ansible_facts" not in started.result
    preflight = started.result["preflight"]
    assert "failed" not in preflight and started.result["changed"] is True, preflight
    assert preflight["pid"] == pid_record(listen_dir)[0]
    assert preflight["fabric_address"] == "127.0.0.1"
    assert preflight["ports"]["ring"]["error"] == ""
    # The stop waits for the probe (import torch: seconds, more on a loaded machine); as the
    # start call's docs say, its stop_timeout stays above python_timeout (60 s by default).
    stopped = stop_call(monkeypatch, {"path": str(listen_dir), "stop_timeout": 70})
    assert stopped.result["python"]["torch_version"] == str(torch.__version__)
    assert stopped.result["python"]["executable"] == sys.executable


def test_the_stop_removes_the_run_directory_when_no_launch_follows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    listen = run_dir / "preflight"
    started = start_call(
        monkeypatch, {"path": str(listen), "run_dir": str(run_dir), "listeners": ring(1)}
    )
    pid = started.result["pid"]
    stopped = stop_call(monkeypatch, {"path": str(listen), "remove_run_dir": str(run_dir)})
    assert not stopped.failed, stopped.result
    assert stopped.result["run_dir_removed"] is True and not run_dir.exists()
    assert stopped.result["ended"] == "stop file" and not is_alive(pid, None)
    # A failed stop (nothing was started) still removes it: the run is over on this host.
    run_dir.mkdir()
    failed = stop_call(monkeypatch, {"path": str(listen), "remove_run_dir": str(run_dir)})
    assert failed.failed and failed.result["run_dir_removed"] is True and not run_dir.exists()


def test_an_abandon_removes_the_run_directory_and_returns_once_the_listener_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The environment stage stopped the run: nothing is collected, the run directory goes
    first (the listener, still waiting for a probe that will not come, ends on it) and the call
    returns only once that process is gone, so nothing of the run outlives the playbook."""
    run_dir = tmp_path / "run"
    listen = run_dir / "preflight"
    started = start_call(
        monkeypatch, {"path": str(listen), "run_dir": str(run_dir), "listeners": ring(1)}
    )
    pid, start = pid_record(listen)
    assert started.result["pid"] == pid and is_alive(pid, start)
    args = {"path": str(listen), "remove_run_dir": str(run_dir), "abandon": True}
    abandoned = stop_call(monkeypatch, args)
    assert not abandoned.failed, abandoned.result
    assert abandoned.result["run_dir_removed"] is True and not run_dir.exists()
    assert abandoned.result["pid"] == pid and abandoned.result["ended"] == "run directory removed"
    assert not is_alive(pid, start)  # gone when the call returned, not killed
    # Without the directory to remove there is nothing that ends the run: refused, said why.
    refused = stop_call(monkeypatch, {"path": str(listen), "abandon": True})
    assert refused.failed and "needs remove_run_dir" in refused.result["msg"]


def test_the_stop_removes_only_the_directory_that_holds_the_listeners_and_no_link(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "preflight").mkdir(parents=True)
    outside = stop_call(
        monkeypatch,
        {
            "path": str(elsewhere / "preflight"),
            "remove_run_dir": str(tmp_path / "x"),
        },
    )
    assert outside.failed and "does not hold the listener directory" in outside.result["msg"]
    assert elsewhere.exists()
    link = tmp_path / "run"
    link.symlink_to(elsewhere)
    linked = stop_call(
        monkeypatch,
        {"path": str(link / "preflight"), "remove_run_dir": str(link)},
    )
    assert linked.result["run_dir_removed"] is False
    assert "is a symbolic link: left in place" in linked.result["remove_error"]
    assert (elsewhere / "preflight").is_dir() and link.is_symlink()


def test_proc_stat_with_a_tricky_command_name() -> None:
    line = "4242 (a) (b) c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
    stat = parse_stat(line)
    assert (stat["state"], stat["starttime"]) == ("S", 987654)
    assert proc_stat(os.getpid())["state"] in ("R", "S")
    assert proc_stat(2**22 + 1) is None


def test_through_ansible_the_facts_call_returns_while_its_listener_lives_on(tmp_path: Path) -> None:
    """ansible's local connection, like ssh, waits for EOF on the module's stdout and stderr: a
    listener holding them would keep the facts task running until its timeout (60 s here)."""
    path = tmp_path / "preflight"
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    ansible = str(Path(sys.executable).parent / "ansible")

    def module(name: str, args: dict) -> dict:
        """One ad-hoc run; -o prints `localhost | CHANGED => {result as JSON}`."""
        proc = subprocess.run(
            [
                *(ansible, "localhost", "-o", "-e", f"ansible_python_interpreter={sys.executable}"),
                *("-m", name, "-a", json.dumps(args)),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=40,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout.split(" => ", 1)[1])

    # A quick stand-in for the node's Python: the torch probe is not what this test is about.
    python = fake_python(tmp_path, "echo '{}'")
    start = time.monotonic()
    preflight = {"path": str(path), "listeners": ring(1), "timeout": 60, "python": python}
    answer = module("nccl_preflight_start", {"preflight": preflight})
    assert time.monotonic() - start < 30
    started = answer["preflight"]
    assert alive(path) and started["pid"] == pid_record(path)[0]
    port = started["ports"]["ring"]["port"]
    assert tcp_connect("127.0.0.1", port, "", 2.0, 0.0)["ok"]
    stopped = module("nccl_preflight_observe", {"collect": {"path": str(path)}})["collect"]
    assert stopped["ended"] == "complete" and stopped["listeners"][0]["accepted"] == ["127.0.0.1"]
    assert not alive(path)
