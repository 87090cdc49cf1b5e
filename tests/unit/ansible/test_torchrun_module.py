# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""library/nccl_torchrun.py: a detached, bounded run; the whole process tree ended by recorded pid;
launch.json; the results packed for the control machine.

The module runs as Ansible runs it on a node: a separate Python process reading its arguments
from a file. state=started returns at once while a detached supervisor runs torchrun;
state=finished waits for it on the node. A fake "python" stands in for torchrun: like torchrun it
puts every worker in a new session (so killing torchrun's process group is not enough), and the
workers start children. One test runs the real torchrun with a tiny script.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import socket
import stat
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.nccl_preflight.node import processes
from ansible.module_utils.nccl_preflight.node.run_start import build_argv, parse_env_file

from tests.builders.torchrun import (
    ENV_CONTENT,
    finish,
    finished_args,
    module_args,
    rank_file,
    start_hanging_run,
    start_module,
    tagged_processes,
)
from tests.polling import wait_or_fail


def run(args: dict[str, Any], tmp_path: Path, timeout: float = 60) -> dict[str, Any]:
    """Start, then wait for the run on the "node": the two calls the launch role makes."""
    started = finish(start_module(args, tmp_path, "start"))
    assert started.get("failed") is not True, started
    return finish(start_module(finished_args(Path(args["run_dir"])), tmp_path, "wait"), timeout)


def pid_alive(pid: int) -> bool:
    stat = processes.proc_stat(pid)
    return stat is not None and stat["state"] not in "ZX"


# --- pure helpers -----------------------------------------------------------------------------


def test_parse_env_file_reads_shell_quoted_values() -> None:
    env = parse_env_file(
        "# nccl.env\nNCCL_SOCKET_IFNAME='eth 1'\n\nexport NCCL_DEBUG=INFO\nA='x=y'  # c\n"
    )
    assert env == {"NCCL_SOCKET_IFNAME": "eth 1", "NCCL_DEBUG": "INFO", "A": "x=y"}


def test_parse_env_file_names_the_bad_line() -> None:
    with pytest.raises(ValueError, match=r"nccl.env:2: expected KEY=value"):
        parse_env_file("A=1\nrm -rf /\n")


def test_build_argv_is_static_rendezvous_with_local_addr() -> None:
    argv = build_argv(
        {
            "run_dir": "/tmp/r",
            "python": "/usr/bin/python3",
            "script": "/tmp/r/nccl_check.py",
            "script_args": ["--timeout", "20"],
            "nnodes": 2,
            "node_rank": 1,
            "nproc_per_node": 3,
            "master_addr": "10.0.0.1",
            "master_port": 29500,
            "local_addr": "10.0.0.2",
            "rdzv_id": "run1",
        }
    )
    assert argv[:3] == ["/usr/bin/python3", "-m", "torch.distributed.run"]
    pairs = dict(zip(argv[3:-3:2], argv[4:-3:2], strict=True))
    assert pairs["--nnodes"] == "2" and pairs["--node-rank"] == "1"
    assert pairs["--nproc-per-node"] == "3" and pairs["--local-addr"] == "10.0.0.2"
    assert pairs["--master-addr"] == "10.0.0.1" and pairs["--master-port"] == "29500"
    assert pairs["--log-dir"] == "/tmp/r/logs" and pairs["--redirects"] == "3"
    assert "--rdzv-endpoint" not in argv and "--standalone" not in argv
    assert argv[-3:] == ["/tmp/r/nccl_check.py", "--timeout", "20"]


def test_parse_stat_survives_odd_command_names() -> None:
    text = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 " + " ".join(["0"] * 12) + " 98765 0 0"
    stat = processes.parse_stat(text)
    assert stat == {"state": "S", "ppid": 1, "pgid": 1234, "sid": 1234, "starttime": 98765}


def test_read_tail_keeps_the_end_and_says_what_was_cut(tmp_path: Path) -> None:
    log = tmp_path / "rank-0.log"
    log.write_bytes(b"a" * 100 + b"Traceback: the end\n")
    data, cut = processes.read_tail(log, 19)
    assert cut is True
    assert data.endswith(b"Traceback: the end\n")
    assert b"the first 100 of 119 bytes of rank-0.log were cut" in data.splitlines()[0]
    assert processes.read_tail(log, 1000) == (log.read_bytes(), False)


# --- the module, as a node runs it ------------------------------------------------------------


def test_started_returns_at_once_and_the_timeout_ends_every_process(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    began = time.monotonic()
    started = finish(
        start_module(
            module_args(run_dir, fake_python, timeout=10, environment={"FAKE_MODE": "hang"}),
            tmp_path,
        )
    )
    # Bounds with room for a loaded machine, still well under the 10 s run it must not wait for.
    assert time.monotonic() - began < 8, "state=started must not wait for the run"
    assert started["changed"] is True and pid_alive(started["supervisor_pid"])
    # torchrun + 2 workers + 2 grandchildren run after the module returned.
    wait_or_fail(lambda: len(tagged_processes(run_dir)) == 5)
    result = finish(start_module(finished_args(run_dir), tmp_path, "wait"))
    elapsed = time.monotonic() - began
    assert result["timed_out"] is True
    assert elapsed < 10 + 2 + 15, f"took {elapsed:.1f}s"
    assert len(result["killed_pids"]) == 5 and result["ended_now"] == []
    assert tagged_processes(run_dir) == [] and not pid_alive(started["supervisor_pid"])
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["timed_out"] is True and launch["timeout_s"] == 10
    assert sorted(launch["killed_pids"]) == sorted(result["killed_pids"])
    assert launch["rc"] == -signal.SIGTERM
    recorded = json.loads((run_dir / "torchrun.pids").read_text())
    assert recorded["supervisor_pid"] == started["supervisor_pid"]
    assert {int(p) for p in recorded["processes"]} >= set(result["killed_pids"])
    # The per-rank logs are named by global rank (rank_offset 4 + local rank).
    assert sorted(p.name for p in (run_dir / "results").glob("*.log")) == [
        "rank-4.log",
        "rank-5.log",
    ]
    log = (run_dir / "results" / "rank-5.log").read_text()
    assert log.index("worker 1 up") < log.index("worker 1 complains")
    assert "fake torchrun started" in (run_dir / "torchrun.log").read_text()


def test_nothing_outlives_the_timeout_when_nobody_waits(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    """The control machine is gone after the start: the supervisor alone bounds the run."""
    started = start_hanging_run(tmp_path, fake_python, run_dir, timeout=2)
    wait_or_fail(lambda: (run_dir / "launch.json").is_file(), timeout=2 + 2 + 8)
    wait_or_fail(lambda: not pid_alive(started["supervisor_pid"]), timeout=5)
    assert tagged_processes(run_dir) == []
    assert json.loads((run_dir / "launch.json").read_text())["timed_out"] is True


def test_sigkill_follows_when_a_worker_ignores_sigterm(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    args = module_args(
        run_dir,
        fake_python,
        timeout=2,
        kill_grace=1,
        environment={"FAKE_MODE": "hang", "FAKE_STUBBORN": "1"},
    )
    result = run(args, tmp_path)
    assert result["timed_out"] is True
    assert tagged_processes(run_dir) == []


def seen_env(run_dir: Path) -> dict[str, str | None]:
    return json.loads((run_dir / "torchrun.log").read_text().strip().splitlines()[-1])


def test_environment_comes_from_nccl_env(tmp_path: Path, run_dir: Path, env_python: Path) -> None:
    """Without env_content, the nccl.env already in the run directory is read (as before)."""
    before = (run_dir / "nccl.env").read_text()
    result = run(module_args(run_dir, env_python, environment={"EXTRA": "1"}), tmp_path)
    assert (
        result["torchrun_rc"] == 0 and result["timed_out"] is False and result["killed_pids"] == []
    )
    assert seen_env(run_dir) == {
        "NCCL_SOCKET_IFNAME": "eth1",
        "GLOO_SOCKET_IFNAME": "eth1",
        "NCCL_IB_HCA": "mlx5_0 mlx5_1",
        "EXTRA": "1",
    }
    assert (run_dir / "nccl.env").read_text() == before


# --- state=started makes the run directory and writes nccl.env --------------------------------


def test_started_makes_the_run_directory_with_its_exact_mode_and_writes_env_content(
    tmp_path: Path, env_python: Path
) -> None:
    new_dir = tmp_path / "nccl-preflight-new-node1"
    args = module_args(
        new_dir,
        env_python,
        script=str(new_dir / "check.py"),
        script_content="print('a rank')\n",
        run_dir_mode="0770",  # the umask (022 here) would take the group's w from a plain mkdir
        env_content=ENV_CONTENT,
        env_file_mode="0640",
    )
    old_umask = os.umask(0o022)
    try:
        started = finish(start_module(args, tmp_path, "start"))
    finally:
        os.umask(old_umask)
    assert started.get("failed") is not True, started
    assert started["run_dir_created"] is True
    assert started["env_file"] == str(new_dir / "nccl.env")
    info = new_dir.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o770
    assert info.st_uid == os.geteuid()
    env_file = new_dir / "nccl.env"
    assert env_file.read_text() == ENV_CONTENT
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640
    # No temporary file of the atomic write is left behind.
    assert not [p.name for p in new_dir.iterdir() if p.name.startswith(".")]
    finish(start_module(finished_args(new_dir), tmp_path, "wait"))
    assert seen_env(new_dir)["NCCL_SOCKET_IFNAME"] == "enp 9"


def test_env_content_wins_over_the_nccl_env_already_there(
    tmp_path: Path, run_dir: Path, env_python: Path
) -> None:
    run_dir.chmod(0o755)
    result = run(module_args(run_dir, env_python, env_content=ENV_CONTENT), tmp_path)
    assert result["torchrun_rc"] == 0
    assert seen_env(run_dir) == {
        "NCCL_SOCKET_IFNAME": "enp 9",
        "GLOO_SOCKET_IFNAME": "enp 9",
        "NCCL_IB_HCA": None,
        "EXTRA": None,
    }
    assert (run_dir / "nccl.env").read_text() == ENV_CONTENT
    assert stat.S_IMODE((run_dir / "nccl.env").stat().st_mode) == 0o600
    # A directory it finds gets exactly the mode asked for (the default, 0700), not a wider one.
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700


def test_env_content_goes_to_the_run_directory_only(
    tmp_path: Path, run_dir: Path, env_python: Path
) -> None:
    outside = tmp_path / "elsewhere.env"
    result = finish(
        start_module(
            module_args(run_dir, env_python, env_file=str(outside), env_content=ENV_CONTENT),
            tmp_path,
        )
    )
    assert result["failed"] is True
    assert f"{outside} must be a file directly inside the run directory {run_dir}" in result["msg"]
    assert not outside.exists() and not (run_dir / "torchrun.pids").exists()


def test_a_missing_env_file_without_env_content_fails_naming_it(
    tmp_path: Path, run_dir: Path, env_python: Path
) -> None:
    (run_dir / "nccl.env").unlink()
    result = finish(start_module(module_args(run_dir, env_python), tmp_path))
    assert result["failed"] is True
    assert f"environment file {run_dir / 'nccl.env'} does not exist" in result["msg"]
    assert not (run_dir / "torchrun.pids").exists() and tagged_processes(run_dir) == []


def refused_start(tmp_path: Path, path: Path, python: Path) -> dict[str, Any]:
    """state=started with env_content at `path`, which must be refused."""
    args = module_args(path, python, script=str(path / "check.py"), env_content=ENV_CONTENT)
    result = finish(start_module(args, tmp_path))
    assert result["failed"] is True, result
    assert result["msg"].startswith(f"cannot use the run directory: {path} "), result["msg"]
    assert "supervisor_pid" not in result and tagged_processes(path) == []
    return result


def test_a_symlink_at_the_run_directory_is_refused(tmp_path: Path, env_python: Path) -> None:
    target = tmp_path / "somebody-elses"
    target.mkdir(mode=0o755)
    link = tmp_path / "nccl-preflight-run-node1"
    link.symlink_to(target)
    result = refused_start(tmp_path, link, env_python)
    assert "is a symbolic link" in result["msg"]
    assert list(target.iterdir()) == [] and stat.S_IMODE(target.stat().st_mode) == 0o755


def test_a_file_at_the_run_directory_is_refused(tmp_path: Path, env_python: Path) -> None:
    path = tmp_path / "nccl-preflight-run-node1"
    path.write_text("not a directory")
    result = refused_start(tmp_path, path, env_python)
    assert "exists and is not a directory" in result["msg"]
    assert path.read_text() == "not a directory"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_run_directory_of_another_user_is_refused(tmp_path: Path, env_python: Path) -> None:
    path = tmp_path / "nccl-preflight-run-node1"
    path.mkdir()
    path.chmod(0o755)
    os.chown(path, 65534, 65534)
    result = refused_start(tmp_path, path, env_python)
    assert (
        f"is owned by uid 65534, not by the user running the check (uid {os.geteuid()})"
        in (result["msg"])
    )
    # Neither written into nor tightened to 0700: it is not ours.
    assert list(path.iterdir()) == [] and stat.S_IMODE(path.stat().st_mode) == 0o755


def test_a_run_directory_without_its_parent_is_refused(tmp_path: Path, env_python: Path) -> None:
    path = tmp_path / "no-such-root" / "nccl-preflight-run-node1"
    args = module_args(path, env_python, script=str(path / "check.py"), env_content=ENV_CONTENT)
    result = finish(start_module(args, tmp_path))
    assert result["failed"] is True
    assert f"{path.parent} does not exist, so {path} cannot be made" in result["msg"]
    assert not path.parent.exists()


def test_a_bad_run_dir_mode_fails_before_anything_is_made(tmp_path: Path, env_python: Path) -> None:
    path = tmp_path / "nccl-preflight-run-node1"
    args = module_args(path, env_python, run_dir_mode="rwx", env_content=ENV_CONTENT)
    result = finish(start_module(args, tmp_path))
    assert result["failed"] is True and "run_dir_mode 'rwx' is not an octal mode" in result["msg"]
    assert not path.exists()


def test_failing_run_reports_its_rc_without_failing_the_task(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    result = run(module_args(run_dir, fake_python, environment={"FAKE_MODE": "fail"}), tmp_path)
    assert result.get("failed") is not True
    assert result["torchrun_rc"] == 3 and result["timed_out"] is False
    # The workers' own children outlived them: the supervisor ends them too.
    assert len(result["killed_pids"]) == 2
    assert tagged_processes(run_dir) == []
    assert json.loads((run_dir / "launch.json").read_text())["rc"] == 3


def test_script_content_is_written_and_never_echoed(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    content = "# the check\nprint('a rank')\n" + "x = 1\n" * 2000
    script = run_dir / "nccl_check.py"
    args = module_args(
        run_dir,
        fake_python,
        script=str(script),
        script_content=content,
        environment={"FAKE_MODE": "ok"},
    )
    started = finish(start_module(args, tmp_path))
    assert script.read_text() == content and script.stat().st_mode & 0o777 == 0o600
    echoed = started["invocation"]["module_args"]["script_content"]
    assert echoed != content and len(json.dumps(started)) < 5000
    finish(start_module(finished_args(run_dir), tmp_path, "wait"))


def test_a_busy_master_port_fails_the_start_with_what_to_do(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        began = time.monotonic()
        result = finish(
            start_module(
                module_args(run_dir, fake_python, master_port=port, port_wait_timeout=1),
                tmp_path,
            )
        )
    assert time.monotonic() - began < 20  # gave up after its 1 s, not a hang
    assert result["failed"] is True
    assert f"MASTER_PORT {port} on 127.0.0.1 is still in use after 1 s" in result["msg"]
    assert f"ss -ltnp 'sport = :{port}'" in result["msg"]
    assert "-e nccl_master_port=<port>" in result["msg"]
    assert not (run_dir / "torchrun.pids").exists() and tagged_processes(run_dir) == []


def test_only_node_rank_0_waits_for_the_master_port(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        args = module_args(
            run_dir,
            fake_python,
            node_rank=1,
            master_port=holder.getsockname()[1],
            port_wait_timeout=30,
            environment={"FAKE_MODE": "ok"},
        )
        began = time.monotonic()
        started = finish(start_module(args, tmp_path))
        assert time.monotonic() - began < 20 and started["changed"] is True  # not the 30 s wait
    finish(start_module(finished_args(run_dir), tmp_path, "wait"))


def test_a_python_that_does_not_exist_fails_the_start(tmp_path: Path, run_dir: Path) -> None:
    result = finish(start_module(module_args(run_dir, tmp_path / "no-such-python"), tmp_path))
    assert result["failed"] is True
    assert "torchrun did not start" in result["msg"] and "no-such-python" in result["msg"]
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["rc"] is None and "no-such-python" in launch["error"]


def test_finished_packs_the_results_and_removes_the_run_directory(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    finish(
        start_module(module_args(run_dir, fake_python, environment={"FAKE_MODE": "ok"}), tmp_path)
    )
    (run_dir / "results" / "rank-4.json").write_text('{"status": "passed"}')
    (run_dir / "results" / "stray.txt").write_text("not a result")
    result = finish(
        start_module(
            finished_args(run_dir, collect=True, remove_run_dir=True, collect_log_max_bytes=100),
            tmp_path,
            "wait",
        )
    )
    assert result["run_dir_removed"] is True and not run_dir.exists()
    assert result["collected"] == [
        "rank-4.json",
        "rank-4.log",
        "rank-5.log",
        "torchrun.log",
        "launch.json",
    ]
    data = base64.b64decode(result["collected_archive"])
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        members = {m.name: archive.extractfile(m).read() for m in archive}
    assert set(members) == set(result["collected"])
    assert json.loads(members["launch.json"])["rc"] == 0
    assert members["rank-4.json"] == b'{"status": "passed"}'
    assert set(result["truncated"]) <= {"rank-4.log", "rank-5.log", "torchrun.log"}
    assert "torchrun.log" in result["truncated"] or len(members["torchrun.log"]) <= 100
    for name in result["truncated"]:
        assert b"were cut" in members[name].splitlines()[0]


def test_stop_reason_ends_the_run_at_once_and_is_recorded(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    began = time.monotonic()
    reason = "torchrun did not start on node0, so the rendezvous could not complete"
    result = finish(start_module(finished_args(run_dir, stop_reason=reason), tmp_path, "wait"))
    assert time.monotonic() - began < 15
    assert result["stopped_by"] == reason and result["timed_out"] is False
    assert tagged_processes(run_dir) == []
    assert json.loads((run_dir / "launch.json").read_text())["stopped_by"] == reason


def test_the_wait_ends_the_run_when_the_control_machine_goes_away(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    """Ctrl-C or a lost connection closes the pipe the waiting module writes its result to."""
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    waiter = start_module(finished_args(run_dir), tmp_path, "wait")
    time.sleep(1)
    assert waiter.poll() is None, "the wait must go on while someone reads its result"
    waiter.stdout.close()
    wait_or_fail(lambda: tagged_processes(run_dir) == [], timeout=15)
    waiter.wait(timeout=15)
    launch = json.loads((run_dir / "launch.json").read_text())
    assert "went away" in launch["stopped_by"]


def test_state_stopped_ends_a_running_tree_by_its_recorded_pids(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    started = start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    wait_or_fail(
        lambda: (
            (run_dir / "torchrun.pids").is_file()
            and len(json.loads((run_dir / "torchrun.pids").read_text())["processes"]) == 5
        )
    )
    stopped = finish(
        start_module(
            {"run_dir": str(run_dir), "state": "stopped", "rank_offset": 4, "kill_grace": 2},
            tmp_path,
            name="stop",
        )
    )
    assert tagged_processes(run_dir) == [] and not pid_alive(started["supervisor_pid"])
    assert stopped["stopped_by"] == "SIGTERM"
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["stopped_by"] == "SIGTERM" and launch["timed_out"] is False
    assert len(launch["killed_pids"]) == 5
    assert stopped["rank_logs"] and Path(stopped["rank_logs"][0]).name == "rank-4.log"
    # Stopping again finds nothing alive and changes nothing.
    again = finish(start_module({"run_dir": str(run_dir), "state": "stopped"}, tmp_path, "s2"))
    assert again["changed"] is False and again["ended_now"] == []


def test_state_stopped_without_a_run_writes_a_launch_record(tmp_path: Path, run_dir: Path) -> None:
    result = finish(start_module({"run_dir": str(run_dir), "state": "stopped"}, tmp_path))
    assert result["changed"] is False
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["rc"] is None and launch["killed_pids"] == []


def test_a_run_directory_is_never_reused(tmp_path: Path, fake_python: Path, run_dir: Path) -> None:
    run(module_args(run_dir, fake_python, environment={"FAKE_MODE": "ok"}), tmp_path)
    result = finish(start_module(module_args(run_dir, fake_python), tmp_path, "again"))
    assert result["failed"] is True
    assert "already holds a run" in result["msg"] and str(run_dir) in result["msg"]


@pytest.mark.torchrun
def test_real_torchrun_rank_logs_and_rc(tmp_path: Path, run_dir: Path) -> None:
    (run_dir / "check.py").write_text(
        "import os, sys\nrank = int(os.environ['RANK'])\n"
        "print('hello from rank', rank, flush=True)\n"
        "sys.exit(7 if rank == 1 else 0)\n"
    )
    args = module_args(
        run_dir,
        Path(sys.executable),
        nproc_per_node=2,
        rank_offset=0,
        master_port=29561,
        script_args=[],
        timeout=60,
    )
    started = finish(start_module(args, tmp_path, "start"))
    result = finish(
        start_module(finished_args(run_dir, rank_offset=0), tmp_path, "wait"), timeout=120
    )
    assert result["timed_out"] is False and result["torchrun_rc"] == 1
    assert "hello from rank 0" in (run_dir / "results" / "rank-0.log").read_text()
    assert "hello from rank 1" in (run_dir / "results" / "rank-1.log").read_text()
    assert tagged_processes(run_dir) == [] and not pid_alive(started["supervisor_pid"])


# --- the launch's watch: looks, diagnose, stop details, a run nobody watches -------------------


def test_a_look_returns_the_progress_while_the_run_goes_on(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    rank_file(run_dir, 4, current_test="bandwidth_all_reduce", current_size=4096, test_index=3,
              test_count=9)  # fmt: skip
    began = time.monotonic()
    look = finish(
        start_module(finished_args(run_dir, watch_s=0.5, watch_ifname="lo"), tmp_path, "look")
    )
    assert time.monotonic() - began < 15
    assert look["running"] is True and look["changed"] is False
    assert look["progress"][0]["rank"] == 4 and look["progress"][0]["size"] == 4096
    assert look["interface"]["ifname"] == "lo" and look["workers_exited"] is False
    assert len(tagged_processes(run_dir)) == 5, "a look ends nothing"
    assert (run_dir / "watch.json").is_file()
    probe = {"ifname": "lo", "probes": [{"host": "me", "address": "127.0.0.1", "port": 9}]}
    diag = finish(start_module(finished_args(run_dir, diagnose=probe), tmp_path, "diag"))
    assert diag["running"] is True and len(tagged_processes(run_dir)) == 5
    assert diag["diagnosis"]["probes"][0]["ok"] is True  # refused: the host answers
    details = {"kind": "stall", "test": "bandwidth_all_reduce", "size_bytes": 4096}
    stop = finish(
        start_module(
            finished_args(run_dir, stop_reason="stalled: x", stop_details=details), tmp_path, "s"
        )
    )
    assert stop["running"] is False and tagged_processes(run_dir) == []
    # In the result too: the watch and the relaunch decision read a named cause from it.
    assert stop["stopped_by"] == "stalled: x" and stop["stop"] == details
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["stopped_by"] == "stalled: x" and launch["stop"] == details
    assert launch["rank_exits"] == []


def test_the_supervisor_ends_a_run_nobody_looks_at_any_more(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    """Ctrl-C between two looks: no session is open on the node to notice; the watch file is."""
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    look = finish(
        start_module(finished_args(run_dir, watch_s=0.2, watch_stale_s=3), tmp_path, "look")
    )
    assert look["running"] is True
    wait_or_fail(lambda: tagged_processes(run_dir) == [], timeout=30)
    # Nobody will come to collect: the supervisor leaves nothing behind.
    wait_or_fail(lambda: not run_dir.exists(), timeout=15)


def test_a_diagnosis_is_a_look_the_supervisor_waits_for(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    """The controller diagnosing a stall (its call, the wait for the other hosts' evidence, the
    stop call) is still there: a diagnose call of a watched run renews the watch mark (the one
    the supervisor reads, tested above) for its watch_stale_s; of a run nobody watches it adds
    none."""
    start_hanging_run(tmp_path, fake_python, run_dir, timeout=120)
    probe = {"ifname": "lo", "probes": []}
    diag = finish(start_module(finished_args(run_dir, diagnose=probe), tmp_path, "d0"))
    assert diag["running"] is True and not (run_dir / "watch.json").exists()
    look = finish(
        start_module(finished_args(run_dir, watch_s=0.2, watch_stale_s=60), tmp_path, "look")
    )
    assert look["running"] is True
    before = time.time()
    args = finished_args(run_dir, diagnose=probe, watch_stale_s=77)
    diag = finish(start_module(args, tmp_path, "d1"))
    assert diag["running"] is True and len(tagged_processes(run_dir)) == 5
    mark = json.loads((run_dir / "watch.json").read_text())
    assert mark["stale_after_s"] == 77 and mark["at"] >= before, mark
    stop = finish(start_module(finished_args(run_dir, stop_reason="stalled: x"), tmp_path, "s"))
    assert stop["running"] is False and tagged_processes(run_dir) == []
