# Copyright (c) 2025-2026, nccl-preflight contributors
# SPDX-License-Identifier: MIT (see LICENSE)
"""The slurm command's own allocation on the lab's real Slurm (tests/lab/slurm.py): salloc's
options reach salloc, and an allocation that cannot start (a slurmd down before the run) is
explained while it pends, bounded by --wait-allocation, and cancelled on every way out, Ctrl-C
and SIGTERM included: the job never stays PENDING in squeue (issue 36, items 1 and 4).

Tests marked `lab` need root, the node Python (NCCL_LAB_NODE_PYTHON) and Debian's Slurm packages.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lab.fixtures import LabFactory, require_slurm
from tests.lab.harness import Lab
from tests.lab.runs import QUICK, new_run_id
from tests.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOWN_REASON = "Nodes required for job are DOWN, DRAINED or reserved"
PENDING_DOWN = f"(?:{re.escape(DOWN_REASON)}|ReqNodeNotAvail)"

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def slurm3(lab_factory: LabFactory) -> Lab:
    require_slurm()
    return lab_factory(3, slurm=True)


@pytest.fixture
def third_slurmd_down(slurm3: Lab) -> Iterator[str]:
    """The third node's slurmd stopped before the run, and the node DOWN in Slurm: what
    slurmctld makes of a slurmd that stopped answering once SlurmdTimeout passed (300 s by
    default; the test marks it down itself rather than wait). Its slurmd is started again and
    the node resumed afterwards, even on failure. -> the node's name."""
    node = slurm3.slurm_nodes[2]
    slurm3.slurm_stop_slurmd(2)
    try:
        slurm3.scontrol("update", f"nodename={node}", "state=down", "reason=slurmd stopped")
        yield node
    finally:
        slurm3.slurm_start_slurmd(2)


class Command:
    """bin/nccl-preflight slurm started in its own process group (as a shell starts a
    foreground command), its output read as it comes."""

    def __init__(self, lab: Lab, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
        self.run_id = new_run_id()
        config = {
            "nccl_fabric_cidr": lab.fabric_cidr,
            "nccl_backend": "gloo",
            "nccl_require_gpu": False,
            "nccl_python": lab.python,
            "nccl_run_timeout": 120,
            "nccl_check_args": QUICK,
            "nccl_run_id": self.run_id,
        }
        tmp_path.mkdir(parents=True, exist_ok=True)
        cfg = tmp_path / "nccl.yml"
        cfg.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in config.items()))
        self.reports = tmp_path / "reports"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SALLOC_"))}
        argv = [sys.executable, str(ROOT / "bin" / "nccl-preflight"), "slurm"]
        argv += ["--config", str(cfg), "--report-root", str(self.reports), *args]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**base, **lab.slurm_env(), **(env or {})},
            start_new_session=True,
        )
        self.out: list[tuple[float, str]] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: Any, into: list[Any]) -> None:
        for line in stream:
            into.append((time.monotonic() - self.started, line.rstrip("\n")) if into is self.out
                        else line.rstrip("\n"))  # fmt: skip

    def line(self, pattern: str, timeout: float = 180) -> tuple[float, re.Match[str]]:
        """The first stdout line matching ``pattern``, waited for: (seconds after the start,
        the match)."""
        found: list[tuple[float, re.Match[str]]] = []

        def seen() -> bool:
            found.extend((t, m) for t, line in list(self.out) if (m := re.search(pattern, line)))
            return bool(found)

        assert wait_for(seen, timeout, 0.1), f"no {pattern!r} in:\n{self.text()}"
        return found[0]

    def finish(self, timeout: float = 300) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(
                f"the command did not end within {timeout} s:\n{self.text()}"
            ) from None
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def text(self) -> str:
        return "\n".join(line for _, line in self.out) + "\n--- stderr\n" + "\n".join(self.err)


def live_jobs(lab: Lab) -> list[str]:
    """squeue's jobs of the lab (every state squeue shows by default: pending, running, ...)."""
    return lab.slurm_cmd("squeue", "-h", "-o", "%i %T %r").stdout.splitlines()


def sallocs(lab: Lab) -> list[str]:
    """salloc processes of this lab still alive (their SLURM_CONF is the lab's)."""
    conf = f"SLURM_CONF={lab.slurm_conf}".encode()
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"salloc") and conf in environ:
            found.append(entry)
    return found


def job_fields(lab: Lab, job: str) -> dict[str, str]:
    """`scontrol show job -o` as {field: value} (a finished job stays for MinJobAge)."""
    out = lab.scontrol("show", "job", "-o", job).stdout
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def assert_cancelled(lab: Lab, job: str, command: Command) -> None:
    """The job cancelled, squeue listing nothing, no salloc left, no report (nothing ran)."""
    assert live_jobs(lab) == [], command.text()
    assert job_fields(lab, job)["JobState"] == "CANCELLED"
    assert wait_for(lambda: sallocs(lab) == [], 30), sallocs(lab)
    assert not (command.reports / command.run_id).exists()


