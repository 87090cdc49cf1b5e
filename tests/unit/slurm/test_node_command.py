# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""node-check as a health check operators can leave on (slurm/node_command.py, node_lock.py,
node_guard.py), end to end through bin/nccl-preflight on this machine:

- its options are range-checked before anything runs, the error naming the option;
- one at a time per node: while another holds the node's lock, a node-check exits at once with
  the last verdict (when fresh) or 0, and checks nothing;
- a check that could not finish in its own time (the torch probe killed at --timeout) says so
  and drains nothing, even with a failed check beside it;
- every process it starts ends with it: at its normal end, on SIGTERM, SIGINT, and when it is
  SIGKILLed (the guard ends them).

A stand-in 'python' plays the torch probe: it answers the lab nodes' recorded answer, or sleeps
(a torch import that does not finish), with a marker in its argv to find its processes by.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nccl_preflight.slurm import node_lock
from nccl_preflight.slurm.node_guard import Ending
from tests.builders.node_check import BIN, HEALTHY, MISSING_IF, calls
from tests.polling import wait_or_fail

NODE = "node7"


@pytest.fixture
def drains(scontrol: Path) -> Path:
    """test_node_check's fake scontrol first on PATH; its calls, one argv per line."""
    return scontrol


def slow_python(tmp_path: Path, marker: str) -> Path:
    """A 'python' whose probe never finishes: a shell that waits on a sleep (a grandchild of
    node-check's work, so that only the guard can end it when the shell is killed)."""
    script = tmp_path / "python-slow"
    script.write_text(f"#!/bin/sh\nsleep {marker}\necho never\n")
    script.chmod(0o755)
    return script


def marked(marker: str) -> list[int]:
    """Pids of this machine's processes whose command line is `sleep <marker>`."""
    found = subprocess.run(["pgrep", "-f", f"^sleep {marker}$"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def command(tmp_path: Path, config: str, *args: str) -> list[str]:
    path = tmp_path / "config.yml"
    fast = tmp_path / "python-recorded"
    out = Path(__file__).resolve().parents[2] / "fixtures" / "torch" / "probe-cpu-lab-node.json"
    fast.write_text(f"#!/bin/sh\ncat {out}\n")
    fast.chmod(0o755)
    path.write_text(config.replace("PYTHON", str(fast)))
    state = ["--state-dir", str(tmp_path / "state")]
    return [sys.executable, str(BIN), "node-check", "--config", str(path), *state, *args]


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMD_", "SLURM_"))}
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    return {**env, "SLURMD_NODENAME": NODE, **extra}


def run(tmp_path: Path, config: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(tmp_path, config, *args),
        capture_output=True,
        text=True,
        env=environment(tmp_path, **env),
        timeout=120,
        check=False,
    )


# ------------------------------------------------------------------ options, before anything runs


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc", "3601", ""])
def test_a_timeout_out_of_range_is_refused_naming_the_option(
    tmp_path: Path, drains: Path, value: str
) -> None:
    done = run(tmp_path, HEALTHY, "--drain", "--timeout", value)
    assert done.returncode == 2
    assert (
        "argument --timeout: " in done.stderr and "greater than 0 and at most 3600" in done.stderr
    )
    assert done.stdout == "" and calls(drains) == []
    assert not (tmp_path / "state").exists()  # nothing ran: not even the lock was taken


def test_a_timeout_in_range_is_taken(tmp_path: Path, drains: Path) -> None:
    done = run(tmp_path, HEALTHY, "--timeout", "3600")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "healthy" in done.stdout.splitlines()[-1]


def test_a_relative_state_dir_is_refused_naming_the_option(tmp_path: Path) -> None:
    done = run(tmp_path, HEALTHY, "--state-dir", "state")
    assert done.returncode == 2
    assert "argument --state-dir: 'state': give an absolute path" in done.stderr


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda d: (d.mkdir(), d.chmod(0o777)), "writable by others (mode 0777); chmod go-w"),
        (lambda d: d.symlink_to(d.parent), "is a symbolic link"),
        (lambda d: d.write_text(""), "not a directory"),
        (lambda d: None, None),  # made, 0700
    ],
)
def test_the_state_dir_is_checked_before_anything_runs(
    tmp_path: Path, drains: Path, make: Callable[[Path], object], said: str | None
) -> None:
    where = tmp_path / "mine"
    make(where)
    done = run(tmp_path, MISSING_IF, "--drain", "--state-dir", str(where))
    if said is None:
        assert done.returncode == 1, done.stderr
        assert (where.stat().st_mode & 0o777) == 0o700
        assert (where / f"node-check-{NODE}.lock").exists()
        return
    assert done.returncode == 2
    assert done.stderr.startswith(f"node-check: --state-dir {where}: {said}")
    assert done.stdout == "" and calls(drains) == []


