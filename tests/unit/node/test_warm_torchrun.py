# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""src/nccl_preflight/node/warm_torchrun.py: the torch probe that becomes torchrun.

Real processes with the lab nodes' Python (torch, no numpy): the warm probe prints the same JSON as
the plain probe, holds on, and on its go runs a real `torchrun` (static rendezvous on loopback,
one rank) whose ranks see the go's environment, exit status as `python -m torch.distributed.run`
gives it; under node/supervisor.py's Supervision (adopt) the run is recorded and joined as a cold
start's.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_preflight.node.listener import (
    PROBE_OUT,
    RESULT_FILE,
    python_facts,
    spawn_listener,
    start_python_probe,
    stop_listener,
)
from nccl_preflight.node.processes import (
    PR_SET_CHILD_SUBREAPER,
    descendants,
    is_alive,
    process_table,
    read_json,
)
from nccl_preflight.node.run_start import build_argv
from nccl_preflight.node.supervisor import LAUNCH_FILE, RESULTS_DIR, Supervision
from nccl_preflight.node.warm_launch import WARM_FILE, launch_in_holder
from nccl_preflight.node.warm_torchrun import (
    go,
    held,
    release,
    wait_ready,
)
from tests.lab.base import node_python, node_python_missing
from tests.ports import free_port

PYTHON = node_python()


@pytest.fixture(autouse=True)
def no_subreaper_left() -> Iterator[None]:
    """Supervision makes its process a child subreaper (orphans of its tree come to it): here
    that is this test process, so undo it after each test, or the detached processes of later
    tests in this worker would be reparented to it."""
    yield
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0


pytestmark = pytest.mark.skipif(
    node_python_missing(PYTHON) is not None, reason=str(node_python_missing(PYTHON))
)

# The rank: writes what it saw (its rank, the go's variable, its arguments), exits with argv[2].
RANK = """\
import json, os, sys
with open(sys.argv[1], "w") as out:
    json.dump({"rank": os.environ["RANK"], "world": os.environ["WORLD_SIZE"],
               "marker": os.environ.get("WARM_MARKER"), "wrapped": os.environ.get("WRAPPED"),
               "args": sys.argv[1:]}, out)
sys.exit(int(sys.argv[2]))
"""


def started(tmp_path: Path, python: str = PYTHON) -> tuple[subprocess.Popen, str]:
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    ready = str(probe_dir / "ready")
    process, error = start_python_probe(str(probe_dir), python, ready)
    assert process is not None, error
    return process, ready


def torchrun_argv(tmp_path: Path, rc: int, run_dir: Path | None = None) -> list[str]:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    params = {
        "python": PYTHON,
        "run_dir": str(run_dir or tmp_path),
        "nnodes": 1,
        "node_rank": 0,
        "nproc_per_node": 1,
        "master_addr": "127.0.0.1",
        "master_port": free_port(),
        "local_addr": "127.0.0.1",
        "rdzv_id": "warm-test",
        "script": str(script),
        "script_args": [str(tmp_path / "rank.json"), str(rc)],
    }
    return build_argv(params)


def test_the_warm_probe_prints_the_probe_and_holds_on_until_stdin_ends(tmp_path: Path) -> None:
    process, ready = started(tmp_path)
    try:
        assert wait_ready(process, ready, time.monotonic() + 120) == 0
        facts = json.loads((tmp_path / "probe" / PROBE_OUT).read_text())
        assert facts["torch_version"] and facts["reason"] == ""
        time.sleep(0.3)
        assert held(process, ready)  # still there, waiting for its go
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=120) == 0  # stdin's end: it ended by itself
        assert not (tmp_path / "rank.json").exists()  # nothing launched
    finally:
        if process.poll() is None:
            process.kill()


def test_release_ends_a_held_probe_at_once(tmp_path: Path) -> None:
    process, ready = started(tmp_path)
    assert wait_ready(process, ready, time.monotonic() + 120) == 0
    began = time.monotonic()
    release(process)
    assert process.poll() is not None and time.monotonic() - began < 5