def test_a_slurmd_down_before_the_run_is_explained_and_the_wait_bounded(
    slurm3: Lab, third_slurmd_down: str, tmp_path: Path
) -> None:
    """The job pends (the node it needs is down): the command says the job id and Slurm's
    reason as soon as it pends, gives up after --wait-allocation with the job cancelled, exit 1
    (no_verdict: no node was tested). Before, it waited silently for ever."""
    command = Command(slurm3, tmp_path, "-N", "3", "--wait-allocation", "20")
    when, pending = command.line(r"job (\d+) is pending \((.*)\); waiting up to 20 s for its ")
    job = pending.group(1)
    # Slurm's reason for the same down node: DOWN_REASON at submit, ReqNodeNotAvail once its
    # scheduler has run (on a quiet machine, before the first squeue); each gets its hint.
    assert re.match(PENDING_DOWN, pending.group(2)), command.text()
    assert "(a node it needs is down" in pending.group(2) and "sinfo -R" in pending.group(2)
    assert when < 120, command.text()  # command start (imports, config) included, loaded machine
    assert [line.split()[:2] for line in live_jobs(slurm3)] == [[job, "PENDING"]]
    code = command.finish()
    elapsed = time.monotonic() - command.started
    assert code == 1, command.text()
    (last,) = command.err[-1:]
    assert re.search(
        rf"job {job} still pending after 2\d s \(--wait-allocation 20\): {PENDING_DOWN}.*; "
        rf"job {job} cancelled \(squeue no longer lists it\); no node was tested "
        r"\(no_verdict, exit 1\)$",
        last,
    ), command.text()
    assert 20 <= elapsed < 20 + 120, elapsed
    assert_cancelled(slurm3, job, command)
    # what was asked: the defaults, printed before the job was submitted
    assert command.out[0][1] == (
        "nccl-preflight slurm: salloc -N 3 --no-shell --job-name=nccl-preflight --exclusive"
    )


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_interrupting_a_pending_run_leaves_no_job_in_squeue(
    slurm3: Lab, third_slurmd_down: str, tmp_path: Path, how: str
) -> None:
    """Ctrl-C (SIGINT to the command's process group) or SIGTERM while the job pends: the job
    is cancelled and checked gone, and the message says so (before, it said the allocation was
    given back while the job stayed PENDING)."""
    command = Command(slurm3, tmp_path, "-N", "3", "--wait-allocation", "0")
    _, pending = command.line(r"job (\d+) is pending \(.*\); waiting for its nodes for ever")
    job = pending.group(1)
    assert [line.split()[:2] for line in live_jobs(slurm3)] == [[job, "PENDING"]]
    if how == "ctrl-c":
        os.killpg(command.proc.pid, signal.SIGINT)
    else:
        os.kill(command.proc.pid, signal.SIGTERM)
    code = command.finish(timeout=120)
    assert code == 1, command.text()
    name = "SIGINT" if how == "ctrl-c" else "SIGTERM"
    assert command.err[-1] == (
        f"nccl-preflight slurm: interrupted by {name}; job {job} cancelled "
        "(squeue no longer lists it)"
    ), command.text()
    assert_cancelled(slurm3, job, command)


def test_salloc_options_and_variables_reach_salloc(slurm3: Lab, tmp_path: Path) -> None:
    """--nodelist picks the named nodes, --exclude avoids one, --time and SALLOC_TIMELIMIT set
    the job's limit (the command line over the variable), and the job is exclusive."""
    first, second, third = slurm3.slurm_nodes
    picked = Command(slurm3, tmp_path / "picked", "-N", "2", "-w", f"{first},{third}", "-t", "10",
                     env={"SALLOC_TIMELIMIT": "30"})  # fmt: skip
    code = picked.finish(timeout=600)
    assert code == 0, picked.text()
    _, granted = picked.line(r"on job (\d+): (.*)$", timeout=1)
    assert granted.group(2) == f"{first}, {third}", picked.text()
    fields = job_fields(slurm3, granted.group(1))
    assert (fields["TimeLimit"], fields["OverSubscribe"]) == ("00:10:00", "NO"), fields
    assert fields["JobName"] == "nccl-preflight"

    avoided = Command(slurm3, tmp_path / "avoided", "-N", "2", "-x", first,
                      env={"SALLOC_TIMELIMIT": "0:30:00", "SALLOC_PARTITION": "lab"})  # fmt: skip
    code = avoided.finish(timeout=600)
    assert code == 0, avoided.text()
    _, granted = avoided.line(r"on job (\d+): (.*)$", timeout=1)
    assert granted.group(2) == f"{second}, {third}", avoided.text()
    fields = job_fields(slurm3, granted.group(1))
    assert (fields["TimeLimit"], fields["Partition"]) == ("00:30:00", "lab"), fields
    assert live_jobs(slurm3) == []
    slurm3.slurm_wait_idle()
