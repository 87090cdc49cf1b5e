"""library/nccl_torchrun.py: bounded run, the whole process tree ended by recorded pid, launch.json.

The module runs as Ansible runs it on a node: a separate Python process reading its arguments
from a file. A fake "python" stands in for torchrun: like torchrun it puts every worker in a new
session (so killing torchrun's process group is not enough), and the workers start children.
One test runs the real torchrun with a tiny script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import nccl_torchrun
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "library" / "nccl_torchrun.py"

FAKE_TORCHRUN = textwrap.dedent(
    """\
    #!{python}
    # Stands in for `python -m torch.distributed.run ...`: argv is ignored except --log-dir.
    import os, signal, subprocess, sys, time
    mode = os.environ.get("FAKE_MODE", "hang")
    log_dir = sys.argv[sys.argv.index("--log-dir") + 1]
    nproc = int(sys.argv[sys.argv.index("--nproc-per-node") + 1])
    worker = (
        "import os, signal, subprocess, sys, time\\n"
        "if os.environ.get('FAKE_STUBBORN'):\\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\\n"
        "print('worker', sys.argv[1], 'up', flush=True)\\n"
        "print('worker', sys.argv[1], 'complains', file=sys.stderr, flush=True)\\n"
        "time.sleep(600 if sys.argv[2] == 'hang' else 0)\\n"
    )
    procs = []
    for local_rank in range(nproc):
        d = os.path.join(log_dir, "nccl-preflight_abc", "attempt_0", str(local_rank))
        os.makedirs(d, exist_ok=True)
        out = open(os.path.join(d, "stdout.log"), "w")
        err = open(os.path.join(d, "stderr.log"), "w")
        procs.append(subprocess.Popen([sys.executable, "-c", worker, str(local_rank), mode],
                                      stdout=out, stderr=err, start_new_session=True))
    print("fake torchrun started", [p.pid for p in procs], flush=True)
    if mode == "hang":
        time.sleep(600)
    for p in procs:
        p.wait()
    sys.exit(3 if mode == "fail" else 0)
    """
)


def tagged_processes(run_dir: Path) -> list[int]:
    """Live processes whose environment carries this run directory (the module tags them)."""
    marker = f"NCCL_PREFLIGHT_RUN_DIR={run_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in environ.split(b"\0") and state not in "ZX":
            found.append(int(entry))
    return found


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_TORCHRUN.format(python=sys.executable))
    path.chmod(0o755)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "nccl-preflight-run-node1"
    path.mkdir(mode=0o700)
    (path / "nccl.env").write_text(
        "NCCL_SOCKET_IFNAME='eth1'\nGLOO_SOCKET_IFNAME='eth1'\nNCCL_DEBUG=WARN\n"
        "export NCCL_IB_HCA='mlx5_0 mlx5_1'  # comment\n"
    )
    (path / "check.py").write_text("print('hello')\n")
    return path


def module_args(run_dir: Path, python: Path, **over: Any) -> dict[str, Any]:
    args = {
        "run_dir": str(run_dir),
        "python": str(python),
        "script": str(run_dir / "check.py"),
        "script_args": ["--out-dir", str(run_dir / "results")],
        "nnodes": 1,
        "node_rank": 0,
        "nproc_per_node": 2,
        "rank_offset": 4,
        "master_addr": "127.0.0.1",
        "master_port": 29555,
        "local_addr": "127.0.0.1",
        "env_file": str(run_dir / "nccl.env"),
        "timeout": 30,
        "kill_grace": 2,
    }
    args.update(over)
    return args


def start_module(args: dict[str, Any], tmp_path: Path, name: str = "args") -> subprocess.Popen:
    args_file = tmp_path / f"{name}.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    return subprocess.Popen(
        [sys.executable, str(MODULE), str(args_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert out.strip(), f"module printed nothing; stderr:\n{err}"
    return json.loads(out)


def wait_for(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


# --- pure helpers -----------------------------------------------------------------------------


def test_parse_env_file_reads_shell_quoted_values() -> None:
    env = nccl_torchrun.parse_env_file(
        "# nccl.env\nNCCL_SOCKET_IFNAME='eth 1'\n\nexport NCCL_DEBUG=INFO\nA='x=y'  # c\n"
    )
    assert env == {"NCCL_SOCKET_IFNAME": "eth 1", "NCCL_DEBUG": "INFO", "A": "x=y"}


def test_parse_env_file_names_the_bad_line() -> None:
    with pytest.raises(ValueError, match=r"nccl.env:2: expected KEY=value"):
        nccl_torchrun.parse_env_file("A=1\nrm -rf /\n")


def test_build_argv_is_static_rendezvous_with_local_addr() -> None:
    argv = nccl_torchrun.build_argv(
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
    stat = nccl_torchrun.parse_stat(text)
    assert stat == {"state": "S", "ppid": 1, "pgid": 1234, "sid": 1234, "starttime": 98765}


# --- the module, as a node runs it ------------------------------------------------------------


def test_timeout_ends_every_process_of_the_tree(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    started = time.monotonic()
    proc = start_module(
        module_args(run_dir, fake_python, timeout=3, environment={"FAKE_MODE": "hang"}), tmp_path
    )
    result = finish(proc)
    elapsed = time.monotonic() - started
    assert result["timed_out"] is True
    assert elapsed < 3 + 2 + 5, f"took {elapsed:.1f}s"
    # torchrun + 2 workers + 2 grandchildren, all recorded and ended.
    assert len(result["killed_pids"]) == 5
    assert tagged_processes(run_dir) == []
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["timed_out"] is True and launch["timeout_s"] == 3
    assert sorted(launch["killed_pids"]) == sorted(result["killed_pids"])
    assert launch["rc"] == -signal.SIGTERM
    recorded = json.loads((run_dir / "torchrun.pids").read_text())
    assert {int(p) for p in recorded["processes"]} >= set(result["killed_pids"])
    # The per-rank logs are named by global rank (rank_offset 4 + local rank).
    assert sorted(p.name for p in (run_dir / "results").glob("*.log")) == [
        "rank-4.log",
        "rank-5.log",
    ]
    log = (run_dir / "results" / "rank-5.log").read_text()
    assert log.index("worker 1 up") < log.index("worker 1 complains")
    assert "fake torchrun started" in (run_dir / "torchrun.log").read_text()


def test_sigkill_follows_when_a_worker_ignores_sigterm(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    proc = start_module(
        module_args(
            run_dir,
            fake_python,
            timeout=2,
            kill_grace=1,
            environment={"FAKE_MODE": "hang", "FAKE_STUBBORN": "1"},
        ),
        tmp_path,
    )
    result = finish(proc)
    assert result["timed_out"] is True
    assert tagged_processes(run_dir) == []


def test_environment_comes_from_nccl_env(tmp_path: Path, run_dir: Path) -> None:
    script = tmp_path / "env-python"
    script.write_text(
        f"#!{sys.executable}\nimport json, os\n"
        "print(json.dumps({k: os.environ.get(k) for k in "
        "('NCCL_SOCKET_IFNAME', 'GLOO_SOCKET_IFNAME', 'NCCL_IB_HCA', 'EXTRA')}))\n"
    )
    script.chmod(0o755)
    result = finish(
        start_module(module_args(run_dir, script, environment={"EXTRA": "1"}), tmp_path)
    )
    assert (
        result["torchrun_rc"] == 0 and result["timed_out"] is False and result["killed_pids"] == []
    )
    seen = json.loads((run_dir / "torchrun.log").read_text().strip().splitlines()[-1])
    assert seen == {
        "NCCL_SOCKET_IFNAME": "eth1",
        "GLOO_SOCKET_IFNAME": "eth1",
        "NCCL_IB_HCA": "mlx5_0 mlx5_1",
        "EXTRA": "1",
    }


def test_failing_run_reports_its_rc_without_failing_the_task(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    result = finish(
        start_module(module_args(run_dir, fake_python, environment={"FAKE_MODE": "fail"}), tmp_path)
    )
    assert result.get("failed") is not True
    assert result["torchrun_rc"] == 3 and result["timed_out"] is False
    # The workers' own children outlived them: the module ends them too.
    assert len(result["killed_pids"]) == 2
    assert tagged_processes(run_dir) == []
    assert json.loads((run_dir / "launch.json").read_text())["rc"] == 3


def test_state_stopped_ends_a_running_tree_by_its_recorded_pids(
    tmp_path: Path, fake_python: Path, run_dir: Path
) -> None:
    runner = start_module(
        module_args(run_dir, fake_python, timeout=120, environment={"FAKE_MODE": "hang"}), tmp_path
    )
    wait_for(lambda: len(tagged_processes(run_dir)) == 5)
    wait_for(
        lambda: (
            (run_dir / "torchrun.pids").is_file()
            and len(json.loads((run_dir / "torchrun.pids").read_text())["processes"]) == 5
        )
    )
    stopper = start_module(
        {"run_dir": str(run_dir), "state": "stopped", "rank_offset": 4, "kill_grace": 2},
        tmp_path,
        name="stop",
    )
    stopped = finish(stopper)
    runner_result = finish(runner)
    assert tagged_processes(run_dir) == []
    assert runner_result["stopped_by"] == "SIGTERM"
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["stopped_by"] == "SIGTERM" and launch["timed_out"] is False
    assert len(launch["killed_pids"]) == 5
    assert stopped["rank_logs"] and Path(stopped["rank_logs"][0]).name == "rank-4.log"
    # Stopping again finds nothing alive and changes nothing.
    again = finish(start_module({"run_dir": str(run_dir), "state": "stopped"}, tmp_path, "s2"))
    assert again["changed"] is False and again["killed_pids"] == []


def test_state_stopped_without_a_run_writes_a_launch_record(tmp_path: Path, run_dir: Path) -> None:
    result = finish(start_module({"run_dir": str(run_dir), "state": "stopped"}, tmp_path))
    assert result["changed"] is False
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["rc"] is None and launch["killed_pids"] == []


def test_a_run_directory_is_never_reused(tmp_path: Path, fake_python: Path, run_dir: Path) -> None:
    finish(
        start_module(module_args(run_dir, fake_python, environment={"FAKE_MODE": "ok"}), tmp_path)
    )
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
    result = finish(start_module(args, tmp_path), timeout=120)
    assert result["timed_out"] is False and result["torchrun_rc"] == 1
    assert "hello from rank 0" in (run_dir / "results" / "rank-0.log").read_text()
    assert "hello from rank 1" in (run_dir / "results" / "rank-1.log").read_text()
    assert tagged_processes(run_dir) == []