def test_a_node_without_torch_ends_the_probe_with_its_reason(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "torch.py").write_text("raise ImportError('torch hidden by the test')\n")
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nPYTHONPATH={blocked} exec {PYTHON} "$@"\n')
    fake.chmod(0o755)
    process, ready = started(tmp_path, str(fake))
    assert wait_ready(process, ready, time.monotonic() + 60) == 0
    process.wait(timeout=10)  # it does not hold on: there is nothing to launch with
    assert not held(process, ready) and not os.path.exists(ready)
    facts = json.loads((tmp_path / "probe" / PROBE_OUT).read_text())
    assert "torch hidden by the test" in facts["reason"]


def test_the_go_runs_torchrun_as_python_m_would(tmp_path: Path) -> None:
    """A rank that fails (exit 3): the warm go ends as a cold `python -m torch.distributed.run`
    does, its rank saw the same. (A warm go whose rank passes ends 0: the wrapper and the
    supervision tests below.)"""
    rank_rc = 3
    argv = torchrun_argv(tmp_path, rank_rc)
    cold = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, timeout=120, env={**os.environ, "WARM_MARKER": "x"}
    )
    cold_seen = json.loads((tmp_path / "rank.json").read_text())
    (tmp_path / "rank.json").unlink()
    argv = torchrun_argv(tmp_path, rank_rc)  # a new port
    process, ready = started(tmp_path)
    try:
        assert wait_ready(process, ready, time.monotonic() + 120) == 0
        log = tmp_path / "torchrun.log"
        go(process, str(tmp_path), str(log), {**os.environ, "WARM_MARKER": "x"}, argv[3:])
        rc = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    seen = json.loads((tmp_path / "rank.json").read_text())
    assert (rc != 0, seen["rank"], seen["marker"]) == (cold.returncode != 0, "0", "x")
    assert seen == cold_seen
    warm_text = log.read_text()
    assert rc != 0 and "ChildFailedError" in warm_text
    # No RuntimeWarning of torch.distributed.run run a second time (as runpy.run_module said).
    assert "RuntimeWarning" not in warm_text and "RuntimeWarning" not in cold.stderr.decode()


def test_a_wrapper_named_as_the_python_reaches_the_ranks_as_in_a_cold_start(
    tmp_path: Path,
) -> None:
    """nccl_python may be a wrapper script that sets the environment up (a module load, a
    PYTHONPATH): its variables reach the ranks of a warm start too, under the launch's."""
    wrapper = tmp_path / "python-wrapped"
    wrapper.write_text(f'#!/bin/sh\nWRAPPED=yes WARM_MARKER=wrapper exec {PYTHON} "$@"\n')
    wrapper.chmod(0o755)
    process, ready = started(tmp_path, str(wrapper))
    try:
        assert wait_ready(process, ready, time.monotonic() + 120) == 0
        run = Supervision(torchrun_argv(tmp_path, 0), tmp_path, 120, 2)
        run.write_pids()
        run.adopt(process, {**os.environ, "WARM_MARKER": "x"})
        assert process.wait(timeout=120) == 0
    finally:
        if process.poll() is None:
            process.kill()
    seen = json.loads((tmp_path / "rank.json").read_text())
    assert (seen["wrapped"], seen["marker"]) == ("yes", "x")  # the launch's variables win


# Supervision in a process of its own, as in a run: its end() ends every descendant of its
# process, which in the test process would be the labs other tests of this worker hold.
SUPERVISE = """
import json, sys, time
from pathlib import Path
from nccl_preflight.node.listener import start_python_probe
from nccl_preflight.node.supervisor import Supervision
from nccl_preflight.node.warm_torchrun import wait_ready
python, probe_dir, run_dir, argv = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
ready = str(probe_dir / "ready")
process, error = start_python_probe(str(probe_dir), python, ready)
assert process is not None, error
assert wait_ready(process, ready, time.monotonic() + 120) == 0
run = Supervision(argv, run_dir, 120, 2)
run.write_pids()
run.adopt(process, {})
run.watch(time.monotonic() + 120)
run.end(rank_offset=4)
"""