def test_a_state_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    where = tmp_path / "theirs"
    where.mkdir(mode=0o700)
    os.chown(where, 65534, 65534)
    done = run(tmp_path, HEALTHY, "--state-dir", str(where))
    assert done.returncode == 2
    assert "owned by uid 65534, not by this user" in done.stderr


def test_a_node_name_never_names_another_directory() -> None:
    assert node_lock.file_stem("../../etc/x y") == "node-check-.._.._etc_x_y"
    assert node_lock.file_stem("gpu-01.rack2") == "node-check-gpu-01.rack2"


# ------------------------------------------------------------------ one at a time


def holding_the_lock(tmp_path: Path, last: dict | None) -> node_lock.NodeLock:
    """This test process takes the node's lock, as a running node-check would, and notes
    itself as running; ``last``: the verdict to leave beside it."""
    state_dir = node_lock.prepare_state_dir(str(tmp_path / "state"))
    lock = node_lock.NodeLock(state_dir, NODE)
    assert lock.acquire()
    if last is not None:
        lock.record_verdict(last)
    lock.record_running(os.getpid())
    return lock


@pytest.mark.parametrize(
    ("last", "age", "env", "status", "said"),
    [
        (None, 0, {}, 0, "no verdict from the last 600 s: exit 0"),
        ({"verdict": "failed", "summary": "1 check(s) failed (21 checks, 3.0 s)"}, 5, {}, 1,
         "s ago: 1 check(s) failed (21 checks, 3.0 s)"),
        ({"verdict": "healthy", "summary": "healthy (21 checks, 3.0 s)"}, 0, {}, 0,
         "s ago: healthy (21 checks, 3.0 s)"),
        ({"verdict": "failed", "summary": "1 check(s) failed"}, 601, {}, 0,
         "no verdict from the last 600 s"),
        ({"verdict": "unfinished", "summary": "unfinished: ..."}, 1, {}, 3, "unfinished"),
        ({"verdict": "unfinished", "summary": "unfinished: ..."}, 1,
         {"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}, 0, "unfinished"),
    ],
)  # fmt: skip
def test_a_second_node_check_exits_at_once_with_the_last_verdict(
    tmp_path: Path,
    drains: Path,
    last: dict | None,
    age: float,
    env: dict,
    status: int,
    said: str,
) -> None:
    lock = holding_the_lock(tmp_path, last)
    if last is not None:  # the verdict's time moved back by ``age``
        doc = lock.state()
        doc["last"]["ended"] -= age
        lock_state = Path(lock.state_path)
        lock_state.write_text(json.dumps(doc))
    done = run(tmp_path, MISSING_IF, "--drain", **env)
    assert done.returncode == status, done.stdout + done.stderr
    [line] = done.stdout.splitlines()  # nothing checked: no finding printed
    assert line.startswith(
        f"node-check: {NODE}: another node-check is running on this node (pid {os.getpid()}, for "
    )
    assert "this one checks nothing and exits at once" in line and said in line
    if (
        last is not None and age <= 600
    ):  # the age it says: at least the verdict's (a loaded machine)
        said_age = line.split("the last verdict, ")[1].split(" s ago")[0]
        assert float(said_age) >= age
    assert calls(drains) == []  # a failed check was not run again, nor drained


def test_the_lock_is_free_again_after_a_node_check(tmp_path: Path, drains: Path) -> None:
    first = run(tmp_path, MISSING_IF, "--drain")
    assert first.returncode == 1
    second = run(tmp_path, HEALTHY, "--json")
    assert second.returncode == 0, second.stdout + second.stderr
    doc = json.loads(second.stdout)
    assert doc["exit"] == 0 and doc["results"] and "busy" not in doc
    state = json.loads((tmp_path / "state" / f"node-check-{NODE}.json").read_text())
    assert state["last"]["verdict"] == "healthy" and "running" not in state


# ------------------------------------------------------------------ its own slowness never drains


def test_a_torch_probe_killed_at_the_timeout_is_unfinished_and_drains_nothing(
    tmp_path: Path, drains: Path
) -> None:
    marker = "61.4231"
    config = HEALTHY.replace("PYTHON", str(slow_python(tmp_path, marker)))
    # 20 s: the commands finish well within it even on a loaded machine; the probe never does
    done = run(tmp_path, config, "--drain", "--timeout", "20")
    assert done.returncode == 3, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith(
        f"node-check: {NODE}: unfinished: the torch probe (import torch) did not finish within "
        "--timeout 20 s and was killed: node-check's own slowness, not a finding about the node; "
        "nothing drained (1 check(s) failed, possibly for that: versions) ("
    ), last
    assert "versions: failed: " in done.stdout  # shown, not acted on
    assert "not drained: this node-check could not finish in its own time" in done.stderr
    assert calls(drains) == []
    assert marked(marker) == []  # the probe's own child ended with node-check
    state = json.loads((tmp_path / "state" / f"node-check-{NODE}.json").read_text())
    assert state["last"]["verdict"] == "unfinished" and state["last"]["drained"] is False


def test_a_finding_beside_a_killed_torch_probe_still_drains(tmp_path: Path, drains: Path) -> None:
    config = MISSING_IF.replace("PYTHON", str(slow_python(tmp_path, "61.4233")))
    done = run(tmp_path, config, "--drain", "--timeout", "20", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["unfinished"] == ["the torch probe (import torch)"]
    assert doc["not_judged"] == ["versions"]
    [argv] = calls(drains)  # the interface is the node's: drained for it, not for versions
    assert argv[3].startswith("reason=nccl-preflight: interface: interface nosuch0 does not exist")
    assert "versions" not in argv[3]
    plain = run(tmp_path, config, "--timeout", "20")
    last = plain.stdout.splitlines()[-1]
    assert (
        last.startswith(f"node-check: {NODE}: ")
        and (
            " check(s) failed; unfinished: the torch probe (import torch) did not finish within "
            "--timeout 20 s and was killed, so versions not judged ("
        )
        in last
    )


def test_unfinished_exits_0_as_a_prolog(tmp_path: Path, drains: Path) -> None:
    config = HEALTHY.replace("PYTHON", str(slow_python(tmp_path, "61.4232")))
    done = run(tmp_path, config, "--drain", "--timeout", "1", SLURM_SCRIPT_CONTEXT="prolog_slurmd")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "; exit 0 as a Prolog/Epilog (Slurm would drain the node on another)" in done.stdout
    assert calls(drains) == []


def test_a_finished_failure_still_drains(tmp_path: Path, drains: Path) -> None:
    done = run(tmp_path, MISSING_IF, "--drain", "--timeout", "30")
    assert done.returncode == 1
    assert [argv[:3] for argv in calls(drains)] == [["update", f"nodename={NODE}", "state=drain"]]


# ------------------------------------------------------------------ every child ends with it


@pytest.mark.parametrize(
    ("sig", "status", "why"),
    [
        (signal.SIGTERM, 128 + signal.SIGTERM, "node-check was stopped by SIGTERM"),
        (signal.SIGINT, 128 + signal.SIGINT, "node-check was stopped by SIGINT"),
        (signal.SIGKILL, -signal.SIGKILL, "node-check's process was killed"),
    ],
)
def test_every_process_it_started_ends_with_node_check(
    tmp_path: Path, drains: Path, sig: int, status: int, why: str
) -> None:
    marker = f"62.{int(sig)}{os.getpid() % 1000}"
    config = MISSING_IF.replace("PYTHON", str(slow_python(tmp_path, marker)))
    proc = subprocess.Popen(
        command(tmp_path, config, "--drain", "--timeout", "300"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(tmp_path),
    )
    try:
        wait_or_fail(lambda: marked(marker) != [], what="the torch probe to start")
        proc.send_signal(sig)  # to node-check's pid only: its children are not told
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, out + err
    wait_or_fail(lambda: marked(marker) == [], 30, f"the probe's sleep {marker} to end")
    state_path = tmp_path / "state" / f"node-check-{NODE}.json"
    wait_or_fail(lambda: "last" in json.loads(state_path.read_text()), 30, "the verdict")
    state = json.loads(state_path.read_text())
    assert state["last"]["verdict"] == "unfinished" and why in state["last"]["summary"]
    if sig != signal.SIGKILL:
        assert f"node-check: {NODE}: unfinished: {why}; every process it started was ended" in err
    assert calls(drains) == []


def test_ending_says_why() -> None:
    assert Ending(code=0).why() == ""
    assert Ending(signal=15, stopped=True).why() == "node-check was stopped by SIGTERM"
    assert Ending().why() == "node-check's process was killed"
    assert Ending(signal=9).why() == "node-check's work was ended by SIGKILL"


def test_a_bad_config_is_refused_even_while_another_node_check_runs(
    tmp_path: Path, drains: Path
) -> None:
    holding_the_lock(tmp_path, {"verdict": "healthy", "summary": "healthy"})
    done = run(tmp_path, HEALTHY + "nccl_backend: nosuch\n", "--drain")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "config.yml" in done.stderr and "nccl_backend" in done.stderr
    assert "another node-check" not in done.stdout + done.stderr
    assert calls(drains) == []


# ------------------------------------------------------------------ the torch reading, reused


def counting_python(tmp_path: Path, answer: str) -> tuple[Path, Path]:
    """A 'python' that notes each run in a file and prints ``answer`` (a probe's JSON)."""
    runs = tmp_path / "python.runs"
    reply = tmp_path / "answer.json"
    reply.write_text(answer)
    script = tmp_path / "python-counting"
    script.write_text(f"#!/bin/sh\necho run >> {runs}\ncat {reply}\n")
    script.chmod(0o755)
    return script, runs


def runs_of(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "torch" / "probe-cpu-lab-node.json"


def test_a_torch_reading_is_reused_for_torch_max_age(tmp_path: Path, drains: Path) -> None:
    python, runs = counting_python(tmp_path, RECORDED.read_text())
    config = HEALTHY.replace("PYTHON", str(python))
    first = run(tmp_path, config)
    assert first.returncode == 0 and runs_of(runs) == 1, first.stdout + first.stderr
    assert "torch read" not in first.stdout
    second = run(tmp_path, config, "--json")
    assert second.returncode == 0 and runs_of(runs) == 1  # not imported again
    doc = json.loads(second.stdout)
    assert doc["torch_read_s_ago"] is not None and doc["torch_read_s_ago"] >= 0
    versions = {r["check"]: r for r in doc["results"]}["versions"]
    assert versions["status"] == "passed" and "torch 2.13.0" in versions["message"]
    third = run(tmp_path, config, "--torch-max-age", "0")  # 0: always import
    assert third.returncode == 0 and runs_of(runs) == 2
    os.utime(python, (time.time() + 5, time.time() + 5))  # another Python at the same path
    fourth = run(tmp_path, config)
    assert fourth.returncode == 0 and runs_of(runs) == 3
    fifth = run(tmp_path, config)
    assert runs_of(runs) == 3 and "; torch read " in fifth.stdout.splitlines()[-1]


def test_a_reading_without_torch_is_never_reused(tmp_path: Path, drains: Path) -> None:
    doc = json.loads(RECORDED.read_text())
    doc.update(torch_version=None, reason="torch is not importable: ModuleNotFoundError: torch")
    python, runs = counting_python(tmp_path, json.dumps(doc))
    config = HEALTHY.replace("PYTHON", str(python))
    for n in (1, 2):
        done = run(tmp_path, config, "--drain")
        assert done.returncode == 1 and runs_of(runs) == n, done.stdout + done.stderr
        assert "versions: failed: " in done.stdout and "torch is not importable" in done.stdout
    assert not (tmp_path / "state" / f"node-check-{NODE}.torch.json").exists()


def test_a_lock_that_cannot_be_opened_is_refused_naming_the_option(
    tmp_path: Path, drains: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / f"node-check-{NODE}.lock").mkdir()  # not a file: it cannot be opened
    done = run(tmp_path, MISSING_IF, "--drain")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"node-check: --state-dir {state}: cannot open ")
    assert calls(drains) == []


def test_a_verdict_that_cannot_be_kept_does_not_stop_the_check(
    tmp_path: Path, drains: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / f"node-check-{NODE}.json").mkdir()  # cannot be replaced by a file
    done = run(tmp_path, MISSING_IF, "--drain")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"node-check: cannot write {state}/node-check-{NODE}.json: " in done.stderr
    assert [argv[:3] for argv in calls(drains)] == [["update", f"nodename={NODE}", "state=drain"]]