def test_supervision_adopts_the_warm_probe_as_torchrun(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / RESULTS_DIR).mkdir(parents=True)
    (tmp_path / "probe").mkdir()
    argv = torchrun_argv(tmp_path, 0, run_dir)
    done = subprocess.run(
        [sys.executable, "-c", SUPERVISE, PYTHON, str(tmp_path / "probe"), str(run_dir), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    launch = json.loads((run_dir / LAUNCH_FILE).read_text())
    assert (launch["rc"], launch["warm_start"], launch["cmd"]) == (0, True, argv)
    assert (run_dir / RESULTS_DIR / "rank-4.log").is_file()  # the ranks' logs joined
    assert json.loads((tmp_path / "rank.json").read_text())["world"] == "1"


def test_adopting_a_probe_that_went_away_raises_so_the_start_is_cold(tmp_path: Path) -> None:
    process, ready = started(tmp_path)
    assert wait_ready(process, ready, time.monotonic() + 120) == 0
    process.kill()
    process.wait()
    run = Supervision(torchrun_argv(tmp_path, 0), tmp_path, 60, 1)
    with pytest.raises(OSError):
        run.adopt(process, dict(os.environ))


# --- the Ansible path: the listener process holds the probe and becomes the supervisor --------


def warm_listener(tmp_path: Path, python: str = PYTHON) -> tuple[Path, int]:
    """A pre-flight listener process (no socket: only the probe), started warm; -> its
    directory and pid, once it holds the probe."""
    path = tmp_path / "preflight"
    path.mkdir(mode=0o700)
    spec = {"executable": python, "timeout": 120.0, "warm": True}
    pid = spawn_listener(str(path), [], {}, time.monotonic() + 300, spec)
    assert pid
    deadline = time.monotonic() + 120
    while not (read_json(path / RESULT_FILE) or {}).get("holds"):
        assert time.monotonic() < deadline, (path / "listener.log").read_text()
        time.sleep(0.05)
    return path, pid


def test_the_listener_holds_the_probe_and_becomes_the_runs_supervisor(tmp_path: Path) -> None:
    path, pid = warm_listener(tmp_path)
    facts = python_facts(read_json(path / RESULT_FILE)["python_run"])
    assert facts["torch_version"]  # the pre-flight's answer, before any launch
    # the collect does not wait for the holder to exit: it ended its listening
    assert stop_listener(str(path), 5.0)["killed"] is False
    run_dir = tmp_path / "run"
    (run_dir / RESULTS_DIR).mkdir(parents=True)
    argv = torchrun_argv(tmp_path, 0, run_dir)
    # another Python than the probe's: no adoption, the start is cold
    assert (
        launch_in_holder(str(path), ["/usr/bin/python3", *argv[1:]], {}, run_dir, 60, 2, 0) is None
    )
    answer = launch_in_holder(str(path), argv, dict(os.environ), run_dir, 120, 2, 6)
    assert answer is not None and answer["supervisor_pid"] == pid, answer
    deadline = time.monotonic() + 120
    while not (run_dir / LAUNCH_FILE).is_file():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    launch = json.loads((run_dir / LAUNCH_FILE).read_text())
    assert (launch["rc"], launch["warm_start"], launch["cmd"]) == (0, True, argv)
    assert (run_dir / RESULTS_DIR / "rank-6.log").is_file()
    assert json.loads((tmp_path / "rank.json").read_text())["rank"] == "0"


def test_with_no_launch_the_holder_lets_the_probe_go_when_its_directory_is_removed(
    tmp_path: Path,
) -> None:
    path, pid = warm_listener(tmp_path)
    warm = read_json(path / WARM_FILE)
    probes = [p for p in descendants(pid, process_table()) if p != pid]
    assert probes and warm["pid"] == pid
    shutil.rmtree(path)
    deadline = time.monotonic() + 10
    while is_alive(pid, warm["start_time"]) or any(p in process_table() for p in probes):
        assert time.monotonic() < deadline, "the holder or its probe is still there"
        time.sleep(0.05)
